/**
 * The chaos driver: one real proxy on loopback, a seeded storm of requests over real and faulty
 * variants, and an audit of what is left afterwards. Used by the CI test (a few hundred requests)
 * and by `bench/chaos.ts` (thousands).
 *
 * Faults, all real: the ffmpeg the proxy spawns is a dispatcher that `exec`s a fake-ffmpeg script
 * chosen by the *source file name* (crash before/after the first byte, hang, garbage, ignore
 * SIGTERM, slow drip) or the real ffmpeg; the ffprobe is a dispatcher that hangs (optionally deaf
 * to SIGTERM) for `probehang*` sources. Clients abort before the first byte or mid-stream; worker
 * threads of both pools are terminated while they run tasks; AP_RENDER_TIMEOUT and
 * AP_PROBE_TIMEOUT are small; a quarter of the file store's fan-out directories are regular files,
 * so every commit for those keys fails after the whole variant was staged.
 *
 * **Invariants** (checked at the end, each reported separately)
 * - No render slot held or queued, no probe slot held, no coordinator registered or alive.
 * - No ffmpeg/ffprobe the proxy spawned is alive (by pid, asked of the OS), and this process has
 *   no live descendant at all (`/proc` walk).
 * - The store's staging directory is empty; no unhandled rejection happened.
 * - Every client got its whole body (equal to the reference), a torn 200 whose bytes are a prefix
 *   of what the variant produces, or a status/body pair from the error table.
 *
 * **Races**
 * - *Leak checks vs. work still winding down* (a SIGKILL escalation takes 2 s): the audit polls
 *   until every count is zero or a settle deadline passes, then reports what it saw last.
 * - *A worker kill racing a task's own end*: harmless; the kill is counted, the task may succeed.
 *
 * **Events**: none; the returned report is the output.
 */
import diagnostics from 'node:diagnostics_channel';
import { chmod, copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ERROR_TABLE } from '../../src/http/errors.js';
import { probeStats, stats } from '../../src/services/semaphoreClient.js';
import { FileVariantStore } from '../../src/store/file.js';
import { RENDER_CHANNELS } from '../../src/telemetry/channels.js';
import { resolveFfmpeg, resolveFfprobe } from '../../src/workers/ffmpegPath.js';
import { parseMp3Header, splitForInfoFrame } from '../../src/workers/xingFrame.js';
import { makeFixtures } from '../fixtures/audio.js';
import { type Harness, isAlive, startHarness } from '../integration/harness.js';
import { liveDescendants, type ProcessEntry } from './procs.js';

/** Client-side deadline per request: far past any timeout the proxy applies. */
const CLIENT_DEADLINE_MS = 60_000;
/** How long the audit waits for the system to come to rest (SIGKILL escalations, tees). */
const SETTLE_DEADLINE_MS = 30_000;
/** Render and probe deadline while the references are rendered, in seconds. */
const REFERENCE_TIMEOUT_S = 60;
/** Bytes crash-after writes before failing mid-stream: several chunks, well under a render. */
const CRASH_MID_BYTES = 60_000;
/** Bytes slow-drip writes, one per tick: a short variant that still streams over ~1 s. */
const DRIP_BYTES = 40;
/** Gap between drip bytes, in seconds. */
const DRIP_GAP_S = '0.02';
/** When a planned worker kill found no task running, it looks again after this many ms. */
const KILL_RETRY_MS = 50;
/** Quarter of the 256 fan-out directories made unwritable (first hex digit 0-3). */
const BLOCKED_FANOUT_FIRST_DIGITS = '0123';

export interface ChaosOptions {
  /** Requests fired in total. */
  readonly requests: number;
  /** Client requests in flight at once. */
  readonly concurrency: number;
  /** Seed of every random choice (variants, aborts, kill moments). */
  readonly seed: number;
  /** Share of requests the client aborts (half before the first byte, half mid-stream). */
  readonly abortRate?: number;
  /** Mean gap between worker-thread kills, in ms (0 disables). */
  readonly workerKillMeanMs?: number;
  /** Share of those kills aimed at the probe pool rather than the render pool. */
  readonly probeKillShare?: number;
  readonly maxConcurrency?: number;
  readonly queueSize?: number;
  readonly renderTimeoutS?: number;
  readonly probeTimeoutS?: number;
  /** Distinct cache busters per variant: fewer means more coalescing and more store HITs. */
  readonly cacheBusters?: number;
  /** Progress lines (bench); silent by default. */
  readonly log?: (line: string) => void;
}

