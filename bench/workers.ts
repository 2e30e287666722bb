/**
 * ffmpeg hosted in worker threads vs spawned from the main thread: wall time and event-loop lag.
 *
 * Four concurrent mp3 encodes (libmp3lame 128k, in the proxy's 16 KiB output blocks) of one 60 s
 * stereo WAV, the consumer taking every chunk as the RenderCoordinator does (collect it,
 * acknowledge it at once). Variants:
 * - `main`: `child_process.spawn` on this thread, stdout read here (the baseline);
 * - `worker`: the render task in a Piscina pool (what the proxy runs), at the shipped
 *   BATCH_BYTES / FLUSH_MS;
 * - with `--sweep`, the worker again at other batch sizes and flush deadlines, and unbatched
 *   (`batchBytes: 0`: every ~800-byte pipe read its own message, the design that cost +23%).
 * Each round runs every variant in rotating order, so background load hits all alike; the
 * figures are medians over rounds, after discarded warm-up rounds. Lag is
 * `monitorEventLoopDelay` (1 ms resolution) on this thread, reset per run, reported as p99.
 * CPU is this process (every thread) plus the reaped ffmpegs, taken from a second run of the
 * same variant with the histogram off (its timer is CPU that grows with wall time, so with the
 * machine's load). The node share is the steadiest signal when other work shares the machine,
 * because wall time on a busy 2-core box swings far more than the 2% this is meant to resolve.
 *
 * Run: `npx tsx bench/workers.ts [--rounds 7] [--warmup 2] [--sweep]` (on a shared box,
 * `nice -n -15` first).
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { BATCH_BYTES, FLUSH_MS, type RenderSpec } from '../src/core/worker.js';
import { OUTPUT_WRITES } from '../src/workers/argv.js';
import { createWorkerPool, type WorkerPool } from '../src/workers/pool.js';
import { runRender } from '../src/workers/renderClient.js';
import { fmtSpread, loadAvg, spread, spreadFigures } from './cpuclock.js';
import { report } from './report.js';

const ENCODES = 4; // the scenario: four concurrent encodes on a 2-core box
const FIXTURE_SECONDS = 60;
const LAG_RESOLUTION_MS = 1;

const args = process.argv.slice(2);
/** The integer after `--name`, or `fallback` when the flag is absent. */
function intFlag(name: string, fallback: number): number {
  const i = args.indexOf(name);
  if (i < 0) return fallback;
  const v = Number(args[i + 1]);
  if (!Number.isInteger(v) || v < 0) throw new RangeError(`${name} needs an integer ≥ 0`);
  return v;
}
const ROUNDS = intFlag('--rounds', 7);
const SWEEP = args.includes('--sweep');
const WARMUP_ROUNDS = intFlag('--warmup', 2);

async function fixture(): Promise<string> {
  const path = join(tmpdir(), `audio-proxy-bench-${FIXTURE_SECONDS}s.wav`);
  if (existsSync(path)) return path;
  await promisify(execFile)('ffmpeg', [
    '-hide_banner',
    '-loglevel',
    'error',
    '-y',
    '-f',
    'lavfi',
    '-i',
    `sine=frequency=440:sample_rate=44100:duration=${FIXTURE_SECONDS}`,
    '-f',
    'lavfi',
    '-i',
    `sine=frequency=660:sample_rate=44100:duration=${FIXTURE_SECONDS}`,
    '-filter_complex',
    'amerge=inputs=2',
    '-c:a',
    'pcm_s16le',
    path,
  ]);
  return path;
}

function encodeArgv(input: string): string[] {
  return [
    '-hide_banner',
    '-loglevel',
    'error',
    '-i',
    input,
    '-vn',
    '-c:a',
    'libmp3lame',
    '-b:a',
    '128k',
    // The proxy's own output writes (16 KiB blocks): the number of chunks then follows from the
    // bytes, not from how fast this thread happens to read the pipe under the machine's load.
    ...OUTPUT_WRITES,
    '-f',
    'mp3',
    'pipe:1',
  ];
}

interface Sample {
  readonly wallMs: number;
  /** CPU of this process (all its threads) plus its reaped children (the ffmpegs). */
  readonly cpuMs: number;
  /** The node process's share of `cpuMs`. */
  readonly nodeCpuMs: number;
  readonly lagP99Ms: number;
  /** The longest event-loop delay seen (monitorEventLoopDelay's max): the longest blocked turn. */
  readonly lagMaxMs: number;
  readonly chunks: number;
  readonly bytes: number;
}

/** The baseline: spawn here, read stdout here, keep every chunk. */
function mainThreadEncode(argv: string[]): Promise<{ chunks: number; bytes: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn('ffmpeg', argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    const kept: Buffer[] = [];
    let bytes = 0;
    child.stdout.on('data', (chunk: Buffer) => {
      kept.push(chunk);
      bytes += chunk.length;
    });
    child.stderr.resume();
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve({ chunks: kept.length, bytes }) : reject(new Error(`exit ${code}`)),
    );
  });
}

