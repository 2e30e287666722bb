/**
 * `npm run bench -- threads [--loads 0,2,0,2] [--rounds 2]`: where a MISS's proxy CPU goes, thread
 * by thread, and how it moves when the machine is busy (issue #17: why P1 does not hold within
 * 20 % beside busy loops). One proxy (`bench/serve.mjs`: the compiled build, 2 slots, a file
 * store) serves rounds of 6 distinct mp3 128k renders of a 60 s WAV, 2 at a time, the MISS load
 * of `bench/cpu.ts`; for each entry of `--loads` that many busy loops run beside it.
 *
 * Per round, for every thread of the proxy (`/proc/<pid>/task/<tid>/schedstat`: the scheduler's
 * own nanosecond clock of time on a CPU, not /proc's 10 ms ticks) and for the ffmpegs it reaped
 * (cutime + cstime), the CPU and the wakeups (voluntary context switches: each one a return to a
 * CPU whose caches something else used meanwhile). Threads are grouped as the main thread (the
 * event loop) and the rest (worker threads, libuv's pool, V8's helpers: Node 20 names them all
 * `node`), and the collections of every isolate (`--trace-gc`: scavenges, mark-compacts, and
 * the memory reducer's mark-compacts). Rounds begin once the proxy has settled after the
 * warm-up (`settle`: V8's start-up collections are over).
 *
 * What it showed on a 2-vCPU VM (docs/performance.md, session 10): beside two busy loops a round
 * takes ten times the wall time while ffmpeg's CPU for it moves by 1 %; the worker threads wake
 * about as often as on a quiet machine but spend a fifth more per wakeup, and the main thread
 * wakes 2.5 times as often (its delay monitor samples wall time), so proxy ÷ ffmpeg moves.
 *
 * The busy loops are killed on the way out; the proxy is stopped with SIGTERM and its scratch
 * directory removed once it has exited.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { ensureBuilt } from './built.js';
import { childrenCpuMs, fmtSpread, quiesce, settle, spread } from './cpuclock.js';
import { busyLoop, makeStereoWav } from './fixtures.js';

const args = process.argv.slice(2);
const opt = (name: string, fallback: string) =>
  args.includes(name) ? args[args.indexOf(name) + 1]! : fallback;
const LOADS = opt('--loads', '0,2,0,2').split(',').map(Number);
const ROUNDS = Number(opt('--rounds', '2'));
if (
  LOADS.some((n) => !Number.isInteger(n) || n < 0 || n > 16) ||
  !Number.isInteger(ROUNDS) ||
  ROUNDS < 1
)
  throw new RangeError('--loads needs integers from 0 to 16, --rounds a positive integer');
const RENDERS = 6;
const VARIANT = '/insecure/f:mp3/br:128';

ensureBuilt();
const root = mkdtempSync(join(tmpdir(), 'ap-bench-threads-'));
const store = join(root, 'store');
mkdirSync(store);
makeStereoWav(join(root, 'in.wav'));
const proxy = spawn(
  process.execPath,
  ['--trace-gc', fileURLToPath(new URL('serve.mjs', import.meta.url)), root, store],
  { stdio: ['pipe', 'pipe', 'inherit'] },
);
const loops: ChildProcess[] = [];
const proxyExited = new Promise<void>((r) => proxy.once('exit', () => r()));
// A crash of this script must not leave busy loops or the proxy running.
process.on('exit', () => {
  for (const l of loops) l.kill('SIGKILL');
  proxy.kill('SIGKILL');
});
/** Collections so far, from the proxy's `--trace-gc` lines. */
const gcs = { minor: 0, major: 0, reduce: 0 };
const url = await new Promise<string>((resolve, reject) => {
  proxy.once('exit', (code) => reject(new Error(`the proxy exited (${code}) before listening`)));
  createInterface({ input: proxy.stdout! }).on('line', (l) => {
    if (l.startsWith('LISTENING ')) resolve(l.slice('LISTENING '.length));
    // `--trace-gc`: one line per collection, of any isolate (main thread and workers).
    if (l.includes(': Scavenge')) gcs.minor++;
    else if (l.includes(': Mark-Compact (reduce)')) gcs.reduce++;
    else if (l.includes(': Mark-Compact')) gcs.major++;
  });
});
const pid = proxy.pid!;

interface ThreadSample {
  readonly cpuMs: number;
  readonly wakes: number;
}
/** Every live thread of the proxy: on-CPU time (ms, ns-precise) and voluntary switches. */
function threads(): Map<number, ThreadSample> {
  const out = new Map<number, ThreadSample>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const ns = Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
      const status = readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8');
      const wakes = Number(/\nvoluntary_ctxt_switches:\s+(\d+)/.exec(status)![1]);
      out.set(Number(tid), { cpuMs: ns / 1e6, wakes });
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return out;
}

async function get(path: string): Promise<void> {
  const res = await fetch(url + path);
  if (res.status !== 200) throw new Error(`${path}: HTTP ${res.status}`);
  await res.arrayBuffer();
}