export interface ChaosLeaks {
  readonly semaphoreHeld: number;
  readonly semaphoreQueued: number;
  readonly probeHeld: number;
  readonly renderCoordinators: number;
  readonly renderCoordinatorsAlive: number;
  readonly probeCoordinators: number;
  /** Spawned ffmpeg/ffprobe pids the OS still runs. */
  readonly livePids: readonly number[];
  /** Live processes anywhere below this one. */
  readonly liveDescendants: readonly ProcessEntry[];
  readonly staging: readonly string[];
  readonly unhandledRejections: number;
}

export interface ChaosReport {
  readonly requests: number;
  readonly durationMs: number;
  /** whole / torn / table / client-abort-before / client-abort-mid / violation */
  readonly outcomes: Readonly<Record<string, number>>;
  /** variant → outcome detail (`200 whole`, `429 queue_full`, …) → count */
  readonly byVariant: Readonly<Record<string, Readonly<Record<string, number>>>>;
  readonly faults: {
    readonly renderWorkerKills: number;
    readonly probeWorkerKills: number;
    readonly storeWriteFailures: number;
    readonly abortsBeforeFirstByte: number;
    readonly abortsMidStream: number;
  };
  readonly spawns: { readonly ffmpeg: number; readonly ffprobe: number };
  /** Leak counts while the proxy still runs (after settling). */
  readonly leaks: ChaosLeaks;
  /** Spawned pids still alive after the proxy closed. */
  readonly livePidsAfterClose: readonly number[];
  /** Every client answer outside the contract, one line each (first 50). */
  readonly violations: readonly string[];
  readonly violationCount: number;
}

/** mulberry32: small, fast, and the same sequence for the same seed everywhere. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

const fake = (name: string) =>
  fileURLToPath(new URL(`../fixtures/fake-ffmpeg/${name}`, import.meta.url));

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** The fault each source name selects; `real-*` names reach the real ffmpeg. */
const FAULT_SOURCES = [
  'crash0',
  'crashmid',
  'hang',
  'noterm',
  'garbage',
  'drip',
  'probehang',
  'probenoterm',
] as const;

/** The library: real sources and a copy of a real file per fault name (ffprobe must accept it). */
async function makeLibrary(): Promise<string> {
  const fixtures = await makeFixtures();
  const dir = await mkdtemp(join(tmpdir(), 'ap-chaos-lib-'));
  await copyFile(fixtures.stereoWav, join(dir, 'real-stereo.wav'));
  await copyFile(fixtures.monoMp3, join(dir, 'real-mono.mp3'));
  for (const name of FAULT_SOURCES) await copyFile(fixtures.stereoWav, join(dir, `${name}.wav`));
  return dir;
}

/**
 * ffmpeg and ffprobe dispatchers: a fault chosen by the input's file name (the file behind the
 * inherited fd 3), else the real one.
 */
async function makeDispatchers(dir: string) {
  const realFfmpeg = resolveFfmpeg({ env: process.env }).path;
  const realFfprobe = resolveFfprobe({ env: process.env }).path;
  const ffmpeg = join(dir, 'ffmpeg-dispatch');
  await writeFile(
    ffmpeg,
    [
      '#!/bin/sh',
      // The proxy hands ffmpeg its source as fd 3 (argv names only /proc/self/fd/3).
      'src=$(readlink /proc/$$/fd/3 2>/dev/null)',
      'case "$src" in',
      `  */crash0.wav) exec ${quote(fake('crash-after.sh'))} 0 3 ;;`,
      `  */crashmid.wav) exec ${quote(fake('crash-after.sh'))} ${CRASH_MID_BYTES} 1 ;;`,
      `  */hang.wav) exec ${quote(fake('hang.sh'))} ;;`,
      `  */noterm.wav) exec ${quote(fake('ignore-term.sh'))} ;;`,
      `  */garbage.wav) exec ${quote(fake('garbage.sh'))} ;;`,
      `  */drip.wav) exec ${quote(fake('slow-drip.sh'))} ${DRIP_BYTES} ${DRIP_GAP_S} ;;`,
      'esac',
      `exec ${quote(realFfmpeg)} "$@"`,
      '',
    ].join('\n'),
  );
  const probeLog = join(dir, 'ffprobe.log');
  const ffprobe = join(dir, 'ffprobe-dispatch');
  await writeFile(
    ffprobe,
    [
      '#!/bin/sh',
      `echo "$$" >> ${quote(probeLog)}`,
      'src=$(readlink /proc/$$/fd/3 2>/dev/null)',
      'case "$src" in',
      '  */probehang.wav) exec sleep 3600 ;;',
      "  */probenoterm.wav) trap '' TERM; exec sleep 3600 ;;",
      'esac',
      `exec ${quote(realFfprobe)} "$@"`,
      '',
    ].join('\n'),
  );
  await writeFile(probeLog, '');
  await chmod(ffmpeg, 0o755);
  await chmod(ffprobe, 0o755);
  return {
    ffmpeg,
    ffprobe,
    async probePids(): Promise<number[]> {
      return (await readFile(probeLog, 'utf8')).split('\n').filter(Boolean).map(Number);
    },
  };
}

