/**
 * `npx tsx bench/chaos.ts [--requests 3000] [--concurrency 24] [--seed 1] [--kill-mean-ms 5000]`: the long chaos run.
 * Thousands of requests over real and faulty variants with client aborts, worker kills, render
 * and probe timeouts and store write failures (see `test/reliability/chaos.ts`), then the leak
 * audit. Prints the outcome table and exits 1 on any violation or leak.
 */
import { formatChaos, runChaos } from '../test/reliability/chaos.js';

/** Default request count: long enough for rare interleavings, a few minutes on 2 cores. */
const DEFAULT_REQUESTS = 3_000;
/** Default client requests in flight: several times the render slots, so queues form. */
const DEFAULT_CONCURRENCY = 16;

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const value = Number(process.argv[i + 1]);
  if (!Number.isInteger(value) || value < 0) throw new RangeError(`--${name} needs an integer`);
  return value;
}

const report = await runChaos({
  requests: arg('requests', DEFAULT_REQUESTS),
  concurrency: arg('concurrency', DEFAULT_CONCURRENCY),
  seed: arg('seed', 1),
  workerKillMeanMs: arg('kill-mean-ms', 5_000),
  log: (line) => process.stderr.write(`${line}\n`),
});
process.stdout.write(`${formatChaos(report)}\n`);
const l = report.leaks;
const leaked =
  l.semaphoreHeld +
  l.semaphoreQueued +
  l.probeHeld +
  l.renderCoordinators +
  l.renderCoordinatorsAlive +
  l.probeCoordinators +
  l.livePids.length +
  l.liveDescendants.length +
  l.staging.length +
  l.unhandledRejections +
  report.livePidsAfterClose.length;
process.exit(report.violationCount === 0 && leaked === 0 ? 0 : 1);
