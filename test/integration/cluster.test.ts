/**
 * Cluster mode end to end: a real redis-server, three real proxies on loopback sharing a file
 * variant store, real ffmpeg (paced with `-re`, so a render lasts the source's 3 s). Proves that
 * 30 identical requests spread over the nodes make exactly one ffmpeg and identical bytes; that
 * a saturated node's overflow is rendered by peers and only a full cluster answers 429; that a
 * node SIGKILLed mid-render leaves no claim and no slot behind once its lease lapses; and that
 * with Redis gone every node serves alone, without a single 5xx.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLAIM_KEY_PREFIX } from '../../src/cluster/renderClaim.js';
import { loadConfig } from '../../src/config/index.js';
import { type AudioProxy, createAudioProxy } from '../../src/proxy.js';
import { stats } from '../../src/services/semaphoreClient.js';
import { resolveFfmpeg } from '../../src/workers/ffmpegPath.js';
import { type RedisServer, startRedisServer } from '../cluster/redisServer.js';
import { type AudioFixtures, makeFixtures } from '../fixtures/audio.js';
import { freePort } from '../ports.js';
import { get, isAlive, type RawResponse, spawnLogger, waitFor } from './harness.js';

/** Short, so the kill test sees leases lapse quickly; long enough for a loaded 2-core box. */
const LEASE_MS = 3_000;
const WAIT_MS = 20_000;

interface Node {
  readonly id: string;
  readonly proxy: AudioProxy;
  readonly url: string;
  spawns(): Promise<number[]>;
}

let redis: RedisServer;
let client: Redis;
let fixtures: AudioFixtures;
let storeDir: string;
let realFfmpeg: string;
const nodes: Node[] = [];
/** node-d: a fourth node in its own process, killed by the third test. */
let doomed: { child: ChildProcess; url: string; port: number; store: string } | undefined;

function nodeEnv(
  id: string,
  port: number,
  ffmpeg: string,
  store = storeDir,
): Record<string, string> {
  return {
    AP_LOCAL_ROOT: fixtures.dir,
    AP_ALLOW_INSECURE: '1',
    // The cluster's shared signing material: it also authenticates the hop header between nodes.
    AP_KEY: 'c1'.repeat(32),
    AP_SALT: '5a17',
    AP_LOG_LEVEL: 'error',
    AP_MAX_CONCURRENCY: '1',
    AP_QUEUE_SIZE: '1',
    AP_READY_QUEUE_THRESHOLD: '1',
    AP_MAX_PROBE_CONCURRENCY: '2', // probes of one source coalesce; fewer threads to boot
    AP_FFMPEG_PATH: ffmpeg,
    AP_VARIANT_STORE: `file://${store}`,
    AP_SERVE_MODE: 'proxy',
    AP_PORT: String(port),
    AP_CLUSTER_REDIS_URL: redis.url,
    AP_CLUSTER_NODE_ID: id,
    AP_CLUSTER_ADVERTISE_URL: `http://127.0.0.1:${port}`,
    AP_CLUSTER_LEASE_MS: String(LEASE_MS),
  };
}

async function startNode(id: string): Promise<Node> {
  const port = await freePort();
  const logger = await spawnLogger(realFfmpeg, ['-re']);
  const proxy = await createAudioProxy({
    config: loadConfig(nodeEnv(id, port, logger.path)),
    logger: pino({ level: 'silent' }),
  });
  const { url } = await proxy.listen({
    host: '127.0.0.1',
    port,
    metricsHost: '127.0.0.1',
    metricsPort: 0,
  });
  return { id, proxy, url, spawns: () => logger.pids() };
}

const totalSpawns = async () =>
  (await Promise.all(nodes.map((n) => n.spawns()))).reduce((s, p) => s + p.length, 0);

const claimKeys = () => client.keys(`${CLAIM_KEY_PREFIX}*`);

/** Every node's registry count, as Redis sees it. */
async function heldByNode(): Promise<Record<string, number>> {
  const live = await nodes[0]!.proxy.cluster!.registry.nodes();
  return Object.fromEntries(live.map((n) => [n.id, n.held]));
}