interface Variant {
  readonly name: string;
  readonly weight: number;
  /** The request path for one cache buster. */
  readonly path: (cb: string) => string;
  /** The whole body a complete 200 must equal; absent: a complete 200 is a violation. */
  whole?: Buffer;
  /** What a torn 200 must be a prefix of. */
  stream?: Buffer;
}

/** Real variants: each format once on each source, half of them trimmed. */
const REAL_VARIANTS = [
  ['mp3', '', 'real-stereo.wav'],
  ['mp3', 't:0:1/', 'real-mono.mp3'],
  ['flac', '', 'real-mono.mp3'],
  ['flac', 't:0:1/', 'real-stereo.wav'],
  ['wav', '', 'real-mono.mp3'],
  ['wav', 't:0:1/', 'real-stereo.wav'],
] as const;

function variants(): Variant[] {
  const list: Variant[] = REAL_VARIANTS.map(([f, t, s]) => ({
    name: `real ${f}${t ? ' trim' : ''} ${s.slice(5)}`,
    weight: 55 / REAL_VARIANTS.length,
    path: (cb: string) => `/insecure/f:${f}/${t}cb:${cb}/plain/local://${s}`,
  }));
  const faultPath = (source: string) => (cb: string) =>
    `/insecure/f:mp3/cb:${cb}/plain/local://${source}`;
  list.push(
    { name: 'crash0', weight: 5, path: faultPath('crash0.wav'), stream: Buffer.alloc(0) },
    {
      name: 'crashmid',
      weight: 6,
      path: faultPath('crashmid.wav'),
      stream: Buffer.alloc(CRASH_MID_BYTES, 'a'),
    },
    { name: 'hang', weight: 2, path: faultPath('hang.wav'), stream: Buffer.alloc(0) },
    { name: 'noterm', weight: 1, path: faultPath('noterm.wav'), stream: Buffer.from('ready\n') },
    { name: 'garbage', weight: 4, path: faultPath('garbage.wav'), stream: Buffer.from('garbage') },
    {
      name: 'drip',
      weight: 8,
      path: faultPath('drip.wav'),
      whole: Buffer.alloc(DRIP_BYTES, 'x'),
      stream: Buffer.alloc(DRIP_BYTES, 'x'),
    },
    { name: 'probehang', weight: 3, path: faultPath('probehang.wav') },
    { name: 'probenoterm', weight: 1, path: faultPath('probenoterm.wav') },
    { name: 'missing', weight: 3, path: faultPath('absent.wav') },
    {
      name: 'badopts',
      weight: 3,
      path: (cb) => `/insecure/f:nope/cb:${cb}/plain/local://real-stereo.wav`,
    },
  );
  return list;
}

type AbortPlan =
  | { readonly kind: 'none' }
  | { readonly kind: 'before'; readonly afterMs: number }
  | { readonly kind: 'mid'; readonly afterMs: number };

interface ClientResult {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: Buffer;
  readonly complete: boolean;
  /** The client tore the exchange down itself, as planned. */
  readonly abortedByClient: boolean;
  /** A transport error before any response (not planned). */
  readonly error?: string;
  readonly stuck: boolean;
}

