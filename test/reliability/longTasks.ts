/**
 * The event loop's tasks, each timed on its own: Node has no long-task API, so this builds one
 * from `async_hooks`. Every time libuv (or a timer, an immediate, a worker's message) calls into
 * JavaScript, Node emits `before` and `after` around the callback; the microtasks and
 * `process.nextTick` callbacks that run once it returns (each under its own `before`/`after`, a
 * promise's or a tick's) are the same task, as a browser counts a task with its microtask
 * checkpoint. So a **task** starts at a `before` at depth 0 whose resource is not a promise, a
 * tick or a `queueMicrotask` (an `AsyncResource`), and ends at the last depth-0 `after` before
 * the next one starts. Its length is wall time on `performance.now()`.
 *
 * What this sees and what it does not:
 * - A poll phase of 200 short callbacks is 200 tasks here, one stretch to `monitorEventLoopDelay`
 *   (a late timer): that is the difference between the two figures.
 * - The time between tasks (libuv's own work: `epoll_wait` returning, a socket's `read`, closing
 *   handles) is in no task; `coverage` (the tasks' sum ÷ the loop's busy time from
 *   `eventLoopUtilization`) says how much of the busy time the tasks account for.
 * - A task's wall time includes any time the thread was runnable without a CPU (a loaded box
 *   stretches tasks); `runMs` takes that out (Linux's `schedstat` `run_delay` of this thread,
 *   read with one `pread`). What it keeps is time on a CPU plus time the thread was blocked (a
 *   lock held by another thread that is itself waiting for a CPU still ties it to the load);
 *   `cpuMs` (the scheduler's own account, as fresh as its last tick) tells the two apart.
 * - Checks on the segmentation: `idleMs`, the loop's idle time inside tasks, is 0 when no task
 *   spans a return to the poll; `parts` counts the callbacks a task ran.
 * - The hooks themselves cost (a promise hook on every promise reaction, a `pread` per task):
 *   that makes both figures over- rather than under-estimates.
 *
 * ## Invariants
 * - **Tasks never overlap and are never merged across a macrotask boundary.**
 * - **Enabling mid-callback is safe**: that callback's `after` comes with no `before`; the depth
 *   never goes below 0. (An uncaught exception skips `after`s; the process ends on one anyway.)
 * - **Each task's run-queue wait is read at its start and, once it has run past
 *   `WAIT_READ_AFTER_MS`, at its `after`s** (at most every `WAIT_READ_EVERY_MS`): a wait after
 *   the last read is counted as running, so `runMs` errs long, never short.
 *
 * ## Races
 * None: every hook runs on the thread it measures.
 *
 * ## Events
 * None.
 */
import { AsyncResource, createHook, executionAsyncResource } from 'node:async_hooks';
import { closeSync, openSync, readSync } from 'node:fs';
import {
  createHistogram,
  type PerformanceEntry,
  PerformanceObserver,
  performance,
} from 'node:perf_hooks';

/** One task, for the longest ones listed: when it started (ms on `performance.now()`), how long. */
export interface TaskSample {
  readonly atMs: number;
  readonly ms: number;
  /** Of `ms`, the time on a CPU: wall minus the time the thread waited for one (`run_delay`). */
  readonly runMs: number;
  /** The resource's constructor that started it (`TCP`, `Timeout`, `Immediate`, `MessagePort`…). */
  readonly what: string;
  /**
   * Its CPU by the scheduler's account (`sum_exec_runtime`), which for a running thread lags by
   * up to one tick (4 ms at 250 Hz): a diagnostic, not a figure. Well below `runMs`, the thread
   * was blocked (not runnable) for the difference.
   */
  readonly cpuMs: number;
  /** Callbacks it ran: its own, and the promise reactions, ticks and microtasks after it. */
  readonly parts: number;
  /** Loop idle time inside it (libuv's, `nodeTiming.idleTime`): 0 unless a boundary was missed. */
  readonly idleMs: number;
  /** V8's garbage collections inside it (`gc` performance entries overlapping it), in ms. */
  readonly gcMs: number;
}

