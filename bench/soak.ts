/**
 * Soak: `npx tsx --expose-gc bench/soak.ts [--renders 2000] [--concurrency 2] [--seconds 54]
 * [--store] [--format wav|mp3|…]` (or `npm run bench -- soak …`).
 *
 * Renders `--renders` distinct variants (`f:wav` with a cache buster each, so every one is a
 * MISS that runs ffmpeg) of a generated stereo WAV of `--seconds` seconds (54 s: a ~9.5 MB
 * variant, the size of the issue-14 reproduction) through a real proxy in this process, with
 * `--concurrency` clients reading each body to the end and dropping it. `--store` adds a file
 * variant store (the tee writes every render; its hot cache counts as a configured cache).
 *
 * It samples, after a warm-up of `WARM_UP_RENDERS` renders and a full GC (start), halfway
 * (middle) and after the last render plus the coordinators' linger and a full GC (end): RSS,
 * heap used, external memory, array buffers, open file descriptors (/proc/self/fd), slots held,
 * queue depth, live coordinators and live ffmpeg children (processes whose parent is this one).
 *
 * PASS when end RSS ≤ start RSS + configured caches + `HEADROOM_BYTES` and nothing is held at
 * the end (slots, queue, coordinators, children); FAIL (exit 1) otherwise. The figures go to
 * docs/performance.md ("Soak").
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { loadConfig } from '../src/config/index.js';
import { createAudioProxy } from '../src/proxy.js';
import { stats } from '../src/services/semaphoreClient.js';
import { resolveFfmpeg } from '../src/workers/ffmpegPath.js';
import { report } from './report.js';

const WARM_UP_RENDERS = 10; // JIT, worker threads and allocator pools settle before "start"
const HEADROOM_BYTES = 64 * 2 ** 20; // the issue's allowance over idle + caches
const SETTLE_MS = 1_500; // past the coordinators' 1 s linger, so every one has stopped

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : Number(process.argv[i + 1]);
}
const RENDERS = arg('renders', 2_000);
const CONCURRENCY = arg('concurrency', 2);
const SECONDS = arg('seconds', 54);
const STORE = process.argv.includes('--store');
/** `--format mp3` (or any format) instead of wav: an mp3 also takes the info-frame path. */
const FORMAT = (() => {
  const i = process.argv.indexOf('--format');
  return i === -1 ? 'wav' : String(process.argv[i + 1]);
})();

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) {
  console.error('soak: run with --expose-gc (npm run bench -- soak does)');
  process.exit(2);
}

const dir = join(tmpdir(), 'audio-proxy-bench-soak');
mkdirSync(dir, { recursive: true });
const source = join(dir, `tone-${SECONDS}s.wav`);
try {
  readFileSync(source, { flag: 'r' }).length;
} catch {
  execFileSync(resolveFfmpeg({ env: process.env }).path, [
    ...['-nostdin', '-hide_banner', '-loglevel', 'error', '-y'],
    ...['-f', 'lavfi', '-i', `sine=frequency=440:sample_rate=44100:duration=${SECONDS}`],
    ...['-ac', '2', '-c:a', 'pcm_s16le', source],
  ]);
}

const env: Record<string, string> = {
  AP_LOCAL_ROOT: dir,
  AP_ALLOW_INSECURE: '1',
  AP_LOG_LEVEL: 'error',
  AP_MAX_CONCURRENCY: String(CONCURRENCY),
  AP_QUEUE_SIZE: String(Math.max(8, CONCURRENCY * 2)),
};
// Any AP_* setting in the environment applies too (AP_MAX_RENDERS_PER_WORKER_POOL, say).
for (const [k, v] of Object.entries(process.env)) if (k.startsWith('AP_') && v) env[k] = v;
if (STORE) {
  // The store's root must exist (config refuses a missing directory); one per run.
  const root = join(dir, `store-${process.pid}`);
  mkdirSync(root, { recursive: true });
  env.AP_VARIANT_STORE = `file://${root}`;
  env.AP_SERVE_MODE = 'proxy'; // a file store cannot presign: hits are served by the proxy
}
const config = loadConfig(env);
const proxy = await createAudioProxy({ config, logger: pino({ level: 'silent' }) });
const { url } = await proxy.listen({ host: '127.0.0.1', port: 0, metricsPort: 0 });
const base = new URL(url);
const cachesBytes = STORE ? config.hitCacheBytes : 0;