/** One GET over its own connection, with the planned abort and a deadline. */
function fire(base: URL, path: string, plan: AbortPlan): Promise<ClientResult> {
  return new Promise((resolve) => {
    let status = 0;
    let headers: ClientResult['headers'] = {};
    const chunks: Buffer[] = [];
    let settled = false;
    let abortedByClient = false;
    let stuck = false;
    const timers: NodeJS.Timeout[] = [];
    const finish = (complete: boolean, error?: string) => {
      if (settled) return;
      settled = true;
      for (const t of timers) clearTimeout(t);
      resolve({
        status,
        headers,
        body: Buffer.concat(chunks),
        complete,
        abortedByClient,
        stuck,
        ...(error !== undefined ? { error } : {}),
      });
    };
    const req = request(
      { host: base.hostname, port: base.port, path, method: 'GET', agent: false },
      (res) => {
        status = res.statusCode ?? 0;
        headers = res.headers;
        let first = true;
        res.on('data', (c: Buffer) => {
          chunks.push(c);
          if (first && plan.kind === 'mid') {
            first = false;
            timers.push(
              setTimeout(() => {
                abortedByClient = true;
                req.destroy();
                finish(false);
              }, plan.afterMs),
            );
          }
        });
        res.on('end', () => finish(true));
        res.on('error', () => finish(false));
        res.on('aborted', () => finish(false));
        res.on('close', () => finish(res.complete));
      },
    );
    req.on('error', (e) => finish(false, (e as NodeJS.ErrnoException).code ?? e.message));
    if (plan.kind === 'before') {
      timers.push(
        setTimeout(() => {
          if (status !== 0) return; // the answer came first: an ordinary request after all
          abortedByClient = true;
          req.destroy();
          finish(false);
        }, plan.afterMs),
      );
    }
    timers.push(
      setTimeout(() => {
        stuck = true;
        req.destroy();
        finish(false, 'client deadline');
      }, CLIENT_DEADLINE_MS),
    );
    req.end();
  });
}

const isPrefix = (body: Buffer, of: Buffer | undefined) =>
  of !== undefined &&
  body.length <= of.length &&
  (of.subarray(0, body.length).equals(body) || sameButInfoFrame(of.subarray(0, body.length), body));

/** Whether a non-200 answer is a row of the error table, headers included. */
function tableAnswer(r: ClientResult): string | null {
  let parsed: { error?: unknown; message?: unknown };
  try {
    parsed = JSON.parse(r.body.toString('utf8'));
  } catch {
    return `${r.status} non-JSON body`;
  }
  const row = ERROR_TABLE.find(
    (x) =>
      x.status === r.status &&
      x.error === parsed.error &&
      (x.message === undefined || x.message === parsed.message),
  );
  if (!row) return `${r.status} ${JSON.stringify(parsed)} not in the error table`;
  if (r.headers['cache-control'] !== row.cacheControl) {
    return `${r.status} ${row.error}: cache-control ${String(r.headers['cache-control'])}`;
  }
  if (r.status === 429 && !(Number(r.headers['retry-after']) >= 1)) {
    return `429 retry-after ${String(r.headers['retry-after'])}`;
  }
  return null;
}

/**
 * Whether two mp3s are the same but inside the info frame: the stored copy's is completed at
 * commit, a streamed one carries its placeholder (same size, same place; docs/ranges.md).
 */
function sameButInfoFrame(a: Buffer | undefined, b: Buffer): boolean {
  if (a === undefined || a.length !== b.length) return false;
  const split = splitForInfoFrame(a);
  if (typeof split === 'string') return false;
  const end = split.offset + (parseMp3Header(a, split.offset)?.length ?? 0);
  return (
    a.subarray(0, split.offset).equals(b.subarray(0, split.offset)) &&
    a.subarray(end).equals(b.subarray(end))
  );
}

