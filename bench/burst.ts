/**
 * `npx tsx bench/burst.ts [--requests 5000] [--rounds 3] [--no-tasks]`: 5,000 simultaneous
 * requests against a proxy with two render slots and a queue of 32 (see
 * `test/reliability/burst.ts`), `--rounds` times, each on a fresh proxy. Prints, per round, the
 * answers, the largest queue depth the semaphore actor ever held, the `/health` latencies during
 * the burst and the event loop's figures, then their medians (min–max); exits 1 unless in every
 * round depth ≤ 32, every overflow is a 429 with Retry-After ≥ 1, there is no 5xx, and the
 * slowest `/health` answer took at most 50 ms.
 *
 * Issue #17, the event loop's own figures for the burst window (from "firing" to "answered" in
 * the harness's log; the proxy runs in this process, the clients and the prober in their own):
 * - main-thread CPU per request: this thread's `sum_exec_runtime` over the window (Linux
 *   `/proc/thread-self/schedstat`, ns) ÷ the requests; CPU, so the machine's load stretches it
 *   far less than the busy time. The run-queue wait beside it says how loaded it was;
 * - utilisation: `performance.eventLoopUtilization()` over the window (busy ÷ busy + idle);
 * - longest task, measured per task (`test/reliability/longTasks.ts`): Node has no long-task
 *   API, so `async_hooks` `before`/`after` around every callback the loop makes into JavaScript,
 *   a task being one such callback with the microtasks and ticks that run after it (as a
 *   browser counts one). Its wall time, and its wall time less this thread's run-queue wait
 *   (`/proc/thread-self/schedstat`): preemption taken out, but not time the thread was blocked
 *   (waiting for a lock another thread held); the longest tasks are listed with the scheduler's
 *   CPU (±1 tick) to tell the two apart. `coverage` is the tasks' sum ÷ the busy time (libuv's
 *   own work between callbacks is in no task). Target ≤ 10 ms.
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
import { fmtSpread, loadAvg, spread, spreadFigures } from './cpuclock.js';
import { report as reportFigures } from './report.js';

/** The issue's burst size. */
const DEFAULT_REQUESTS = 5_000;
/** Bursts per run, each on a fresh proxy; the figures are their medians. */
const DEFAULT_ROUNDS = 3;
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
const r = process.argv.indexOf('--rounds');
const rounds = r < 0 ? DEFAULT_ROUNDS : Number(process.argv[r + 1]);
if (!Number.isInteger(rounds) || rounds < 1) throw new RangeError('--rounds needs an integer');

const f1 = (v: number) => (Number.isFinite(v) ? v.toFixed(1) : '–');

/** One burst on a fresh proxy: its report, and the event loop's figures over its window. */
async function round() {
  const lag = monitorEventLoopDelay({ resolution: LAG_RESOLUTION_MS });
  const tasks = taskMonitor({ overMs: LONGEST_TASK_MS });
  /** The main thread's scheduler account (opened here, on it): its CPU and run-queue wait. */
  const sched = threadSchedstat();
  let sched0: { runNs: number; waitNs: number } | undefined;
  let sched1: { runNs: number; waitNs: number } | undefined;
  let elu0: EventLoopUtilization | undefined;
  let elu: EventLoopUtilization | undefined;
  let firedAt = 0;
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
  sched?.close();
  const busyMs = elu?.active ?? Number.NaN;
  const cpuMs = sched0 && sched1 ? (sched1.runNs - sched0.runNs) / 1e6 : Number.NaN;
  return {
    report,
    firedAt,
    tasks: perTask ? tasks.figures() : undefined,
    utilisation: elu?.utilization ?? Number.NaN,
    busyMs,
    cpuMs,
    cpuUsPerRequest: (cpuMs * 1000) / requests,
    waitMs: sched0 && sched1 ? (sched1.waitNs - sched0.waitNs) / 1e6 : Number.NaN,
    lagMaxMs: lag.max / 1e6,
    lagP99Ms: lag.percentile(99) / 1e6,
  };
}

type Round = Awaited<ReturnType<typeof round>>;