function fetchDrain(path: string): Promise<{ status: number; bytes: number }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: base.hostname, port: base.port, path, agent: false }, (res) => {
      let bytes = 0;
      res.on('data', (c: Buffer) => {
        bytes += c.length;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

function ffmpegChildren(): number {
  let n = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      const comm = stat.slice(stat.indexOf('(') + 1, close);
      const fields = stat.slice(close + 2).split(' ');
      // fields[0] is the state, fields[1] the parent; a zombie holds nothing but its entry
      if (Number(fields[1]) === process.pid && fields[0] !== 'Z' && comm.startsWith('ffmpeg')) n++;
    } catch {
      // exited while we looked
    }
  }
  return n;
}

interface Sample {
  readonly rss: number;
  readonly heapUsed: number;
  readonly external: number;
  readonly arrayBuffers: number;
  readonly fds: number;
  readonly slotsHeld: number;
  readonly queued: number;
  readonly coordinators: number;
  readonly children: number;
}

async function sample(): Promise<Sample> {
  await new Promise((r) => setTimeout(r, SETTLE_MS));
  for (let i = 0; i < 3; i++) {
    gc!();
    await new Promise((r) => setImmediate(r));
  }
  const m = process.memoryUsage();
  const s = await stats(proxy.actors.semaphore);
  return {
    rss: m.rss,
    heapUsed: m.heapUsed,
    external: m.external,
    arrayBuffers: m.arrayBuffers,
    fds: readdirSync('/proc/self/fd').length,
    slotsHeld: s.held,
    queued: s.queued,
    coordinators: proxy.renders.live,
    children: ffmpegChildren(),
  };
}

let next = 0;
let failures = 0;
let variantBytes = 0;
async function renderUpTo(limit: number): Promise<void> {
  const client = async () => {
    while (next < limit) {
      const i = next++;
      const r = await fetchDrain(
        `/insecure/f:${FORMAT}/cb:soak${i}/plain/local://${source.split('/').pop()}`,
      );
      if (r.status !== 200) failures++;
      else variantBytes = r.bytes;
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, client));
}

const t0 = performance.now();
await renderUpTo(WARM_UP_RENDERS);
const start = await sample();
await renderUpTo(WARM_UP_RENDERS + Math.floor(RENDERS / 2));
const middle = await sample();
await renderUpTo(WARM_UP_RENDERS + RENDERS);
const end = await sample();
const seconds = (performance.now() - t0) / 1000;
await proxy.close();

const mib = (b: number) => (b / 2 ** 20).toFixed(1);
const rows: Array<[string, (s: Sample) => string]> = [
  ['RSS (MiB)', (s) => mib(s.rss)],
  ['heap used (MiB)', (s) => mib(s.heapUsed)],
  ['external (MiB)', (s) => mib(s.external)],
  ['array buffers (MiB)', (s) => mib(s.arrayBuffers)],
  ['open fds', (s) => String(s.fds)],
  ['slots held', (s) => String(s.slotsHeld)],
  ['queue depth', (s) => String(s.queued)],
  ['live coordinators', (s) => String(s.coordinators)],
  ['live ffmpeg children', (s) => String(s.children)],
];
console.log(
  `soak: ${RENDERS} renders of a ${mib(variantBytes)} MiB variant (f:${FORMAT}, ${SECONDS} s stereo), ${CONCURRENCY} clients, store ${STORE ? 'file' : 'none'}, ${seconds.toFixed(0)} s, ${failures} non-200`,
);
console.log(`| figure | start | middle | end |\n|---|---|---|---|`);
for (const [name, f] of rows) console.log(`| ${name} | ${f(start)} | ${f(middle)} | ${f(end)} |`);
const bound = start.rss + cachesBytes + HEADROOM_BYTES;
const perRender = (end.rss - start.rss) / RENDERS;
console.log(
  `RSS per render (end - start) / renders: ${(perRender / 1024).toFixed(1)} KiB; bound: start ${mib(start.rss)} + caches ${mib(cachesBytes)} + ${mib(HEADROOM_BYTES)} = ${mib(bound)} MiB`,
);
const held = end.slotsHeld + end.queued + end.coordinators + end.children;
const pass = end.rss <= bound && held === 0 && failures === 0;
console.log(
  pass
    ? 'PASS'
    : `FAIL${held ? ' (something still held)' : ''}${failures ? ` (${failures} non-200)` : ''}`,
);
report('soak', {
  renders: RENDERS,
  startRssMiB: Number(mib(start.rss)),
  endRssMiB: Number(mib(end.rss)),
  perRenderKiB: Number((perRender / 1024).toFixed(1)),
  pass: pass ? 'PASS' : 'FAIL',
});
process.exit(pass ? 0 : 1);