async function workerEncode(
  pool: WorkerPool,
  spec: RenderSpec,
): Promise<{ chunks: number; bytes: number }> {
  const result = await runRender(pool, spec); // acks each chunk as it lands
  if (result.outcome.type !== 'done') throw new Error(JSON.stringify(result.outcome));
  return { chunks: result.chunks.length, bytes: result.outcome.bytes };
}

/**
 * One run of the encodes. With `withLag`, the delay histogram runs (its 1 ms timer wakes this
 * thread ~1,000 times a second, CPU that grows with the wall time and so with the machine's
 * load); the CPU figures come from the runs without it.
 */
async function measure(
  run: () => Promise<{ chunks: number; bytes: number }>,
  withLag: boolean,
): Promise<Sample> {
  // Collect the previous run's garbage first (node --expose-gc), so a run pays only for its own.
  globalThis.gc?.();
  const lag = monitorEventLoopDelay({ resolution: LAG_RESOLUTION_MS });
  if (withLag) lag.enable();
  const cpu0 = cpuMs();
  const t0 = performance.now();
  const results = await Promise.all(Array.from({ length: ENCODES }, run));
  const wallMs = performance.now() - t0;
  const cpu1 = cpuMs();
  lag.disable();
  const nodeCpuMs = cpu1.node - cpu0.node;
  return {
    wallMs,
    cpuMs: nodeCpuMs + cpu1.children - cpu0.children,
    nodeCpuMs,
    lagP99Ms: withLag ? lag.percentile(99) / 1e6 : Number.NaN,
    lagMaxMs: withLag ? lag.max / 1e6 : Number.NaN,
    chunks: results.reduce((n, r) => n + r.chunks, 0) / ENCODES,
    bytes: results[0]!.bytes,
  };
}

const CLOCK_TICK_MS = 10; // Linux USER_HZ is 100 (`getconf CLK_TCK`)

