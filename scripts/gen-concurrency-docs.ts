/**
 * docs/concurrency-replay.md and the recordings its diagrams are drawn from.
 *
 *   npx tsx scripts/gen-concurrency-docs.ts            write the page from docs/recordings/
 *   npx tsx scripts/gen-concurrency-docs.ts --check    exit 1 if the page is stale (writes nothing)
 *   npx tsx scripts/gen-concurrency-docs.ts --record   re-record every scenario (real proxies,
 *                                                      real ffmpeg, a real redis-server for the
 *                                                      cluster hand-off), then write the page
 *
 * The scenarios (`src/debug/replayDocs.ts`'s `REPLAY_SCENARIOS`) are recorded by the functions
 * below (the cluster hand-off's one run gives two, one per node), exported for
 * test/concurrencyDocs.test.ts, which re-records each to prove the committed recordings still
 * match what the code does.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { loadConfig } from '../src/config/index.js';
import { formatRecording, parseRecording, type Recording } from '../src/core/recording.js';
import { REPLAY_SCENARIOS, renderReplayDocs } from '../src/debug/replayDocs.js';
import { createAudioProxy } from '../src/proxy.js';
import { resolveFfmpeg } from '../src/workers/ffmpegPath.js';
import { startRedisServer } from '../test/cluster/redisServer.js';
import { freePort } from '../test/ports.js';

const DOCS = fileURLToPath(new URL('../docs/', import.meta.url));
export const RECORDINGS_DIR = join(DOCS, 'recordings');
const PAGE = join(DOCS, 'concurrency-replay.md');

interface Answer {
  readonly status: number;
  readonly cookie: string | undefined;
  readonly body: string;
}

/** One request on a fresh socket: status, the `name=value` of its cookie, the body as text. */
function fetchAnswer(url: string, method = 'GET', cookie?: string, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = cookie === undefined ? {} : { cookie };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const req = httpRequest(url, { agent: false, method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          cookie: res.headers['set-cookie']?.[0]?.split(';')[0],
          body: Buffer.concat(chunks).toString('utf8'),
        }),
      );
    });
    req.on('error', reject);
    req.end(body);
  });
}