/** One round of RENDERS distinct renders, two at a time; what each side spent on it. */
async function round(tag: string) {
  const before = threads();
  const gc0 = { ...gcs };
  const ff0 = childrenCpuMs(pid);
  const t0 = performance.now();
  const queue = Array.from(
    { length: RENDERS },
    (_, i) => `${VARIANT}/cb:${tag}-${i}/plain/local://in.wav`,
  );
  await Promise.all(
    [0, 1].map(async () => {
      for (let p = queue.shift(); p; p = queue.shift()) await get(p);
    }),
  );
  const wallMs = performance.now() - t0;
  await quiesce(pid);
  const after = threads();
  const sum = { main: { cpuMs: 0, wakes: 0 }, rest: { cpuMs: 0, wakes: 0 } };
  for (const [tid, b] of after) {
    const a = before.get(tid) ?? { cpuMs: 0, wakes: 0 };
    const group = tid === pid ? sum.main : sum.rest;
    group.cpuMs += b.cpuMs - a.cpuMs;
    group.wakes += b.wakes - a.wakes;
  }
  const gc = `${gcs.minor - gc0.minor}/${gcs.major - gc0.major}/${gcs.reduce - gc0.reduce}`;
  return { wallMs, ffmpegMs: childrenCpuMs(pid) - ff0, ...sum, gc };
}

for (let i = 0; i < RENDERS; i++)
  await get(`${VARIANT}/cb:warm-${Date.now()}-${i}/plain/local://in.wav`);
await quiesce(pid);
const settled = await settle(pid);
console.log(
  `settled ${settled.waitedS.toFixed(0)} s after the warm-up (${settled.spentMs} ms of background CPU)`,
);
type Round = Awaited<ReturnType<typeof round>> & { loops: number };
const rows: Round[] = [];
const us = (ms: number, n: number) => (n > 0 ? ((ms / n) * 1000).toFixed(0) : '–');
console.log(
  `${RENDERS} mp3 128k renders of 60 s per round, 2 at a time; per round: CPU ms / wakeups, µs per wakeup`,
);
console.log(
  'loops  wall s  ffmpeg ms |  main ms  wakes  µs/w |  rest ms  wakes  µs/w | proxy ÷ ffmpeg | GCs minor/major/reduce',
);
for (const [i, n] of LOADS.entries()) {
  while (loops.length < n) loops.push(busyLoop());
  while (loops.length > n) loops.pop()!.kill('SIGKILL');
  await new Promise((r) => setTimeout(r, 500));
  for (let r = 0; r < ROUNDS; r++) {
    const x = { ...(await round(`${Date.now()}-${i}-${r}`)), loops: n };
    rows.push(x);
    console.log(
      `${String(n).padStart(5)}  ${(x.wallMs / 1000).toFixed(1).padStart(6)}  ${x.ffmpegMs.toFixed(0).padStart(9)} | ${x.main.cpuMs.toFixed(0).padStart(8)}  ${String(x.main.wakes).padStart(5)}  ${us(x.main.cpuMs, x.main.wakes).padStart(4)} | ${x.rest.cpuMs.toFixed(0).padStart(8)}  ${String(x.rest.wakes).padStart(5)}  ${us(x.rest.cpuMs, x.rest.wakes).padStart(4)} | ${(((x.main.cpuMs + x.rest.cpuMs) / x.ffmpegMs) * 100).toFixed(2).padStart(6)} % | ${x.gc}`,
    );
  }
}
console.log('\nmedian (min–max) by load');
for (const n of new Set(LOADS)) {
  const of = (f: (r: Round) => number) => spread(rows.filter((r) => r.loops === n).map(f));
  console.log(
    `  ${n} loops: ffmpeg ${fmtSpread(
      of((r) => r.ffmpegMs),
      0,
    )} ms; main ${fmtSpread(
      of((r) => r.main.cpuMs),
      0,
    )} ms, ${fmtSpread(
      of((r) => (r.main.cpuMs / r.main.wakes) * 1000),
      0,
    )} µs/wakeup; rest ${fmtSpread(
      of((r) => r.rest.cpuMs),
      0,
    )} ms, ${fmtSpread(
      of((r) => r.rest.wakes),
      0,
    )} wakeups, ${fmtSpread(
      of((r) => (r.rest.cpuMs / r.rest.wakes) * 1000),
      0,
    )} µs/wakeup; proxy ÷ ffmpeg ${fmtSpread(
      of((r) => ((r.main.cpuMs + r.rest.cpuMs) / r.ffmpegMs) * 100),
      2,
    )} %`,
  );
}
console.log(`load average (1 min) at the end: ${loadavg()[0]!.toFixed(1)}`);
for (const l of loops) l.kill('SIGKILL');
// The proxy may still be closing a store write: its directory goes once it has exited.
proxy.kill('SIGTERM');
await proxyExited;
rmSync(root, { recursive: true, force: true });
process.exit(0);
