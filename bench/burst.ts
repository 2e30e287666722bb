/**
 * `npx tsx bench/burst.ts [--requests 5000]`: 5,000 simultaneous requests against a proxy with two
 * render slots and a queue of 32 (see `test/reliability/burst.ts`). Prints the answers, the
 * largest queue depth the semaphore actor ever held, and the `/health` latencies during the
 * burst; exits 1 unless depth ≤ 32, every overflow is a 429 with Retry-After ≥ 1, there is no
 * 5xx, and the slowest `/health` answer took at most 50 ms.
 *
 * Issue #17, the event loop's own figures for the burst window (from "firing" to "answered" in
 * the harness's log; the proxy runs in this process, the clients and the prober in their own):
 * - utilisation: `performance.eventLoopUtilization()` over the window (busy ÷ busy + idle);
 * - longest task, measured per task (`test/reliability/longTasks.ts`): Node has no long-task
 *   API, so `async_hooks` `before`/`after` around every callback the loop makes into JavaScript,
 *   a task being one such callback with the microtasks and ticks that run after it (as a
 *   browser counts one). Its wall time, and its time on a CPU (wall minus this thread's
 *   run-queue wait from `/proc/thread-self/schedstat`): the second does not grow with the
 *   machine's load. `coverage` is the tasks' sum ÷ the busy time (libuv's own work between
 *   callbacks is in no task). Target ≤ 10 ms.
 * - the delay max beside it, the upper bound: `monitorEventLoopDelay` at 1 ms resolution, the
 *   longest a 1 ms timer waited past its due time. That is the longest stretch the loop did not
 *   return to timers: one long callback, or a poll phase of many short ones, plus any time the
 *   thread was runnable but had no CPU.
 * - `--no-tasks` leaves the hooks out (they cost a promise hook per promise reaction, so the
 *   utilisation of a run with them is a little higher): the same run without the per-task figure.
 */
