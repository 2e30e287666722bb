/**
 * The chaos run, CI size: 300 seeded requests through a real proxy over real and fake ffmpeg
 * (crash, hang, garbage, deaf to SIGTERM, slow drip), hanging ffprobe, client aborts before the
 * first byte and mid-stream, worker threads killed mid-task, small render/probe deadlines and a
 * file store that refuses a quarter of its commits. Proves nothing is left (slots, coordinators,
 * processes, staging files, unhandled rejections) and every answer is one the contract allows.
 */
import { describe, expect, it } from 'vitest';
import { formatChaos, runChaos } from './chaos.js';

/** Requests in the CI run: every fault kind several times over, a minute or two on 2 cores. */
const CI_REQUESTS = 300;
/** Client requests in flight: five times the render slots, so the queue fills and overflows. */
const CI_CONCURRENCY = 16;
/** Mean gap between worker kills: several kills within a run of 20-90 s. */
const CI_KILL_MEAN_MS = 2_000;

describe('chaos (CI size)', () => {
  it(`${CI_REQUESTS} requests under faults leave nothing behind and break no answer`, {
    timeout: 300_000,
  }, async () => {
    const report = await runChaos({
      requests: CI_REQUESTS,
      concurrency: CI_CONCURRENCY,
      seed: 8,
      workerKillMeanMs: CI_KILL_MEAN_MS,
    });
    console.log(formatChaos(report));

    expect(report.violations).toEqual([]);
    const sum = Object.values(report.outcomes).reduce((a, b) => a + b, 0);
    expect(sum).toBe(CI_REQUESTS);
    // The run exercised what it claims to: success, tearing, table answers and client aborts.
    expect(report.outcomes.whole ?? 0).toBeGreaterThan(0);
    expect(report.outcomes.torn ?? 0).toBeGreaterThan(0);
    expect(report.outcomes.table ?? 0).toBeGreaterThan(0);
    expect(report.outcomes['client-abort'] ?? 0).toBeGreaterThan(0);
    expect(report.faults.abortsBeforeFirstByte).toBeGreaterThan(0);
    expect(report.faults.abortsMidStream).toBeGreaterThan(0);
    expect(report.faults.storeWriteFailures).toBeGreaterThan(0);
    expect(report.faults.renderWorkerKills + report.faults.probeWorkerKills).toBeGreaterThan(0);
    const answers = Object.values(report.byVariant).flatMap((m) => Object.keys(m));
    expect(answers).toEqual(expect.arrayContaining(['504 render_timeout', '504 probe_timeout']));

    const l = report.leaks;
    expect({
      semaphoreHeld: l.semaphoreHeld,
      semaphoreQueued: l.semaphoreQueued,
      probeHeld: l.probeHeld,
      renderCoordinators: l.renderCoordinators,
      renderCoordinatorsAlive: l.renderCoordinatorsAlive,
      probeCoordinators: l.probeCoordinators,
      livePids: l.livePids,
      liveDescendants: l.liveDescendants,
      staging: l.staging,
      unhandledRejections: l.unhandledRejections,
      livePidsAfterClose: report.livePidsAfterClose,
    }).toEqual({
      semaphoreHeld: 0,
      semaphoreQueued: 0,
      probeHeld: 0,
      renderCoordinators: 0,
      renderCoordinatorsAlive: 0,
      probeCoordinators: 0,
      livePids: [],
      liveDescendants: [],
      staging: [],
      unhandledRejections: 0,
      livePidsAfterClose: [],
    });
  });
});
