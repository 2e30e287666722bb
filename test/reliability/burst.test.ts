/**
 * The burst, CI size: 1,500 simultaneous requests at AP_MAX_CONCURRENCY=2, AP_QUEUE_SIZE=32.
 * Proves the semaphore's queue depth, read from the actor on every transition, never exceeds 32
 * (and reaches it, so the bound was tested); every overflow is a 429 queue_full with
 * Retry-After ≥ 1; there is no 5xx, no torn or missing answer; and `/health`, probed every 20 ms
 * on its own connection, answers in ≤ 50 ms at the 95th percentile (see the note at the assert).
 */
import { describe, expect, it } from 'vitest';
import { BURST_QUEUE_SIZE, formatBurst, runBurst } from './burst.js';

/** Simultaneous requests in CI: thirty times what the slots and queue admit at once. */
const CI_REQUESTS = 1_500;
/** The bound on /health during the burst, in ms. */
const HEALTH_BOUND_MS = 50;

describe('burst (CI size)', () => {
  it(`${CI_REQUESTS} simultaneous requests: depth ≤ ${BURST_QUEUE_SIZE}, the rest 429, no 5xx, /health fast`, {
    timeout: 240_000,
  }, async () => {
    const report = await runBurst({ requests: CI_REQUESTS });
    console.log(formatBurst(report));
    const c = report.client;

    expect(report.maxDepthSnapshot).toBe(BURST_QUEUE_SIZE);
    expect(report.maxDepthTelemetry).toBe(BURST_QUEUE_SIZE);
    expect(report.snapshots).toBeGreaterThan(CI_REQUESTS / 2);
    expect(report.telemetryEvents).toBeGreaterThan(CI_REQUESTS / 2);

    expect(c.unanswered).toBe(0);
    expect(c.errors).toEqual({});
    expect(c.torn200).toBe(0);
    expect(c.cutShort).toBe(0);
    expect(Object.keys(c.statuses).sort()).toEqual(['200', '429']);
    expect(c.bad429).toBe(0);
    expect(c.minRetryAfterS).toBeGreaterThanOrEqual(1);
    expect(report.fiveXx).toBe(0);
    // Admitted: at least the slots plus a full queue; the rest were refused.
    expect(c.statuses['200']).toBeGreaterThanOrEqual(2 + BURST_QUEUE_SIZE);
    expect(c.statuses['200']! + c.statuses['429']!).toBe(CI_REQUESTS);

    // /health: p95, not the max. A quiet box gives max ≤ 50 ms for 5,000 requests in 13 runs of
    // 16 (28-61 ms, p95 12-17 ms; docs/performance.md), but the CI suite runs other files beside
    // this one on 2 cores, and a descheduled process misses any millisecond bound at its tail.
    // The report prints p99, max, the worst probes and the idle baseline; bench/burst.ts
    // asserts the max.
    expect(report.health.failures).toBe(0);
    expect(report.health.count).toBeGreaterThan(20);
    expect(report.health.p95).toBeLessThanOrEqual(HEALTH_BOUND_MS);
  });
});