/** Classifies one answer: [outcome, detail] or a violation message. */
function classify(v: Variant, r: ClientResult): { outcome: string; detail: string } | string {
  if (r.stuck) return 'no answer within the client deadline';
  if (r.abortedByClient) {
    if (r.status === 200 && !isPrefix(r.body, v.stream ?? v.whole)) {
      return `aborted 200 body (${r.body.length} bytes) is not a prefix of the variant`;
    }
    return { outcome: 'client-abort', detail: r.status === 0 ? 'aborted' : `${r.status} aborted` };
  }
  if (r.error !== undefined) return `transport error before an answer: ${r.error}`;
  if (r.status === 200) {
    if (r.complete) {
      if (v.whole?.equals(r.body) || sameButInfoFrame(v.whole, r.body)) {
        return { outcome: 'whole', detail: '200 whole' };
      }
      return `complete 200 of ${r.body.length} bytes differs from the reference`;
    }
    if (isPrefix(r.body, v.stream ?? v.whole)) return { outcome: 'torn', detail: '200 torn' };
    return `torn 200 (${r.body.length} bytes) is not a prefix of the variant`;
  }
  if (!r.complete) return `${r.status} answer cut short`;
  const bad = tableAnswer(r);
  if (bad) return bad;
  const error = (JSON.parse(r.body.toString('utf8')) as { error: string }).error;
  return { outcome: 'table', detail: `${r.status} ${error}` };
}

async function audit(
  h: Harness,
  dispatch: { probePids(): Promise<number[]> },
  store: FileVariantStore,
  rejections: () => number,
): Promise<ChaosLeaks> {
  const take = async (): Promise<ChaosLeaks> => {
    const sem = await stats(h.proxy.actors.semaphore);
    const probe = await probeStats(h.proxy.actors.probeLimiter);
    const pids = [...(await h.spawns()), ...(await dispatch.probePids())];
    return {
      semaphoreHeld: sem.held,
      semaphoreQueued: sem.queued,
      probeHeld: probe.held,
      renderCoordinators: h.proxy.renders.registry.size,
      renderCoordinatorsAlive: h.proxy.renders.live,
      probeCoordinators: h.proxy.probes.registry.size,
      livePids: pids.filter((p) => isAlive(p)),
      // esbuild is tsx's/vite's transform service, a child of this process but not the proxy's.
      liveDescendants: liveDescendants().filter((p) => p.comm !== 'esbuild'),
      staging: await store.staging(),
      unhandledRejections: rejections(),
    };
  };
  const clean = (l: ChaosLeaks) =>
    l.semaphoreHeld === 0 &&
    l.semaphoreQueued === 0 &&
    l.probeHeld === 0 &&
    l.renderCoordinators === 0 &&
    l.renderCoordinatorsAlive === 0 &&
    l.probeCoordinators === 0 &&
    l.livePids.length === 0 &&
    l.liveDescendants.length === 0 &&
    l.staging.length === 0;
  const end = Date.now() + SETTLE_DEADLINE_MS;
  let last = await take();
  while (!clean(last) && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 100));
    last = await take();
  }
  return last;
}

