/**
 * Admission classes through HTTP (issue #19): `npx tsx bench/classes.ts [--rounds 2] [--live 30]`.
 *
 * One proxy (AP_MAX_CONCURRENCY=2, AP_QUEUE_SIZE=16, a file variant store, real ffmpeg). Each
 * round measures live GETs (each a MISS of its own variant, one at a time) twice, in the same
 * run: on an idle node, and under a saturating warm load: `POST /warm` entries at `low`,
 * topped up so both render slots and the whole wait queue hold warm work the whole time
 * (AP_WARM_ADMITTED = slots + queue). Rounds alternate the two so drift in a shared machine's
 * load falls on both. Prints time to first byte (p50, p90, p99, max) for both, the warm
 * outcomes (stored, displaced, preempted), and checks the target: loaded p99 within 10 % of the
 * idle p99 plus one render (the idle p50 of a whole warm-sized render, measured first).
 * Exits 1 when the target is missed or a live request was refused.
 */
import { execFileSync } from 'node:child_process';
import diagnostics from 'node:diagnostics_channel';
import { mkdtemp, rename, rm, stat } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { loadConfig, mutableConfig } from '../src/config/index.js';
import { createAudioProxy } from '../src/proxy.js';
import { stats } from '../src/services/semaphoreClient.js';
import { resolveFfmpeg } from '../src/workers/ffmpegPath.js';
import { makeFixtures } from '../test/fixtures/audio.js';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : Number(process.argv[i + 1]);
}

const CAPACITY = 2;
const QUEUE = 16;
const rounds = arg('rounds', 2);
const liveN = arg('live', 30);

const fixtures = await makeFixtures();
/** A 10 s source: warm renders of it are long enough to hold a slot through a live request. */
async function longSource(dir: string): Promise<string> {
  const name = 'classes-bench-10s.wav';
  const target = join(dir, name);
  if (await stat(target).catch(() => null)) return name;
  const tmp = `${target}.${process.pid}.part.wav`;
  execFileSync(resolveFfmpeg({ env: process.env }).path, [
    ...['-nostdin', '-loglevel', 'error', '-y', '-f', 'lavfi'],
    ...['-i', 'sine=frequency=330:sample_rate=44100:duration=10', '-ac', '2', tmp],
  ]);
  await rename(tmp, target);
  return name;
}
const long = await longSource(fixtures.dir);
const root = await mkdtemp(join(tmpdir(), 'ap-bench-classes-'));
const config = mutableConfig(
  loadConfig({
    AP_LOCAL_ROOT: fixtures.dir,
    AP_ALLOW_INSECURE: '1',
    AP_LOG_LEVEL: 'error',
    AP_MAX_CONCURRENCY: String(CAPACITY),
    AP_QUEUE_SIZE: String(QUEUE),
    AP_VARIANT_STORE: `file://${root}`,
    AP_SERVE_MODE: 'proxy',
    AP_WARM_ADMITTED: String(CAPACITY + QUEUE),
    AP_WARM_ATTEMPTS: '3',
    AP_WARM_BACKOFF_MAX_SECONDS: '2',
  }),
);
const proxy = await createAudioProxy({ config, logger: pino({ level: 'silent' }) });
const { url, metricsUrl } = await proxy.listen({ host: '127.0.0.1', port: 0, metricsPort: 0 });
const base = new URL(url);
// The semaphore's own account of each live request's wait for a slot (its `acquired` events).
let phase: 'idle' | 'loaded' | 'none' = 'none';
const slotWaits = { idle: [] as number[], loaded: [] as number[] };
diagnostics.subscribe('audio_proxy.semaphore.acquired', (m) => {
  const { measurements, metadata } = m as {
    measurements: { wait?: number };
    metadata: { class: string };
  };
  if (phase !== 'none' && metadata.class === 'interactive') {
    slotWaits[phase].push(measurements.wait ?? 0);
  }
});

/** Time to first byte and to the end of one GET, in ms; its status. */
function timedGet(path: string): Promise<{ status: number; ttfb: number; total: number }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    let ttfb = Number.NaN;
    const req = request({ host: base.hostname, port: base.port, path, agent: false }, (res) => {
      res.once('data', () => {
        ttfb = performance.now() - t0;
      });
      res.on('data', () => {});
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          ttfb: Number.isNaN(ttfb) ? performance.now() - t0 : ttfb,
          total: performance.now() - t0,
        }),
      );
    });
    req.on('error', reject);
    req.end();
  });
}

let seq = 0;
const livePath = () => `/insecure/f:mp3/t:0:2/cb:live${++seq}/plain/local://stereo.wav`;
const warmPath = () => `/insecure/f:opus/cb:warm${++seq}/plain/local://${long}`;

async function warmBatch(n: number): Promise<void> {
  const entries = Array.from({ length: n }, () => ({ path: warmPath(), class: 'low' }));
  const res = await fetch(`${url}/warm`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ entries }),
  });
  if (res.status !== 200) throw new Error(`warm answered ${res.status}`);
  await res.text();
}