import { type EventLoopUtilization, monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { BURST_QUEUE_SIZE, formatBurst, runBurst } from '../test/reliability/burst.js';
import { taskMonitor, threadSchedstat } from '../test/reliability/longTasks.js';
import { loadAvg } from './cpuclock.js';
import { report as reportFigures } from './report.js';

/** The issue's burst size. */
const DEFAULT_REQUESTS = 5_000;
/** The issue's bound on every /health answer during the burst, in ms. */
const HEALTH_MAX_MS = 50;

const i = process.argv.indexOf('--requests');
const requests = i < 0 ? DEFAULT_REQUESTS : Number(process.argv[i + 1]);
if (!Number.isInteger(requests) || requests < 1)
  throw new RangeError('--requests needs an integer');

/** Resolution of the delay histogram, in ms (its timer fires this often). */
const LAG_RESOLUTION_MS = 1;
/** The issue's bound on the longest event-loop task during the burst, in ms. */
const LONGEST_TASK_MS = 10;

const perTask = !process.argv.includes('--no-tasks');
const loadStart = loadAvg();
const lag = monitorEventLoopDelay({ resolution: LAG_RESOLUTION_MS });
const tasks = taskMonitor({ overMs: LONGEST_TASK_MS });
/** The main thread's scheduler account (opened here, on it): its CPU and run-queue wait. */
const sched = threadSchedstat();
let sched0: { runNs: number; waitNs: number } | undefined;
let sched1: { runNs: number; waitNs: number } | undefined;
let elu0: EventLoopUtilization | undefined;
let elu: EventLoopUtilization | undefined;
let firedAt: number | undefined;
const report = await runBurst({
  requests,
  log: (line) => {
    process.stderr.write(`${line}\n`);
    if (line.startsWith('firing')) {
      firedAt = performance.now();
      sched0 = sched?.read();
      elu0 = performance.eventLoopUtilization();
      lag.enable();
      if (perTask) tasks.enable();
    } else if (line.startsWith('answered') && elu0) {
      if (perTask) tasks.disable();
      elu = performance.eventLoopUtilization(elu0);
      sched1 = sched?.read();
      lag.disable();
    }
  },
});
process.stdout.write(`${formatBurst(report)}\n`);
const t = tasks.figures();
const loop = {
  utilisation: elu?.utilization ?? Number.NaN,
  busyMs: elu?.active ?? Number.NaN,
  lagMaxMs: lag.max / 1e6,
  lagP99Ms: lag.percentile(99) / 1e6,
  cpuMs: sched0 && sched1 ? (sched1.runNs - sched0.runNs) / 1e6 : Number.NaN,
  waitMs: sched0 && sched1 ? (sched1.waitNs - sched0.waitNs) / 1e6 : Number.NaN,
};
sched?.close();
const f1 = (v: number) => (Number.isFinite(v) ? v.toFixed(1) : '–');
process.stdout.write(
  `  event loop during the burst: utilisation ${(loop.utilisation * 100).toFixed(1)} % (${loop.busyMs.toFixed(0)} ms busy, ` +
    `${((loop.busyMs * 1000) / requests).toFixed(0)} µs per request); main thread on a CPU ${loop.cpuMs.toFixed(0)} ms ` +
    `(${((loop.cpuMs * 1000) / requests).toFixed(0)} µs per request), waiting for one ${loop.waitMs.toFixed(0)} ms\n` +
    (perTask
      ? `  longest task ${f1(t.maxMs)} ms wall, ${f1(t.maxRunMs)} ms less run-queue wait (target ≤ ${LONGEST_TASK_MS} ms); ` +
        `p99 ${f1(t.p99Ms)} ms wall, ${f1(t.p99RunMs)} ms less wait; ${t.count} tasks, ${t.over} over ${t.overMs} ms; ` +
        `coverage ${((t.sumMs / loop.busyMs) * 100).toFixed(0)} % of the busy time; run-queue wait in tasks ${f1(t.waitMs)} ms\n` +
        `  the longest (ms after firing: wall/on-CPU ms, what started it): ${t.longest
          .map(
            (l) =>
              `${((l.atMs - (firedAt ?? 0)) | 0).toString()}: ${l.ms.toFixed(1)}/${l.runMs.toFixed(1)} ${l.what}${l.gcMs > 0 ? ` (gc ${l.gcMs.toFixed(1)})` : ''}`,
          )
          .join(', ')}\n`
      : '  per-task figures: not measured (--no-tasks)\n') +
    `  delay max (upper bound on the longest task) ${f1(loop.lagMaxMs)} ms, p99 ${f1(loop.lagP99Ms)} ms; ` +
    `/health max ${report.health.max} ms; load ${loadStart.toFixed(1)} → ${loadAvg().toFixed(1)}\n`,
);
reportFigures('burst', {
  elu: loop.utilisation,
  busyMs: loop.busyMs,
  busyUsPerRequest: (loop.busyMs * 1000) / requests,
  cpuMs: loop.cpuMs,
  cpuUsPerRequest: (loop.cpuMs * 1000) / requests,
  runQueueWaitMs: loop.waitMs,
  ...(perTask
    ? {
        taskMaxMs: t.maxMs,
        taskMaxRunMs: t.maxRunMs,
        taskP99Ms: t.p99Ms,
        taskP99RunMs: t.p99RunMs,
        tasksOver: t.over,
        taskCoverage: t.sumMs / loop.busyMs,
      }
    : {}),
  longestTaskMs: loop.lagMaxMs,
  lagP99Ms: loop.lagP99Ms,
  healthMaxMs: report.health.max,
  healthP99Ms: report.health.p99,
  loadStart,
  loadEnd: loadAvg(),
});
const c = report.client;
const checks: Array<[string, boolean]> = [
  [
    `queue depth ≤ ${BURST_QUEUE_SIZE}`,
    Math.max(report.maxDepthSnapshot, report.maxDepthTelemetry) <= BURST_QUEUE_SIZE,
  ],
  [
    'every answer is a 200 or a 429',
    Object.keys(c.statuses).every((s) => s === '200' || s === '429'),
  ],
  ['every 429 is queue_full with Retry-After ≥ 1', c.bad429 === 0],
  ['zero 5xx', report.fiveXx === 0],
  [
    'every request answered, nothing torn',
    c.unanswered === 0 && c.torn200 === 0 && c.cutShort === 0 && Object.keys(c.errors).length === 0,
  ],
  [
    `/health max ≤ ${HEALTH_MAX_MS} ms`,
    report.health.max <= HEALTH_MAX_MS && report.health.failures === 0,
  ],
];
for (const [name, ok] of checks) process.stdout.write(`  ${ok ? 'ok  ' : 'FAIL'} ${name}\n`);
process.exit(checks.every(([, ok]) => ok) ? 0 : 1);