export interface TaskFigures {
  readonly count: number;
  /** Wall time: the longest task, and the 99th and 99.9th percentiles. */
  readonly maxMs: number;
  readonly p99Ms: number;
  readonly p999Ms: number;
  /** The same on a CPU (wall minus run-queue wait); NaN where `schedstat` cannot be read. */
  readonly maxRunMs: number;
  readonly p99RunMs: number;
  /** The run-queue wait inside the tasks, summed, in ms (NaN without `schedstat`). */
  readonly waitMs: number;
  /** Tasks of more than `overMs`. */
  readonly over: number;
  readonly overMs: number;
  /** The sum of all task lengths, in ms. */
  readonly sumMs: number;
  /** Loop idle time inside tasks, summed, in ms: 0 when every boundary was seen. */
  readonly idleMs: number;
  /** The longest tasks, longest first; and the same by `runMs`. */
  readonly longest: readonly TaskSample[];
  readonly longestRun: readonly TaskSample[];
}

export interface TaskMonitor {
  /** Starts timing (the callback running now counts from this moment). */
  enable(): void;
  /** Stops timing; the task running now ends here. */
  disable(): void;
  figures(): TaskFigures;
}

/** How many of the longest tasks are kept with their resource name. */
const KEEP_LONGEST = 8;
/** A task longer than this (so far) has its run-queue wait read at its `after`s, in ms. */
const WAIT_READ_AFTER_MS = 1;
/** ...at most this often, in ms (a task of many microtasks would otherwise read it each time). */
const WAIT_READ_EVERY_MS = 0.25;

/** A `before` that continues the current task: a promise reaction, a tick, a `queueMicrotask`. */
function continuesTask(resource: object): boolean {
  return (
    resource instanceof Promise ||
    Object.getPrototypeOf(resource) === Object.prototype || // process.nextTick's tick object
    resource instanceof AsyncResource // queueMicrotask runs its callback under one
  );
}

/**
 * This thread's scheduler account from Linux's `/proc/thread-self/schedstat`: `runNs`, the time it
 * ran on a CPU (`sum_exec_runtime`; for the running thread it lags by up to one scheduler tick,
 * so it is for windows of seconds), and `waitNs`, the time it was runnable but not running
 * (`run_delay`; current whenever the thread reads it, as it is running then). One `pread`, ~2 µs.
 * Open it on the thread to be measured. `undefined` off Linux.
 */
export function threadSchedstat():
  | { read(): { runNs: number; waitNs: number }; close(): void }
  | undefined {
  let fd: number;
  try {
    fd = openSync('/proc/thread-self/schedstat', 'r');
  } catch {
    return undefined;
  }
  const buf = Buffer.alloc(96);
  /** The decimal field that starts at `i`, and where the next one starts. */
  const field = (i: number, n: number): [number, number] => {
    let v = 0;
    for (; i < n && buf[i]! >= 0x30 && buf[i]! <= 0x39; i++) v = v * 10 + buf[i]! - 0x30;
    return [v, i + 1];
  };
  return {
    read() {
      const n = readSync(fd, buf, 0, buf.length, 0);
      const [runNs, next] = field(0, n);
      return { runNs, waitNs: field(next, n)[0] };
    },
    close: () => closeSync(fd),
  };
}