function printRound(n: number, x: Round): void {
  const t = x.tasks;
  process.stdout.write(
    `${formatBurst(x.report)}\n` +
      `  round ${n}, event loop during the burst: utilisation ${(x.utilisation * 100).toFixed(1)} % (${x.busyMs.toFixed(0)} ms busy); ` +
      `main thread on a CPU ${x.cpuMs.toFixed(0)} ms (${x.cpuUsPerRequest.toFixed(0)} µs per request), waiting for one ${x.waitMs.toFixed(0)} ms\n` +
      (t
        ? `  longest task ${f1(t.maxMs)} ms wall, ${f1(t.maxRunMs)} ms less run-queue wait (target ≤ ${LONGEST_TASK_MS} ms); ` +
          `p99 ${f1(t.p99Ms)} ms wall, ${f1(t.p99RunMs)} ms less wait; ${t.count} tasks, ${t.over} over ${t.overMs} ms; ` +
          `coverage ${((t.sumMs / x.busyMs) * 100).toFixed(0)} % of the busy time; run-queue wait in tasks ${f1(t.waitMs)} ms, loop idle in tasks ${f1(t.idleMs)} ms\n` +
          (['longest', 'longestRun'] as const)
            .map(
              (list) =>
                `  the longest ${list === 'longest' ? 'by wall' : 'less run-queue wait'} (ms after firing: wall/less-wait ms, what started it × callbacks, cpu by the scheduler ±4 ms): ${t[
                  list
                ]
                  .map(
                    (l) =>
                      `${Math.round(l.atMs - x.firedAt)}: ${l.ms.toFixed(1)}/${l.runMs.toFixed(1)} ${l.what}×${l.parts}, cpu ≈${l.cpuMs.toFixed(0)}` +
                      `${l.gcMs > 0 ? ` (gc ${l.gcMs.toFixed(1)})` : ''}${l.idleMs > 0.05 ? ` (idle ${l.idleMs.toFixed(1)})` : ''}`,
                  )
                  .join(', ')}\n`,
            )
            .join('')
        : '  per-task figures: not measured (--no-tasks)\n') +
      `  delay max (upper bound on the longest task) ${f1(x.lagMaxMs)} ms, p99 ${f1(x.lagP99Ms)} ms; /health max ${x.report.health.max} ms\n`,
  );
}

const loadStart = loadAvg();
const all: Round[] = [];
for (let n = 1; n <= rounds; n++) {
  const x = await round();
  printRound(n, x);
  all.push(x);
}
const loadEnd = loadAvg();
const of = (pick: (x: Round) => number | undefined) =>
  spread(all.map((x) => pick(x) ?? Number.NaN));
const cpuUs = of((x) => x.cpuUsPerRequest);
const taskMax = of((x) => x.tasks?.maxMs);
const taskRun = of((x) => x.tasks?.maxRunMs);
const lagMax = of((x) => x.lagMaxMs);
const healthMax = of((x) => x.report.health.max);
const elu = of((x) => x.utilisation);
process.stdout.write(
  `\nburst, median (min–max) of ${rounds} round${rounds === 1 ? '' : 's'}, load ${loadStart.toFixed(1)} → ${loadEnd.toFixed(1)}:\n` +
    `  main thread CPU per request ${fmtSpread(cpuUs, 0, 1, ' µs')}; utilisation ${fmtSpread(elu, 0, 100, ' %')}\n` +
    (perTask
      ? `  longest task ${fmtSpread(taskMax, 1, 1, ' ms')} wall, ${fmtSpread(taskRun, 1, 1, ' ms')} less run-queue wait (target ≤ ${LONGEST_TASK_MS} ms)\n`
      : '') +
    `  delay max ${fmtSpread(lagMax, 1, 1, ' ms')}; /health max ${fmtSpread(healthMax, 1, 1, ' ms')}\n`,
);
reportFigures('burst', {
  rounds,
  elu: elu.median,
  busyMs: of((x) => x.busyMs).median,
  ...spreadFigures('cpuUsPerRequest', cpuUs),
  runQueueWaitMs: of((x) => x.waitMs).median,
  ...(perTask
    ? {
        ...spreadFigures('taskMaxMs', taskMax),
        ...spreadFigures('taskMaxRunMs', taskRun),
        taskP99Ms: of((x) => x.tasks?.p99Ms).median,
        tasksOver: of((x) => x.tasks?.over).median,
        taskCoverage: of((x) => (x.tasks ? x.tasks.sumMs / x.busyMs : undefined)).median,
      }
    : {}),
  longestTaskMs: lagMax.median,
  lagP99Ms: of((x) => x.lagP99Ms).median,
  healthMaxMs: healthMax.median,
  healthP99Ms: of((x) => x.report.health.p99).median,
  loadStart,
  loadEnd,
});
const checks: Array<[string, boolean]> = all.flatMap(({ report }, n) => {
  const c = report.client;
  const name = (what: string) => (rounds === 1 ? what : `round ${n + 1}: ${what}`);
  return [
    [
      name(`queue depth ≤ ${BURST_QUEUE_SIZE}`),
      Math.max(report.maxDepthSnapshot, report.maxDepthTelemetry) <= BURST_QUEUE_SIZE,
    ],
    [
      name('every answer is a 200 or a 429'),
      Object.keys(c.statuses).every((s) => s === '200' || s === '429'),
    ],
    [name('every 429 is queue_full with Retry-After ≥ 1'), c.bad429 === 0],
    [name('zero 5xx'), report.fiveXx === 0],
    [
      name('every request answered, nothing torn'),
      c.unanswered === 0 &&
        c.torn200 === 0 &&
        c.cutShort === 0 &&
        Object.keys(c.errors).length === 0,
    ],
    [
      name(`/health max ≤ ${HEALTH_MAX_MS} ms`),
      report.health.max <= HEALTH_MAX_MS && report.health.failures === 0,
    ],
  ] as Array<[string, boolean]>;
});
for (const [name, ok] of checks) process.stdout.write(`  ${ok ? 'ok  ' : 'FAIL'} ${name}\n`);
process.exit(checks.every(([, ok]) => ok) ? 0 : 1);