export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const { requests, concurrency, seed } = options;
  if (!Number.isInteger(requests) || requests < 1) throw new RangeError('requests must be ≥ 1');
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    throw new RangeError('concurrency must be ≥ 1');
  }
  const log = options.log ?? (() => {});
  const random = seededRandom(seed);
  const abortRate = options.abortRate ?? 0.2;
  const killMeanMs = options.workerKillMeanMs ?? 5_000;
  const probeKillShare = options.probeKillShare ?? 0.1;
  const cacheBusters = options.cacheBusters ?? Math.max(3, Math.round(requests / 100));

  const t0 = Date.now();
  const since = () => `${((Date.now() - t0) / 1000).toFixed(1)} s`;
  const library = await makeLibrary();
  const scratch = await mkdtemp(join(tmpdir(), 'ap-chaos-'));
  const storeRoot = join(scratch, 'store');
  await mkdir(storeRoot);
  const dispatch = await makeDispatchers(scratch);

  let rejections = 0;
  const onRejection = () => {
    rejections++;
  };
  process.on('unhandledRejection', onRejection);
  let writeFailures = 0;
  const onWriteFailure = () => {
    writeFailures++;
  };
  diagnostics.subscribe(RENDER_CHANNELS.writeFailure, onWriteFailure);

  const h = await startHarness(
    {
      AP_LOCAL_ROOT: library,
      AP_FFPROBE_PATH: dispatch.ffprobe,
      AP_MAX_CONCURRENCY: String(options.maxConcurrency ?? 3),
      AP_QUEUE_SIZE: String(options.queueSize ?? 16),
      AP_RENDER_TIMEOUT: String(options.renderTimeoutS ?? 4),
      AP_PROBE_TIMEOUT: String(options.probeTimeoutS ?? 3),
      AP_VARIANT_STORE: `file://${storeRoot}`,
      AP_SERVE_MODE: 'proxy',
    },
    { ffmpegTarget: dispatch.ffmpeg },
  );
  // The proxy's store may sit behind its in-memory HIT cache; staging is read from disk.
  const store = new FileVariantStore({ root: storeRoot });
  log(`${since()}: proxy up`);
  const base = new URL(h.url);
  const list = variants();
  const started = Date.now();
  try {
    // References: every real variant rendered once, before any fault is switched on (with
    // generous deadlines: a loaded machine must not fail the reference itself).
    const chaosTimeouts = {
      renderTimeoutS: h.config.get().renderTimeoutS,
      probeTimeoutS: h.config.get().probeTimeoutS,
    };
    h.config.set({ renderTimeoutS: REFERENCE_TIMEOUT_S, probeTimeoutS: REFERENCE_TIMEOUT_S });
    for (const v of list) {
      if (!v.name.startsWith('real')) continue;
      const r = await fire(base, v.path('reference'), { kind: 'none' });
      if (r.status !== 200 || !r.complete) {
        throw new Error(
          `reference render of ${v.name} failed: ${r.status} ${r.body.toString().slice(0, 200)}`,
        );
      }
      v.whole = r.body;
      v.stream = r.body;
    }
    h.config.set(chaosTimeouts);
    // Store write failures from now on: a regular file where a fan-out directory would go.
    for (const a of BLOCKED_FANOUT_FIRST_DIGITS) {
      for (const b of '0123456789abcdef') {
        await writeFile(join(storeRoot, `${a}${b}`), 'not a directory').catch(() => {});
      }
    }
    log(`${since()}: references ready; firing ${requests} requests, ${concurrency} in flight`);

    const totalWeight = list.reduce((s, v) => s + v.weight, 0);
    const pick = () => {
      let x = random() * totalWeight;
      for (const v of list) {
        x -= v.weight;
        if (x <= 0) return v;
      }
      return list[list.length - 1]!;
    };
    const plans = Array.from({ length: requests }, () => {
      const variant = pick();
      const cb = `c${Math.floor(random() * cacheBusters)}`;
      const a = random();
      const plan: AbortPlan =
        a < abortRate / 2
          ? { kind: 'before', afterMs: Math.floor(random() * 40) }
          : a < abortRate
            ? { kind: 'mid', afterMs: Math.floor(random() * 60) }
            : { kind: 'none' };
      return { variant, cb, plan };
    });

    // Worker kills at random moments, only while the pool has a task in flight.
    let renderKills = 0;
    let probeKills = 0;
    let killTimer: NodeJS.Timeout | undefined;
    /** Kills one thread of a pool that has a task in flight; false when neither pool has one. */
    const killOne = (): boolean => {
      const probeFirst = random() < probeKillShare;
      const order = probeFirst ? ['probe', 'render'] : ['render', 'probe'];
      for (const which of order) {
        const pool = which === 'probe' ? h.proxy.pools.probe : h.proxy.pools.render;
        if (pool.inFlight === 0) continue;
        const threads = pool.threads;
        const t = threads[Math.floor(random() * threads.length)];
        if (!t) continue;
        void t.terminate();
        if (which === 'probe') probeKills++;
        else renderKills++;
        return true;
      }
      return false;
    };
    // A kill that found nothing running is retried shortly, so kills land mid-task at the rate asked.
    const scheduleKill = (delayMs = Math.floor(random() * 2 * killMeanMs)) => {
      killTimer = setTimeout(() => {
        if (killOne()) scheduleKill();
        else scheduleKill(KILL_RETRY_MS);
      }, delayMs);
    };
    if (killMeanMs > 0) scheduleKill();

    const outcomes: Record<string, number> = {};
    const byVariant: Record<string, Record<string, number>> = {};
    const violations: string[] = [];
    let violationCount = 0;
    let abortsBefore = 0;
    let abortsMid = 0;
    const bump = (m: Record<string, number>, k: string) => {
      m[k] = (m[k] ?? 0) + 1;
    };
    let next = 0;
    let done = 0;
    const lane = async () => {
      while (next < plans.length) {
        const i = next++;
        const { variant, cb, plan } = plans[i]!;
        const r = await fire(base, variant.path(cb), plan);
        if (r.abortedByClient) {
          if (plan.kind === 'before') abortsBefore++;
          else abortsMid++;
        }
        const verdict = classify(variant, r);
        const perVariant = (byVariant[variant.name] ??= {});
        if (typeof verdict === 'string') {
          violationCount++;
          bump(outcomes, 'violation');
          bump(perVariant, 'violation');
          if (violations.length < 50) violations.push(`#${i} ${variant.name} cb:${cb}: ${verdict}`);
        } else {
          bump(outcomes, verdict.outcome);
          bump(perVariant, verdict.detail);
        }
        done++;
        if (done % 500 === 0) log(`${done}/${requests} answered`);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, lane));
    clearTimeout(killTimer);
    const durationMs = Date.now() - started;

    log(`${since()}: all answered; waiting for the system to come to rest`);
    const leaks = await audit(h, dispatch, store, () => rejections);
    const spawns = {
      ffmpeg: (await h.spawns()).length,
      ffprobe: (await dispatch.probePids()).length,
    };
    log(`${since()}: at rest; closing the proxy`);
    await h.close();
    log(`${since()}: closed`);
    const pids = [...(await h.spawns()), ...(await dispatch.probePids())];
    return {
      requests,
      durationMs,
      outcomes,
      byVariant,
      faults: {
        renderWorkerKills: renderKills,
        probeWorkerKills: probeKills,
        storeWriteFailures: writeFailures,
        abortsBeforeFirstByte: abortsBefore,
        abortsMidStream: abortsMid,
      },
      spawns,
      leaks: { ...leaks, unhandledRejections: rejections },
      livePidsAfterClose: pids.filter((p) => isAlive(p)),
      violations,
      violationCount,
    };
  } catch (error) {
    await h.close().catch(() => {});
    throw error;
  } finally {
    await rm(library, { recursive: true, force: true });
    await rm(scratch, { recursive: true, force: true });
    process.off('unhandledRejection', onRejection);
    diagnostics.unsubscribe(RENDER_CHANNELS.writeFailure, onWriteFailure);
  }
}

