/**
 * CPU accounting for the benchmarks (issue #17): what a process, its threads and its reaped
 * children cost, read from `/proc`, so the figures are CPU time rather than wall time and hold on
 * a loaded machine.
 *
 * - `processCpuMs(pid)`: utime + stime of every thread of `pid`, live or exited (main thread,
 *   worker threads, libuv pool, V8's GC/compiler helpers); children are not included.
 *   `processCpuPartsMs(pid)` gives the two apart.
 * - `childrenCpuMs(pid)`: cutime + cstime of `pid`: the CPU of every child it has *reaped*
 *   (waited for). Exact for the ffmpegs a proxy spawns once each has been reaped, which is why
 *   `quiesce` waits until `pid` has no live children before a round is read; a child still
 *   running is not counted anywhere yet.
 * - Both are in clock ticks (USER_HZ = 100, 10 ms), so a figure should sum enough work that a
 *   tick is a small part of it; the benchmarks sum several renders per round.
 * - `settle(pid)` waits until a freshly started process has stopped working in the background
 *   (see its note): a bench measures rounds after it, not during V8's start-up collections.
 * - `loadAvg()` is /proc/loadavg's 1-minute figure, printed at the start and end of each bench.
 * - `spread(xs)` is the median with min and max over rounds.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';

/** Linux USER_HZ: the unit of /proc/<pid>/stat's time fields (`getconf CLK_TCK`). */
const CLOCK_TICK_MS = 10;

function statFields(pid: number | 'self'): string[] {
  const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  // After "pid (comm) ": state is index 0, utime 11, stime 12, cutime 13, cstime 14,
  // starttime 19.
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** utime + stime of every thread of `pid` (live and exited), without children, in ms. */
export function processCpuMs(pid: number | 'self'): number {
  const { user, system } = processCpuPartsMs(pid);
  return user + system;
}

/** `processCpuMs` split: utime (user) and stime (system, the kernel on its behalf), in ms. */
export function processCpuPartsMs(pid: number | 'self'): { user: number; system: number } {
  const f = statFields(pid);
  return { user: Number(f[11]) * CLOCK_TICK_MS, system: Number(f[12]) * CLOCK_TICK_MS };
}

/** utime + stime of `pid`'s main thread alone (the event loop), in ms. */
export function mainThreadCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/task/${pid}/stat`, 'latin1');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) * CLOCK_TICK_MS;
}

/** cutime + cstime of `pid`: every child it has reaped so far, in ms. */
export function childrenCpuMs(pid: number | 'self'): number {
  const f = statFields(pid);
  return (Number(f[13]) + Number(f[14])) * CLOCK_TICK_MS;
}

/**
 * Children that live as long as their parent and are not work: tsx's esbuild service (one per
 * thread that loads TypeScript). Its CPU is never reaped into cutime while the proxy runs, and
 * a compiled deployment has none.
 */
const RESIDENT_CHILDREN = new Set(['esbuild']);

/** Live children of `pid` (every thread's `children` list), resident helpers left out. */
export function liveChildren(pid: number): number[] {
  const out: number[] = [];
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const text = readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim();
      for (const child of text ? text.split(/\s+/).map(Number) : []) {
        const comm = readFileSync(`/proc/${child}/comm`, 'utf8').trim();
        if (!RESIDENT_CHILDREN.has(comm)) out.push(child);
      }
    } catch {
      // the thread or the child exited between the reads
    }
  }
  return out;
}

/** Waits until `pid` has reaped every child (so cutime/cstime hold them), at most `maxMs`. */
export async function quiesce(pid: number, maxMs = 10_000): Promise<void> {
  const end = performance.now() + maxMs;
  while (liveChildren(pid).length > 0) {
    if (performance.now() > end) throw new Error(`process ${pid} still has children`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * Waits until `pid` has spent at most one clock tick a second for `quietS` seconds in a row (at
 * most `maxS` seconds in all), and says how long that took and what the process spent meanwhile.
 * Why: V8's memory reducer shrinks every isolate some 8 and 16 seconds after it starts, and a
 * proxy has a dozen (the main thread, the render and probe pools' workers): measured
 * (`node --trace-gc bench/serve.mjs`, idle after six renders) as ~28 `Mark-Compact (reduce)`
 * between 8.9 and 17.7 s after start, ~450 ms of CPU in all, then nothing. A round that
 * overlaps that window carries it, and which round does depends on how long the warm-up took,
 * so on the machine's load: a busy machine's slower warm-up put the whole storm into its first
 * MISS round (640 ms of proxy CPU against 280–300 in the next; 300 with `--no-memory-reducer`).
 * The reducer's gaps last up to ~4.5 s, hence five quiet seconds, and never before the process
 * is `minAgeS` old: at 20 s a late cycle (one isolate at 25 s in one trace, two reduce GCs in
 * the first quiet round of `bench/threads.ts` in another run) still fell into a round.
 */
export async function settle(
  pid: number,
  quietS = 5,
  maxS = 60,
  minAgeS = 30,
): Promise<{ waitedS: number; spentMs: number }> {
  const start = performance.now();
  const cpu0 = processCpuMs(pid);
  let last = cpu0;
  let quiet = 0;
  let waited = 0;
  while ((quiet < quietS || ageS(pid) < minAgeS) && waited < maxS) {
    await new Promise((r) => setTimeout(r, 1000));
    waited++;
    const now = processCpuMs(pid);
    quiet = now - last <= CLOCK_TICK_MS ? quiet + 1 : 0;
    last = now;
  }
  return { waitedS: (performance.now() - start) / 1000, spentMs: last - cpu0 };
}

/** Seconds since `pid` started (/proc/<pid>/stat's starttime against /proc/uptime). */
function ageS(pid: number): number {
  const startTicks = Number(statFields(pid)[19]);
  const uptimeS = Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]);
  return uptimeS - (startTicks * CLOCK_TICK_MS) / 1000;
}

/** The 1-minute load average. */
export function loadAvg(): number {
  return loadavg()[0]!;
}

export interface Spread {
  readonly median: number;
  readonly min: number;
  readonly max: number;
}

export function spread(xs: readonly number[]): Spread {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  const median = s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
  return { median, min: s[0]!, max: s.at(-1)! };
}

/** "2.1 % (1.9–2.4)" style: median and range, `scale` applied, `digits` decimals. */
export function fmtSpread(s: Spread, digits = 2, scale = 1, unit = ''): string {
  const f = (v: number) => (v * scale).toFixed(digits);
  return `${f(s.median)}${unit} (${f(s.min)}–${f(s.max)})`;
}

/** The figures a Spread contributes to `report()`: `<key>`, `<key>:min`, `<key>:max`. */
export function spreadFigures(key: string, s: Spread): Record<string, number> {
  return { [key]: s.median, [`${key}:min`]: s.min, [`${key}:max`]: s.max };
}