function fetchStatus(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

/** ffmpeg's arguments for the two-second mono tone every scenario renders. */
const toneArgs = (out: string, seconds = 2) => [
  '-v',
  'error',
  '-f',
  'lavfi',
  '-i',
  `sine=frequency=440:duration=${seconds}`,
  '-ac',
  '1',
  out,
];

/**
 * An ffmpeg that reads its input at native speed (`-re`), so a render lasts as long as its
 * source: how a scenario keeps a slot busy while its next request arrives.
 */
function pacedFfmpeg(root: string, ffmpeg: string): string {
  const paced = join(root, 'ffmpeg-paced');
  const listing = '-filters|-encoders|-decoders|-formats';
  writeFileSync(
    paced,
    `#!/bin/sh\ncase "$1" in ${listing}) exec '${ffmpeg}' "$@" ;; esac\nexec '${ffmpeg}' -re "$@"\n`,
    { mode: 0o755 },
  );
  return paced;
}

async function withProxy(
  env: Record<string, string>,
  run: (url: string) => Promise<void>,
  reason: string,
  opts: { toneSeconds?: number; paced?: boolean } = {},
): Promise<Recording> {
  const ffmpeg = resolveFfmpeg({ env: process.env }).path;
  const root = mkdtempSync(join(tmpdir(), 'ap-docs-rec-'));
  execFileSync(ffmpeg, toneArgs(join(root, 'tone.wav'), opts.toneSeconds));
  const config = loadConfig({
    ...(opts.paced ? { AP_FFMPEG_PATH: pacedFfmpeg(root, ffmpeg) } : {}),
    AP_LOCAL_ROOT: root,
    AP_ALLOW_INSECURE: '1',
    AP_MAX_CONCURRENCY: '1',
    AP_LOG_LEVEL: 'error',
    AP_FLIGHT_RECORDER: '50000',
    ...env,
  });
  const proxy = await createAudioProxy({ config, logger: pino({ level: 'silent' }) });
  try {
    const { url } = await proxy.listen({ host: '127.0.0.1', port: 0, metricsPort: 0 });
    await run(url);
    await new Promise((r) => setTimeout(r, 1_500)); // the coordinators' linger ends
    return proxy.recorder!.recording(reason);
  } finally {
    await proxy.close();
  }
}

/** Three concurrent requests for one variant. */
export function recordCoalescedCrowd(): Promise<Recording> {
  return withProxy(
    {},
    async (url) => {
      const path = `${url}/insecure/f:mp3/t:0:2/plain/local://tone.wav`;
      const statuses = await Promise.all([fetchStatus(path), fetchStatus(path), fetchStatus(path)]);
      if (statuses.some((s) => s !== 200)) throw new Error(`crowd answered ${statuses.join(',')}`);
    },
    'docs: coalesced-crowd',
  );
}

/** Two renders one after the other, with a pool retired after each task. */
export function recordRecycledPool(): Promise<Recording> {
  return withProxy(
    { AP_MAX_RENDERS_PER_WORKER_POOL: '1' },
    async (url) => {
      for (const t of ['t:0:1', 't:1:1']) {
        const status = await fetchStatus(`${url}/insecure/f:mp3/${t}/plain/local://tone.wav`);
        if (status !== 200) throw new Error(`render answered ${status}`);
      }
    },
    'docs: recycled-pool',
  );
}

/**
 * Through HTTP: one slot, a queue of one, a variant store (warming needs one), ffmpeg paced. A
 * `POST /warm` of two `low` entries fills the slot and the queue; a live request then finds the
 * queue full and displaces the queued warm entry (and, waiting, preempts the running one), then
 * takes the slot. One attempt per warm entry, so no retry adds to the picture.
 */
export function recordDisplacedWaiter(): Promise<Recording> {
  const store = mkdtempSync(join(tmpdir(), 'ap-docs-store-'));
  return withProxy(
    {
      AP_QUEUE_SIZE: '1',
      AP_VARIANT_STORE: `file://${store}`,
      AP_SERVE_MODE: 'proxy',
      AP_WARM_ATTEMPTS: '1',
      AP_WARM_ADMITTED: '2', // both warm entries in the semaphore: one running, one queued
    },
    async (url) => {
      const warm = (cb: string) => `/insecure/f:mp3/cb:${cb}/plain/local://tone.wav`;
      const posted = await fetchAnswer(
        `${url}/warm`,
        'POST',
        undefined,
        JSON.stringify({
          entries: [warm('warm-1'), warm('warm-2')].map((path) => ({ path, class: 'low' })),
        }),
      );
      if (posted.status !== 200)
        throw new Error(`POST /warm answered ${posted.status}: ${posted.body}`);
      await new Promise((r) => setTimeout(r, 1_000)); // the first warm render is running
      const live = await fetchAnswer(`${url}/insecure/f:mp3/t:0:2/plain/local://tone.wav`);
      if (live.status !== 200) throw new Error(`the live request answered ${live.status}`);
    },
    'docs: displaced-waiter',
    { toneSeconds: 6, paced: true },
  );
}

/**
 * Two sessions, one waiting-room slot (`AP_MAX_CONCURRENCY=2`, so the room may hold one): the
 * first ticket is ready at once, the second queued behind it; the first session renders with its
 * cookie (an implicit claim of its reserved slot), its run ends, and the second ticket is promoted
 * to the slot and rendered.
 */
export function recordWaitingRoomPromotion(): Promise<Recording> {
  return withProxy(
    { AP_MAX_CONCURRENCY: '2', AP_WAITING_ROOM: '1' },
    async (url) => {
      const render = '/insecure/f:mp3/t:0:1/plain/local://tone.wav';
      const join = `${url}/api/v1/queue/join?path=${encodeURIComponent(render)}`;
      const first = await fetchAnswer(join, 'POST');
      const second = await fetchAnswer(join, 'POST');
      const statusOf = async (cookie: string | undefined) =>
        JSON.parse((await fetchAnswer(`${url}/api/v1/queue/status`, 'GET', cookie)).body) as {
          status?: string;
        };
      if ((await statusOf(first.cookie)).status !== 'ready') throw new Error('first not ready');
      if ((await statusOf(second.cookie)).status !== 'queued') throw new Error('second not queued');
      const ran = await fetchAnswer(`${url}${render}`, 'GET', first.cookie);
      if (ran.status !== 200) throw new Error(`first render answered ${ran.status}`);
      for (let i = 0; (await statusOf(second.cookie)).status !== 'ready'; i++) {
        if (i > 100) throw new Error('second ticket never promoted');
        await new Promise((r) => setTimeout(r, 50));
      }
      const promoted = await fetchAnswer(
        `${url}${render.replace('t:0:1', 't:1:1')}`,
        'GET',
        second.cookie,
      );
      if (promoted.status !== 200) throw new Error(`promoted render answered ${promoted.status}`);
    },
    'docs: waiting-room-promotion',
  );
}

/** A cluster node in its own process (scripts/concurrency-docs-node.ts), and its two URLs. */
async function startNode(
  env: Record<string, string>,
): Promise<{ child: ChildProcess; url: string; metricsUrl: string }> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', fileURLToPath(new URL('./concurrency-docs-node.ts', import.meta.url))],
    { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const [url, metricsUrl] = await new Promise<[string, string]>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /listening (\S+) (\S+)/.exec(out);
      if (m) resolve([m[1]!, m[2]!]);
    });
    child.once('exit', (code) => reject(new Error(`a docs node exited with ${code}`)));
  });
  return { child, url, metricsUrl };
}

