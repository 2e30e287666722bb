/**
 * `npx tsx bench/burst.ts [--requests 5000]`: 5,000 simultaneous requests against a proxy with two
 * render slots and a queue of 32 (see `test/reliability/burst.ts`). Prints the answers, the
 * largest queue depth the semaphore actor ever held, and the `/health` latencies during the
 * burst; exits 1 unless depth ≤ 32, every overflow is a 429 with Retry-After ≥ 1, there is no
 * 5xx, and the slowest `/health` answer took at most 50 ms.
 */
import { BURST_QUEUE_SIZE, formatBurst, runBurst } from '../test/reliability/burst.js';

/** The burst size. */
const DEFAULT_REQUESTS = 5_000;
/** The bound on every /health answer during the burst, in ms. */
const HEALTH_MAX_MS = 50;

const i = process.argv.indexOf('--requests');
const requests = i < 0 ? DEFAULT_REQUESTS : Number(process.argv[i + 1]);
if (!Number.isInteger(requests) || requests < 1)
  throw new RangeError('--requests needs an integer');

const report = await runBurst({ requests, log: (line) => process.stderr.write(`${line}\n`) });
process.stdout.write(`${formatBurst(report)}\n`);
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