/** CPU time in ms: this process (all threads) and its reaped children. */
function cpuMs(): { node: number; children: number } {
  const own = process.cpuUsage();
  const fields = readFileSync('/proc/self/stat', 'latin1').split(') ')[1]!.split(' ');
  // After the command name: cutime and cstime are fields 16 and 17, indices 13 and 14 here.
  const children = (Number(fields[13]) + Number(fields[14])) * CLOCK_TICK_MS;
  return { node: (own.user + own.system) / 1000, children };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

async function main(): Promise<void> {
  const loadStart = loadAvg();
  const input = await fixture();
  const argv = encodeArgv(input);
  const pool = createWorkerPool({ name: 'bench', size: ENCODES });
  await pool.start();
  // Warm every thread (each loads the task module on first use) and the page cache.
  await Promise.all(
    Array.from({ length: ENCODES }, () =>
      workerEncode(pool, { executable: 'ffmpeg', argv, timeoutMs: 60_000 }),
    ),
  );
  await mainThreadEncode(argv);

  const spec = (batchBytes?: number, flushMs?: number): RenderSpec => ({
    executable: 'ffmpeg',
    argv,
    timeoutMs: 60_000,
    ...(batchBytes !== undefined ? { batchBytes } : {}),
    ...(flushMs !== undefined ? { flushMs } : {}),
  });
  const variants: Array<[string, () => Promise<{ chunks: number; bytes: number }>]> = [
    ['main', () => mainThreadEncode(argv)],
    [`worker (${BATCH_BYTES / 1024}K/${FLUSH_MS}ms)`, () => workerEncode(pool, spec())],
  ];
  if (SWEEP) {
    variants.push(
      ['worker unbatched', () => workerEncode(pool, spec(0))],
      ['worker 64K/5ms', () => workerEncode(pool, spec(64 * 1024, 5))],
      ['worker 64K/20ms', () => workerEncode(pool, spec(64 * 1024, 20))],
      ['worker 64K/50ms', () => workerEncode(pool, spec(64 * 1024, 50))],
      ['worker 64K/100ms', () => workerEncode(pool, spec(64 * 1024, 100))],
      ['worker 64K/250ms', () => workerEncode(pool, spec(64 * 1024, 250))],
      ['worker 64K/no flush', () => workerEncode(pool, spec(64 * 1024, 3_600_000))],
      ['worker 256K/100ms', () => workerEncode(pool, spec(256 * 1024, 100))],
    );
  }

  // Discarded rounds first: the node side costs 2-3× more in the first rounds (V8 still compiling
  // the read paths of both variants: main 238 and 283 ms, then 79-110 ms, in one traced run).
  for (let round = 0; round < WARMUP_ROUNDS; round++)
    for (const [, run] of variants) await measure(run, false);
  const samples = new Map<string, Sample[]>(variants.map(([name]) => [name, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < variants.length; i++) {
      const [name, run] = variants[(round + i) % variants.length]!;
      // Wall and lag from a run with the histogram on, CPU from the same variant's next run
      // with it off.
      const timed = await measure(run, true);
      const quiet = await measure(run, false);
      if (process.env.AP_BENCH_TRACE)
        process.stderr.write(
          `  ${name}: node ${quiet.nodeCpuMs.toFixed(0)} ms (${timed.nodeCpuMs.toFixed(0)} with the lag timer), all ${quiet.cpuMs.toFixed(0)} ms\n`,
        );
      samples.get(name)!.push({ ...timed, cpuMs: quiet.cpuMs, nodeCpuMs: quiet.nodeCpuMs });
    }
    process.stderr.write(`round ${round + 1}/${ROUNDS}\n`);
  }
  if (pool.queueSize !== 0) throw new Error('Piscina queued a task');
  await pool.destroy();

  const mainWalls = samples.get('main')!.map((s) => s.wallMs);
  const baseline = median(mainWalls);
  const cpuBaseline = median(samples.get('main')!.map((s) => s.cpuMs));
  console.log(
    `${ENCODES} concurrent mp3 128k encodes of a ${FIXTURE_SECONDS} s WAV, ${ROUNDS} interleaved rounds, medians`,
  );
  console.log(
    'variant              wall ms   vs main   paired ratio (min–max)   cpu ms   vs main   node cpu   lag p99 ms   chunks/encode',
  );
  for (const [name, list] of samples) {
    const wall = median(list.map((s) => s.wallMs));
    const lag = median(list.map((s) => s.lagP99Ms));
    const chunks = median(list.map((s) => s.chunks));
    const cpu = median(list.map((s) => s.cpuMs));
    const nodeCpu = median(list.map((s) => s.nodeCpuMs));
    // Same-round ratios: each round ran every variant back to back, so load affects both sides.
    const paired = list.map((s, i) => s.wallMs / mainWalls[i]!);
    const spread = `${median(paired).toFixed(3)} (${Math.min(...paired).toFixed(2)}–${Math.max(...paired).toFixed(2)})`;
    console.log(
      `${name.padEnd(20)} ${wall.toFixed(0).padStart(7)}   ${(wall / baseline).toFixed(3).padStart(7)}   ${spread.padStart(22)}   ${cpu.toFixed(0).padStart(6)}   ${(cpu / cpuBaseline).toFixed(3).padStart(7)}   ${nodeCpu.toFixed(0).padStart(8)}   ${lag
        .toFixed(2)
        .padStart(10)}   ${chunks.toFixed(0).padStart(13)}`,
    );
  }
  console.log(
    `output per encode: ${samples.get('main')![0]!.bytes} bytes (identical in every variant)`,
  );
  const figures: Record<string, number> = {};
  for (const [name, list] of samples) {
    figures[`wallMs:${name}`] = median(list.map((s) => s.wallMs));
    figures[`paired:${name}`] = median(list.map((s, i) => s.wallMs / mainWalls[i]!));
    figures[`cpuMs:${name}`] = median(list.map((s) => s.cpuMs));
    figures[`lagP99Ms:${name}`] = median(list.map((s) => s.lagP99Ms));
  }
  // Issue #17: CPU per render, node (this process: every thread) ÷ ffmpeg (reaped children),
  // and the worker variant's node CPU ÷ the main-thread spawn's, paired per round.
  console.log(
    '\nCPU per render, median (min–max) over rounds; load',
    loadStart.toFixed(1),
    '→',
    loadAvg().toFixed(1),
  );
  const mainList = samples.get('main')!;
  for (const [name, list] of samples) {
    const nodePer = spread(list.map((s) => s.nodeCpuMs / ENCODES));
    const ffPer = spread(list.map((s) => (s.cpuMs - s.nodeCpuMs) / ENCODES));
    const vsFfmpeg = spread(list.map((s) => s.nodeCpuMs / (s.cpuMs - s.nodeCpuMs)));
    const vsMain = spread(list.map((s, i) => s.nodeCpuMs / mainList[i]!.nodeCpuMs));
    const lagMax = spread(list.map((s) => s.lagMaxMs));
    console.log(
      `  ${name.padEnd(20)} node ${fmtSpread(nodePer, 0)} ms, ffmpeg ${fmtSpread(ffPer, 0)} ms, node ÷ ffmpeg ${fmtSpread(vsFfmpeg, 1, 100, ' %')}, node × main ${fmtSpread(vsMain)}, lag max ${fmtSpread(lagMax, 1)} ms`,
    );
    Object.assign(
      figures,
      spreadFigures(`nodeVsFfmpeg:${name}`, vsFfmpeg),
      spreadFigures(`nodeVsMain:${name}`, vsMain),
      spreadFigures(`lagMaxMs:${name}`, lagMax),
    );
    figures[`nodeCpuMsPerRender:${name}`] = nodePer.median;
    figures[`ffmpegCpuMsPerRender:${name}`] = ffPer.median;
  }
  figures.loadStart = loadStart;
  figures.loadEnd = loadAvg();
  report('workers', figures);
}

await main();