/** Keeps slots and queue full of warm work until `stop` is called. */
function saturate(): { stop: () => Promise<void> } {
  let running = true;
  const loop = (async () => {
    while (running) {
      const s = await stats(proxy.actors.semaphore);
      const want = CAPACITY + QUEUE - (proxy.warm?.pending ?? 0);
      if (want > 0) await warmBatch(want + 4);
      else if (s.queuedByClass.low === 0) await warmBatch(4);
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
    },
  };
}

async function saturated(): Promise<void> {
  for (;;) {
    const s = await stats(proxy.actors.semaphore);
    if (s.held === CAPACITY && s.queuedByClass.low >= QUEUE - 2) return;
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function liveBatch(n: number, check?: () => Promise<void>) {
  const ttfbs: number[] = [];
  let refused = 0;
  for (let i = 0; i < n; i++) {
    if (check) await check();
    const r = await timedGet(livePath());
    if (r.status !== 200) refused++;
    else ttfbs.push(r.ttfb);
  }
  return { ttfbs, refused };
}

const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0
    ? Number.NaN
    : s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
};

async function metric(line: string): Promise<number> {
  const text = await (await fetch(`${metricsUrl}/metrics`)).text();
  const found = text.split('\n').find((l) => l.startsWith(`${line} `));
  return found === undefined ? 0 : Number(found.slice(line.length + 1));
}

// One warm-sized render on the idle node: the "one render in progress" of the target.
await timedGet(livePath()); // warm the pools
const renderMs: number[] = [];
for (let i = 0; i < 3; i++) renderMs.push((await timedGet(warmPath())).total);
const oneRender = percentile(renderMs, 50);
console.log(
  `classes over HTTP: ${CAPACITY} slots, queue ${QUEUE}, ${rounds} rounds × ${liveN} live GETs per phase; one warm render ${oneRender.toFixed(0)} ms`,
);

const idle: number[] = [];
const loaded: number[] = [];
let refused = 0;
for (let r = 0; r < rounds; r++) {
  phase = 'idle';
  const a = await liveBatch(liveN);
  phase = 'none';
  idle.push(...a.ttfbs);
  refused += a.refused;
  const load = saturate();
  await saturated();
  phase = 'loaded';
  const b = await liveBatch(liveN, saturated);
  phase = 'none';
  loaded.push(...b.ttfbs);
  refused += b.refused;
  await load.stop();
  // the warm work drains (nothing is topped up) before the next idle phase
  for (;;) {
    const s = await stats(proxy.actors.semaphore);
    if (s.held === 0 && s.queued === 0 && (proxy.warm?.pending ?? 0) === 0) break;
    await new Promise((res) => setTimeout(res, 100));
  }
}
const status = proxy.warm!.status();
const failures: Record<string, number> = {};
for (const j of status.recent) {
  if (j.state === 'failed') failures[j.failure ?? '?'] = (failures[j.failure ?? '?'] ?? 0) + 1;
}
const displaced = await metric('audio_proxy_render_displaced_total{class="low"}');
const preempted = await metric('audio_proxy_render_orphans_preempted_total');
await proxy.close();
await rm(root, { recursive: true, force: true });

const fmt = (ms: number) => `${ms.toFixed(0)}`.padStart(6);
const row = (name: string, xs: number[]) =>
  console.log(
    `${name.padEnd(8)} ${String(xs.length).padStart(4)} ${fmt(percentile(xs, 50))} ${fmt(percentile(xs, 90))} ${fmt(percentile(xs, 99))} ${fmt(percentile(xs, 100))}`,
  );
console.log('\nlive time to first byte (ms)');
console.log('phase       n    p50    p90    p99    max');
row('idle', idle);
row('loaded', loaded);
console.log("\nof which: waiting for a render slot (ms, the semaphore's `acquired` wait)");
row('idle', slotWaits.idle);
row('loaded', slotWaits.loaded);
console.log(
  `\nwarm: ${JSON.stringify(status.counts)}; displaced (low) ${displaced}; warm renders preempted for a listener ${preempted}`,
);
console.log(`warm failures (last ${status.recent.length} settled): ${JSON.stringify(failures)}`);
const idleP99 = percentile(idle, 99);
const loadP99 = percentile(loaded, 99);
const bound = idleP99 * 1.1 + oneRender;
console.log(
  `loaded p99 ${loadP99.toFixed(0)} ms vs idle p99 ${idleP99.toFixed(0)} ms × 1.1 + one render ${oneRender.toFixed(0)} ms = ${bound.toFixed(0)} ms; ratio loaded/idle p99 ${(loadP99 / idleP99).toFixed(2)}`,
);
const ok = refused === 0 && loadP99 <= bound;
console.log(ok ? 'PASS' : `FAIL${refused ? ` (${refused} live refused)` : ''}`);
process.exit(ok ? 0 : 1);