export function taskMonitor(opts: { readonly overMs?: number } = {}): TaskMonitor {
  const overMs = opts.overMs ?? 10;
  const wall = createHistogram();
  const run = createHistogram();
  let wait: ReturnType<typeof threadSchedstat>;
  let schedstat = false;
  let depth = 0;
  /** The current task: its start, its last depth-0 `after`, and its resource. */
  let start = -1;
  let lastEnd = -1;
  let resource: object | undefined;
  /** Run-queue wait (ns) at the task's start, and at its last read since (-1: none). */
  let waitStart = 0;
  let waitEnd = -1;
  /** `sum_exec_runtime` (ns) at the same reads: CPU, but only as fresh as the last tick. */
  let runStart = 0;
  let runEnd = 0;
  let waitReadAt = 0;
  /** Loop idle time (ms) at the task's start and at its last depth-0 `after`. */
  let idleStart = 0;
  let idleEnd = 0;
  let idleSum = 0;
  let parts = 0;
  let count = 0;
  let over = 0;
  let sumMs = 0;
  let waitSumNs = 0;
  let maxMs = 0;
  let maxRunMs = 0;
  const longest: TaskSample[] = [];
  const longestRun: TaskSample[] = [];
  const keep = (list: TaskSample[], t: TaskSample, by: (t: TaskSample) => number) => {
    if (list.length >= KEEP_LONGEST && by(t) <= by(list[list.length - 1]!)) return;
    list.push(t);
    list.sort((a, b) => by(b) - by(a));
    if (list.length > KEEP_LONGEST) list.pop();
  };
  const gcs: Array<{ start: number; end: number }> = [];
  const gcObserver = new PerformanceObserver((list) => {
    for (const e of list.getEntries() as PerformanceEntry[])
      gcs.push({ start: e.startTime, end: e.startTime + e.duration });
  });
  const gcIn = (t: TaskSample) =>
    gcs.reduce(
      (sum, g) => sum + Math.max(0, Math.min(g.end, t.atMs + t.ms) - Math.max(g.start, t.atMs)),
      0,
    );

  const open = (now: number, r: object | undefined) => {
    start = now;
    lastEnd = now;
    resource = r;
    waitEnd = -1;
    waitReadAt = 0;
    parts = 1;
    idleStart = performance.nodeTiming.idleTime;
    idleEnd = idleStart;
    if (wait) {
      const a = wait.read();
      waitStart = a.waitNs;
      runStart = a.runNs;
      runEnd = a.runNs;
    }
  };

  const close = () => {
    if (start < 0) return;
    const ms = Math.max(0, lastEnd - start);
    // Wait read only for tasks past WAIT_READ_AFTER_MS; a shorter one counts whole (over-estimate).
    const waitedNs = waitEnd >= 0 ? waitEnd - waitStart : 0;
    const runMs = Math.max(0, ms - waitedNs / 1e6);
    const idleMs = idleEnd - idleStart;
    const cpuMs = (runEnd - runStart) / 1e6;
    count++;
    sumMs += ms;
    idleSum += idleMs;
    waitSumNs += waitedNs;
    wall.record(Math.max(1, Math.round(ms * 1e6)));
    run.record(Math.max(1, Math.round(runMs * 1e6)));
    if (ms > overMs) over++;
    if (ms > maxMs) maxMs = ms;
    if (runMs > maxRunMs) maxRunMs = runMs;
    if (
      longest.length < KEEP_LONGEST ||
      ms > longest[longest.length - 1]!.ms ||
      longestRun.length < KEEP_LONGEST ||
      runMs > longestRun[longestRun.length - 1]!.runMs
    ) {
      const sample: TaskSample = {
        atMs: start,
        ms,
        runMs,
        idleMs,
        cpuMs,
        parts,
        gcMs: 0,
        what: resource?.constructor?.name ?? '?',
      };
      keep(longest, sample, (t) => t.ms);
      keep(longestRun, sample, (t) => t.runMs);
    }
    start = -1;
  };

  const hook = createHook({
    before() {
      if (depth++ > 0) return;
      const r = executionAsyncResource();
      if (start >= 0 && continuesTask(r)) {
        parts++;
        return;
      }
      close();
      open(performance.now(), r);
    },
    after() {
      if (depth > 0) depth--;
      if (depth !== 0) return;
      lastEnd = performance.now();
      if (
        wait &&
        lastEnd - start > WAIT_READ_AFTER_MS &&
        lastEnd - waitReadAt > WAIT_READ_EVERY_MS
      ) {
        const a = wait.read();
        waitEnd = a.waitNs;
        runEnd = a.runNs;
        waitReadAt = lastEnd;
      }
    },
  });

  return {
    enable() {
      wait = threadSchedstat();
      schedstat = wait !== undefined;
      gcObserver.observe({ entryTypes: ['gc'] });
      depth = 0;
      open(performance.now(), undefined);
      hook.enable();
    },
    disable() {
      hook.disable();
      lastEnd = performance.now();
      idleEnd = performance.nodeTiming.idleTime;
      if (wait) {
        const a = wait.read();
        waitEnd = a.waitNs;
        runEnd = a.runNs;
      }
      close();
      wait?.close();
      wait = undefined;
      // The observer is told of the last collections asynchronously: figures() reads what came.
      setTimeout(() => gcObserver.disconnect(), 100).unref();
    },
    figures() {
      const q = (h: typeof wall, p: number) => (count === 0 ? Number.NaN : h.percentile(p) / 1e6);
      return {
        count,
        maxMs,
        p99Ms: q(wall, 99),
        p999Ms: q(wall, 99.9),
        maxRunMs: schedstat ? maxRunMs : Number.NaN,
        p99RunMs: schedstat ? q(run, 99) : Number.NaN,
        waitMs: schedstat ? waitSumNs / 1e6 : Number.NaN,
        over,
        overMs,
        sumMs,
        idleMs: idleSum,
        longest: longest.map((t) => ({ ...t, gcMs: gcIn(t) })),
        longestRun: longestRun.map((t) => ({ ...t, gcMs: gcIn(t) })),
      };
    },
  };
}
