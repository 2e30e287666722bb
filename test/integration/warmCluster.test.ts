/**
 * Warming in cluster mode (issue #19): a real redis-server, two real proxies sharing a file
 * variant store, real ffmpeg paced with `-re` (a render lasts the source's 3 s). The same entry
 * warmed on both nodes renders once cluster-wide: the second node finds the first one's render
 * claim and reports `started` with `state: "peer"`, spawning nothing; the variant is stored
 * once, the claim released when the job settles.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLAIM_KEY_PREFIX } from '../../src/cluster/renderClaim.js';
import { loadConfig } from '../../src/config/index.js';
import { type AudioProxy, createAudioProxy } from '../../src/proxy.js';
import { resolveFfmpeg } from '../../src/workers/ffmpegPath.js';
import { type RedisServer, startRedisServer } from '../cluster/redisServer.js';
import { makeFixtures } from '../fixtures/audio.js';
import { freePort } from '../ports.js';
import { spawnLogger, waitFor } from './harness.js';

interface Node {
  readonly proxy: AudioProxy;
  readonly url: string;
  readonly metricsUrl: string;
  spawns(): Promise<number[]>;
}

let redis: RedisServer;
let client: Redis;
let store: string;
const nodes: Node[] = [];

async function startNode(id: string, localRoot: string): Promise<Node> {
  const port = await freePort();
  const logger = await spawnLogger(resolveFfmpeg({ env: process.env }).path, ['-re']);
  const proxy = await createAudioProxy({
    config: loadConfig({
      AP_LOCAL_ROOT: localRoot,
      AP_ALLOW_INSECURE: '1',
      AP_KEY: 'c1'.repeat(32),
      AP_SALT: '5a17',
      AP_LOG_LEVEL: 'error',
      AP_MAX_CONCURRENCY: '1',
      AP_MAX_PROBE_CONCURRENCY: '2',
      AP_FFMPEG_PATH: logger.path,
      AP_VARIANT_STORE: `file://${store}`,
      AP_SERVE_MODE: 'proxy',
      AP_PORT: String(port),
      AP_CLUSTER_REDIS_URL: redis.url,
      AP_CLUSTER_NODE_ID: id,
      AP_CLUSTER_ADVERTISE_URL: `http://127.0.0.1:${port}`,
    }),
    logger: pino({ level: 'silent' }),
  });
  const { url, metricsUrl } = await proxy.listen({
    host: '127.0.0.1',
    port,
    metricsHost: '127.0.0.1',
    metricsPort: 0,
  });
  return { proxy, url, metricsUrl, spawns: () => logger.pids() };
}

async function warmOn(node: Node, path: string) {
  const res = await fetch(`${node.url}/warm`, {
    method: 'POST',
    body: JSON.stringify({ entries: [{ path, class: 'normal' }] }),
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { entries: Record<string, unknown>[] }).entries[0]!;
}

beforeAll(async () => {
  const fixtures = await makeFixtures();
  store = await mkdtemp(join(tmpdir(), 'ap-warm-cluster-'));
  redis = await startRedisServer();
  client = new Redis(redis.url, { maxRetriesPerRequest: 0, lazyConnect: true });
  client.on('error', () => {});
  await client.connect();
  // one after the other: the shared store's boot sweep is not safe against a sibling's
  for (const id of ['node-a', 'node-b']) nodes.push(await startNode(id, fixtures.dir));
}, 60_000);

afterAll(async () => {
  for (const n of nodes) await n.proxy.close();
  client?.disconnect();
  await redis?.stop();
  await rm(store, { recursive: true, force: true });
});

describe('warming in cluster mode', () => {
  it('an entry warmed on two nodes renders once cluster-wide', async () => {
    const path = '/insecure/f:opus/cb:cluster-warm/plain/local://stereo.wav';
    const [a, b] = nodes as [Node, Node];
    const first = await warmOn(a, path);
    expect(first).toMatchObject({ status: 'started' });
    expect(await client.keys(`${CLAIM_KEY_PREFIX}*`)).toHaveLength(1);
    const second = await warmOn(b, path);
    expect(second).toMatchObject({ status: 'started', state: 'peer', node: 'node-a' });
    await waitFor(
      async () => a.proxy.warm!.status().recent.some((j) => j.state === 'stored'),
      20_000,
      100,
    );
    expect(await b.spawns()).toEqual([]);
    expect(await a.spawns()).toHaveLength(1);
    // the claim goes with the job; a third warm, anywhere, is a hit
    await waitFor(async () => (await client.keys(`${CLAIM_KEY_PREFIX}*`)).length === 0, 10_000);
    expect(await warmOn(b, path)).toMatchObject({ status: 'hit' });
  }, 60_000);
});