/** The report as printable lines: outcome counts, then one row per variant. */
export function formatChaos(report: ChaosReport): string {
  const lines: string[] = [];
  const secs = (report.durationMs / 1000).toFixed(1);
  lines.push(`chaos: ${report.requests} requests in ${secs} s`);
  lines.push('');
  lines.push('outcome            count');
  for (const [k, n] of Object.entries(report.outcomes).sort((a, b) => b[1] - a[1])) {
    lines.push(`  ${k.padEnd(16)} ${String(n).padStart(6)}`);
  }
  lines.push('');
  lines.push('variant                    answers');
  for (const [v, m] of Object.entries(report.byVariant).sort()) {
    const detail = Object.entries(m)
      .sort((a, b) => b[1] - a[1])
      .map(([k, n]) => `${k} ×${n}`)
      .join(', ');
    lines.push(`  ${v.padEnd(24)} ${detail}`);
  }
  const f = report.faults;
  lines.push('');
  lines.push(
    `faults: ${f.renderWorkerKills} render-worker kills, ${f.probeWorkerKills} probe-worker kills, ` +
      `${f.storeWriteFailures} store write failures, ${f.abortsBeforeFirstByte} aborts before the ` +
      `first byte, ${f.abortsMidStream} mid-stream`,
  );
  lines.push(`spawned: ${report.spawns.ffmpeg} ffmpeg, ${report.spawns.ffprobe} ffprobe`);
  const l = report.leaks;
  lines.push(
    `left over: semaphore held ${l.semaphoreHeld} queued ${l.semaphoreQueued}, probe slots ` +
      `${l.probeHeld}, render coordinators ${l.renderCoordinators} (alive ${l.renderCoordinatorsAlive}), ` +
      `probe coordinators ${l.probeCoordinators}, live spawned pids ${l.livePids.length}, ` +
      `live descendants ${l.liveDescendants.length}, staging files ${l.staging.length}, ` +
      `unhandled rejections ${l.unhandledRejections}; after close: live pids ${report.livePidsAfterClose.length}`,
  );
  for (const p of l.liveDescendants)
    lines.push(`  live: pid ${p.pid} (${p.comm}) state ${p.state}`);
  lines.push(`violations: ${report.violationCount}`);
  for (const v of report.violations) lines.push(`  ${v}`);
  return lines.join('\n');
}