/** Nothing held anywhere: no semaphore slot, no registry slot, no render claim. */
async function nothingHeld(): Promise<boolean> {
  for (const n of nodes) if ((await stats(n.proxy.actors.semaphore)).held !== 0) return false;
  if (Object.values(await heldByNode()).some((h) => h !== 0)) return false;
  return (await claimKeys()).length === 0;
}

beforeAll(async () => {
  fixtures = await makeFixtures();
  realFfmpeg = resolveFfmpeg({ env: process.env }).path;
  storeDir = await mkdtemp(join(tmpdir(), 'ap-cluster-store-'));
  redis = await startRedisServer();
  client = new Redis(redis.url, { maxRetriesPerRequest: 0, lazyConnect: true });
  client.on('error', () => {});
  await client.connect();
  // The shared store's boot sweep is not safe against a sibling booting at the same moment, so
  // a, b and c boot in turn; node-d (its own store) boots meanwhile in its own process.
  const child = startChildNode('node-d');
  child.catch(() => {});
  for (const id of ['node-a', 'node-b', 'node-c']) nodes.push(await startNode(id));
  doomed = await child;
  await waitFor(async () => Object.keys(await heldByNode()).length === 4, WAIT_MS);
}, 60_000);

/** A node in a child process (tsx as a loader in it: the tsx CLI would put a parent between). */
async function startChildNode(id: string) {
  const port = await freePort();
  const logger = await spawnLogger(realFfmpeg, ['-re']);
  const store = await mkdtemp(join(tmpdir(), 'ap-cluster-store-d-'));
  const child = spawn(process.execPath, ['--import', 'tsx', join(__dirname, 'clusterNode.ts')], {
    env: { PATH: process.env.PATH ?? '', ...nodeEnv(id, port, logger.path, store) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /listening (\S+)/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.once('exit', (code) => reject(new Error(`${id} exited with ${code}`)));
  });
  return { child, url, port, store };
}

afterAll(async () => {
  doomed?.child.kill('SIGKILL');
  await Promise.allSettled(nodes.map((n) => n.proxy.close()));
  for (const n of nodes) for (const pid of await n.spawns()) expect(isAlive(pid)).toBe(false);
  client?.disconnect();
  await redis?.kill();
  for (const dir of [storeDir, doomed?.store]) {
    if (dir) await rm(dir, { recursive: true, force: true });
  }
}, 60_000);

describe('cluster of three nodes on one Redis', () => {
  it('30 concurrent identical requests over 3 nodes: one ffmpeg, identical bytes', {
    timeout: 30_000,
  }, async () => {
    const before = await totalSpawns();
    // Opus: an mp3's stored info frame differs from the streamed placeholder (docs/ranges.md).
    const path = '/insecure/f:opus/cb:cluster-one/plain/local://stereo.wav';
    const responses = await Promise.all(
      Array.from({ length: 30 }, (_, i) => get(nodes[i % 3]!.url, path)),
    );
    expect(responses.map((r) => r.status)).toEqual(Array(30).fill(200));
    expect(responses.every((r) => r.complete)).toBe(true);
    const first = responses[0]!.body;
    expect(first.length).toBeGreaterThan(1_000);
    for (const r of responses) expect(r.body.equals(first)).toBe(true);
    expect((await totalSpawns()) - before).toBe(1);
    const statuses = responses.map((r) => r.headers['x-audio-proxy']);
    expect(statuses.filter((s) => s === 'MISS')).toHaveLength(1);
    expect(statuses.every((s) => s === 'MISS' || s === 'COALESCED' || s === 'HIT')).toBe(true);
    // The two nodes that did not render relayed their requests to the one that did.
    const relayed = nodes.map((n) => n.proxy.cluster!.forwards.relayed);
    expect(relayed.filter((r) => r > 0).length).toBe(2);
    expect(relayed.reduce((a, b) => a + b, 0)).toBe(20);
    const relayer = nodes[relayed.findIndex((r) => r > 0)]!;
    expect((await relayer.proxy.metrics.expose()).body).toMatch(
      /^audio_proxy_cluster_forwards_total\{outcome="relayed"\} 10$/m,
    );
    await waitFor(nothingHeld, WAIT_MS);
    // And once the variant is stored, every node answers it as a HIT, with the same bytes. The
    // wait polls with HEAD, which stops before any render: a GET that lands after the linger but
    // before the store's commit is a MISS that renders again (wasteful by design, never wrong),
    // and would count as a second ffmpeg here.
    for (const n of nodes) {
      await waitFor(
        async () => (await get(n.url, path, { method: 'HEAD' })).headers['x-audio-proxy'] === 'HIT',
        WAIT_MS,
      );
      const hit: RawResponse = await get(n.url, path);
      expect(hit.headers['x-audio-proxy']).toBe('HIT');
      expect(hit.body.equals(first)).toBe(true);
    }
    expect((await totalSpawns()) - before).toBe(1);
  });

  it('a client-sent hop header is not believed: the request is relayed to the owner, one ffmpeg', {
    timeout: 30_000,
  }, async () => {
    const [a, b] = nodes as [Node, Node, Node];
    const path = '/insecure/f:mp3/cb:forged-hop/plain/local://stereo.wav';
    const before = await totalSpawns();
    const relayedBefore = b.proxy.cluster!.forwards.relayed;
    let started!: () => void;
    const firstByte = new Promise<void>((r) => {
      started = r;
    });
    const owner = get(a.url, path, { onFirstByte: () => started() });
    await firstByte; // node-a holds the key's claim and renders it (3 s, paced)
    // A client claiming to be node-a's forward: believed, node-b would render a duplicate.
    const forged = await get(b.url, path, { headers: { 'x-ap-forwarded': 'node-a' } });
    const real = await owner;
    expect([forged.status, real.status]).toEqual([200, 200]);
    expect(forged.body.equals(real.body)).toBe(true);
    expect((await totalSpawns()) - before).toBe(1);
    expect(b.proxy.cluster!.forwards.relayed - relayedBefore).toBe(1);
    await waitFor(nothingHeld, WAIT_MS);
  });

  it('a client-sent hop header does not disable hand-off from a saturated node', {
    timeout: 40_000,
  }, async () => {
    const [a, b, c] = nodes as [Node, Node, Node];
    const handOffsBefore = a.proxy.cluster!.handOffs.relayed;
    // node-a: 1 slot + 1 queue place, so the third and fourth of four go to the peers.
    const responses = await Promise.all(
      Array.from({ length: 4 }, (_, i) =>
        get(a.url, `/insecure/f:mp3/t:0:2/cb:forged-sat-${i}/plain/local://stereo.wav`, {
          headers: { 'x-ap-forwarded': 'node-z' },
        }),
      ),
    );
    expect(responses.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    expect(a.proxy.cluster!.handOffs.relayed - handOffsBefore).toBe(2);
    expect(b.proxy.cluster!.handOffs.relayed + c.proxy.cluster!.handOffs.relayed).toBe(0);
    await waitFor(nothingHeld, WAIT_MS);
  });

  it('a node killed mid-render lets its claim and its slot lapse within the lease', {
    timeout: 40_000,
  }, async () => {
    const { child, url, port } = doomed!;
    try {
      await waitFor(async () => (await heldByNode())['node-d'] !== undefined, WAIT_MS);
      const path = '/insecure/f:mp3/t:0:2/cb:killed/plain/local://stereo.wav';
      let started!: () => void;
      const firstByte = new Promise<void>((r) => {
        started = r;
      });
      const torn = get(url, path, { onFirstByte: () => started() });
      await firstByte;
      // Mid-render node-d holds the key's claim and one committed slot.
      const claims = await claimKeys();
      expect(claims).toHaveLength(1);
      expect(await client.get(claims[0]!)).toBe(`node-d|http://127.0.0.1:${port}`);
      expect((await heldByNode())['node-d']).toBe(1);

      child.kill('SIGKILL');
      const killedAt = Date.now();
      expect((await torn).complete).toBe(false);
      // A request for the same key now finds the claim of a dead node: served anyway.
      const meanwhile = await get(nodes[0]!.url, path);
      expect(meanwhile.status).toBe(200);
      expect(meanwhile.complete).toBe(true);
      await waitFor(async () => (await claimKeys()).length === 0, WAIT_MS);
      await waitFor(async () => (await heldByNode())['node-d'] === undefined, WAIT_MS);
      // The lease bounds it (plus slack for a loaded machine's timers).
      expect(Date.now() - killedAt).toBeLessThan(LEASE_MS * 2 + 10_000);
      await waitFor(nothingHeld, WAIT_MS);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('a saturated node hands its overflow to peers; only a full cluster answers 429', {
    timeout: 40_000,
  }, async () => {
    const [a, b, c] = nodes as [Node, Node, Node];
    expect(Object.keys(await heldByNode()).sort()).toEqual(['node-a', 'node-b', 'node-c']);
    const spawnsBefore = await Promise.all(nodes.map((n) => n.spawns().then((p) => p.length)));
    const { relayed: relayedBefore, refused: refusedBefore } = a.proxy.cluster!.handOffs;
    // node-a: 1 slot + 1 queue place; node-b and node-c: 1 slot each. Five distinct renders at
    // node-a: 1 runs there, 1 waits there, 2 go to the peers, and the fifth finds no room.
    const responses = await Promise.all(
      Array.from({ length: 5 }, (_, i) =>
        get(a.url, `/insecure/f:mp3/t:0:2/cb:sat-${i}/plain/local://stereo.wav`),
      ),
    );
    const statuses = responses.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 200, 200, 200, 429]);
    const refused = responses.find((r) => r.status === 429)!;
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    for (const r of responses.filter((x) => x.status === 200)) expect(r.complete).toBe(true);
    const spawned = await Promise.all(
      nodes.map(async (n, i) => (await n.spawns()).length - spawnsBefore[i]!),
    );
    expect(spawned).toEqual([2, 1, 1]);
    expect(a.proxy.cluster!.handOffs.relayed - relayedBefore).toBe(2);
    expect(a.proxy.cluster!.handOffs.refused - refusedBefore).toBe(1);
    expect(b.proxy.cluster!.handOffs.relayed + c.proxy.cluster!.handOffs.relayed).toBe(0);
    await waitFor(nothingHeld, WAIT_MS);
  });

  it('Redis stopped mid-run: every node serves alone, no 5xx', { timeout: 40_000 }, async () => {
    await redis.stop();
    const [a] = nodes as [Node, Node, Node];
    const before = await totalSpawns();
    // The same key on every node: each renders it alone (a duplicate render, not a failure).
    const same = '/insecure/f:mp3/t:0:1/cb:no-redis/plain/local://stereo.wav';
    const responses: RawResponse[] = await Promise.all(nodes.map((n) => get(n.url, same)));
    expect(responses.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(responses.every((r) => r.complete)).toBe(true);
    expect((await totalSpawns()) - before).toBeLessThanOrEqual(3);
    // Saturation without Redis is single-node saturation: 1 runs, 1 waits, the third is a 429.
    const burst = await Promise.all(
      Array.from({ length: 3 }, (_, i) =>
        get(a.url, `/insecure/f:mp3/t:0:1/cb:alone-${i}/plain/local://stereo.wav`),
      ),
    );
    expect(burst.map((r) => r.status).sort()).toEqual([200, 200, 429]);
    const metrics = await a.proxy.metrics.expose();
    expect(metrics.body).toMatch(/^audio_proxy_cluster_redis_up 0$/m);
    const fivexx = await Promise.all(
      nodes.map(async (n) => {
        const m = (await n.proxy.metrics.expose()).body;
        return /audio_proxy_http_requests_total\{[^}]*status="5xx"[^}]*\} [1-9]/.test(m);
      }),
    );
    expect(fivexx).toEqual([false, false, false]);
  });
});