async function stopNode(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
}

/**
 * Two nodes, each in its own process, on one real Redis (`/usr/bin/redis-server`, spawned as the
 * cluster tests do), one render slot and no queue each, ffmpeg paced (`-re`) so a render lasts
 * its source's six seconds: a first request takes node A's slot, a second (another variant)
 * finds node A full and is handed to node B, which renders it. Each node's recording is
 * downloaded from its metrics listener (`GET /debug/recording`); the hop between them is HTTP,
 * not an actor message, so the result is one recording per node.
 */
export async function recordClusterHandoff(): Promise<{ a: Recording; b: Recording }> {
  const ffmpeg = resolveFfmpeg({ env: process.env }).path;
  const root = mkdtempSync(join(tmpdir(), 'ap-docs-rec-'));
  execFileSync(ffmpeg, toneArgs(join(root, 'tone.wav'), 6));
  const paced = pacedFfmpeg(root, ffmpeg);
  const redis = await startRedisServer();
  const nodes: ChildProcess[] = [];
  try {
    const started: { url: string; metricsUrl: string }[] = [];
    for (const id of ['node-a', 'node-b']) {
      const port = await freePort();
      const node = await startNode({
        AP_LOCAL_ROOT: root,
        AP_ALLOW_INSECURE: '1',
        AP_KEY: 'c1'.repeat(32), // the cluster's signing material also authenticates the hop
        AP_SALT: '5a17',
        AP_LOG_LEVEL: 'error',
        AP_PORT: String(port),
        AP_MAX_CONCURRENCY: '1',
        AP_QUEUE_SIZE: '0',
        AP_FFMPEG_PATH: paced,
        AP_FLIGHT_RECORDER: '50000',
        AP_CLUSTER_REDIS_URL: redis.url,
        AP_CLUSTER_NODE_ID: id,
        AP_CLUSTER_ADVERTISE_URL: `http://127.0.0.1:${port}`,
      });
      nodes.push(node.child);
      started.push(node);
    }
    const [a, b] = started as [(typeof started)[0], (typeof started)[0]];
    // both nodes registered in Redis (each node's ready once it has seen itself; give B its beat)
    await new Promise((r) => setTimeout(r, 1_000));
    const path = (cb: string) => `${a.url}/insecure/f:mp3/cb:${cb}/plain/local://tone.wav`;
    const first = fetchAnswer(path('first'));
    // ffmpeg flushes its output in 32 KiB writes, so the first byte may come only at the end;
    // the paced render lasts 6 s, the probe and the spawn well under 1.5 s
    await new Promise((r) => setTimeout(r, 1_500));
    const second = await fetchAnswer(path('handed-off'));
    const statuses = [(await first).status, second.status];
    if (statuses.join() !== '200,200') throw new Error(`answered ${statuses.join(', ')}`);
    await new Promise((r) => setTimeout(r, 1_500)); // the coordinators' linger ends
    const [ra, rb] = await Promise.all(
      [a, b].map(async (n) =>
        parseRecording((await fetchAnswer(`${n.metricsUrl}/debug/recording`)).body),
      ),
    );
    // the hand-off happened: node B rendered the second variant, node A only the first
    const rendered = (r: Recording) =>
      r.header.actors.filter((x) => x.chart === 'renderCoordinator').length;
    if (rendered(ra!) !== 1 || rendered(rb!) !== 1) {
      writeFileSync(join(root, 'node-a.ndjson'), formatRecording(ra!));
      throw new Error(
        `renders: node A ${rendered(ra!)}, node B ${rendered(rb!)}; not handed off (${root})`,
      );
    }
    return { a: ra!, b: rb! };
  } finally {
    for (const child of nodes) await stopNode(child);
    await redis.stop();
  }
}

