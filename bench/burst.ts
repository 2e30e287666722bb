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
 * - longest task: Node has no long-task API, so `monitorEventLoopDelay` at 1 ms resolution, max:
 *   the longest a 1 ms timer waited past its due time. That is the longest stretch the loop did
 *   not return to timers: one long callback, or a poll phase of many short ones, plus any time
 *   the thread was runnable but had no CPU. So it is an upper bound on the longest task (in
 *   wall time), reported beside the `/health` maximum the separate prober saw. Target ≤ 10 ms.
 */
import { type EventLoopUtilization, monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { BURST_QUEUE_SIZE, formatBurst, runBurst } from '../test/reliability/burst.js';
import { loadAvg } from './cpuclock.js';
import { report as reportFigures } from './report.js';

/** The burst size. */
const DEFAULT_REQUESTS = 5_000;
/** The bound on every /health answer during the burst, in ms. */
const HEALTH_MAX_MS = 50;

const i = process.argv.indexOf('--requests');
const requests = i < 0 ? DEFAULT_REQUESTS : Number(process.argv[i + 1]);
if (!Number.isInteger(requests) || requests < 1)
  throw new RangeError('--requests needs an integer');

/** Resolution of the delay histogram, in ms (its timer fires this often). */
const LAG_RESOLUTION_MS = 1;
/** The bound on the longest event-loop task during the burst, in ms. */
const LONGEST_TASK_MS = 10;

const loadStart = loadAvg();
const lag = monitorEventLoopDelay({ resolution: LAG_RESOLUTION_MS });
let elu0: EventLoopUtilization | undefined;
let elu: EventLoopUtilization | undefined;
const report = await runBurst({
  requests,
  log: (line) => {
    process.stderr.write(`${line}\n`);
    if (line.startsWith('firing')) {
      elu0 = performance.eventLoopUtilization();
      lag.enable();
    } else if (line.startsWith('answered') && elu0) {
      elu = performance.eventLoopUtilization(elu0);
      lag.disable();
    }
  },
});
process.stdout.write(`${formatBurst(report)}\n`);
const loop = {
  utilisation: elu?.utilization ?? Number.NaN,
  busyMs: elu?.active ?? Number.NaN,
  longestTaskMs: lag.max / 1e6,
  lagP99Ms: lag.percentile(99) / 1e6,
};
process.stdout.write(
  `  event loop during the burst: utilisation ${(loop.utilisation * 100).toFixed(1)} % (${loop.busyMs.toFixed(0)} ms busy), ` +
    `longest task ≤ ${loop.longestTaskMs.toFixed(1)} ms (delay max; p99 ${loop.lagP99Ms.toFixed(1)} ms; target ≤ ${LONGEST_TASK_MS} ms), ` +
    `/health max ${report.health.max} ms; load ${loadStart.toFixed(1)} → ${loadAvg().toFixed(1)}\n`,
);
reportFigures('burst', {
  elu: loop.utilisation,
  busyMs: loop.busyMs,
  longestTaskMs: loop.longestTaskMs,
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