export const RECORDERS: Record<string, () => Promise<Recording>> = {
  'coalesced-crowd': recordCoalescedCrowd,
  'displaced-waiter': recordDisplacedWaiter,
  'recycled-pool': recordRecycledPool,
  'waiting-room-promotion': recordWaitingRoomPromotion,
};

/** The committed recordings, by scenario id. */
export function committedRecordings(): Map<string, Recording> {
  const out = new Map<string, Recording>();
  for (const s of REPLAY_SCENARIOS) {
    try {
      out.set(s.id, parseRecording(readFileSync(join(RECORDINGS_DIR, `${s.id}.ndjson`), 'utf8')));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
  return out;
}

export function pagePath(): string {
  return PAGE;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv.includes('--record')) {
    mkdirSync(RECORDINGS_DIR, { recursive: true });
    for (const [id, record] of Object.entries(RECORDERS)) {
      const recording = await record();
      writeFileSync(join(RECORDINGS_DIR, `${id}.ndjson`), formatRecording(recording));
      process.stdout.write(`recorded ${id}: ${recording.entries.length} entries\n`);
    }
    const { a, b } = await recordClusterHandoff(); // one recording per node
    for (const [id, recording] of [
      ['cluster-handoff-node-a', a],
      ['cluster-handoff-node-b', b],
    ] as const) {
      writeFileSync(join(RECORDINGS_DIR, `${id}.ndjson`), formatRecording(recording));
      process.stdout.write(`recorded ${id}: ${recording.entries.length} entries\n`);
    }
  }
  const generated = renderReplayDocs(committedRecordings());
  if (process.argv.includes('--check')) {
    let current = '';
    try {
      current = readFileSync(PAGE, 'utf8');
    } catch {
      // missing counts as stale
    }
    if (current !== generated) {
      process.stderr.write(`${PAGE} is stale; run: npx tsx scripts/gen-concurrency-docs.ts\n`);
      process.exit(1);
    }
  } else {
    writeFileSync(PAGE, generated);
    process.stdout.write(`wrote ${PAGE}\n`);
  }
}
