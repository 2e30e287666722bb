// Proves, over a few seconds of a steady stream of `low` background renders, a thinner `normal`
// stream and bursts of interactive HTTP requests (all through one semaphore, one render pool,
// real ffmpeg), that interactive waits stay within one render duration of the same bursts on an
// idle system, that displacement takes `low` before `normal` and never an interactive request,
// and that nothing is lost: every request ends 200 or was told `queue_full`/displaced.
import { basename } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stats } from '../../src/services/semaphoreClient.js';
import {
  closeLeavingNothing,
  type Harness,
  startHarness,
  waitFor,
} from '../integration/harness.js';
import {
  backgroundService,
  type ClassesPlan,
  type ClassesSystem,
  calibrate,
  type PhaseFigures,
  percentile,
  planFor,
  runPhase,
} from './classesLoad.js';

const BURSTS = 3;
const CAPACITY = 2;
let PLAN: ClassesPlan;

let h: Harness;
let system: ClassesSystem;
let services: ReturnType<typeof makeServices>;
let idle: PhaseFigures;
let loaded: PhaseFigures;

function makeServices() {
  return { low: backgroundService(system, 'low'), normal: backgroundService(system, 'normal') };
}

beforeAll(async () => {
  h = await startHarness({ AP_MAX_CONCURRENCY: String(CAPACITY), AP_QUEUE_SIZE: '6' });
  system = {
    url: h.url,
    semaphore: h.proxy.actors.semaphore,
    config: h.config,
    renderPool: h.proxy.pools.render,
    ffmpegPath: h.proxy.ffmpeg.path,
    sourcePath: h.fixtures.stereoWav,
    sourceName: basename(h.fixtures.stereoWav),
  };
  services = makeServices();
  // warm the pools, then time one render: the plan is scaled to this machine's render time
  await calibrate(system);
  PLAN = planFor(await calibrate(system, CAPACITY), CAPACITY, BURSTS);
}, 60_000);

afterAll(async () => {
  await h?.close();
});

describe('admission classes under load', () => {
  it('idle baseline: interactive bursts alone all render', async () => {
    idle = await runPhase(system, PLAN, services, false);
    expect(idle.interactive).toEqual({ 200: PLAN.bursts * PLAN.burstSize });
    expect(idle.lost).toBe(0);
  });

  it('loaded: low displaced first, interactive waits within one render of idle, nothing lost', async () => {
    loaded = await runPhase(system, PLAN, services, true);
    // One render as this machine runs them under this load: the longest a slot that an interactive
    // arrival finds busy can stay busy (running renders are never pre-empted).
    const render = percentile(loaded.holds, 99);
    const idleP99 = percentile(idle.waits.interactive, 99);
    const loadP99 = percentile(loaded.waits.interactive, 99);
    console.info(
      `render ${render.toFixed(0)} ms; interactive p99 wait idle ${idleP99.toFixed(0)} ms, loaded ${loadP99.toFixed(0)} ms; ` +
        `low p50 ${percentile(loaded.waits.low, 50).toFixed(0)} ms; background ${JSON.stringify(loaded.background)}; displaced ${JSON.stringify(loaded.displaced)}`,
    );
    expect(loaded.lost).toBe(0);
    expect(loaded.interactive).toEqual({ 200: PLAN.bursts * PLAN.burstSize });
    // the background streams really competed: some done, some displaced, all low-first
    expect(loaded.background.done ?? 0).toBeGreaterThan(0);
    expect(loaded.displaced.low ?? 0).toBeGreaterThan(0);
    expect(loaded.displaced.interactive ?? 0).toBe(0);
    expect(loaded.normalBeforeLow).toBe(0);
    expect(loaded.waits.interactive.length).toBe(PLAN.bursts * PLAN.burstSize);
    expect(loadP99).toBeLessThanOrEqual(idleP99 + render);
  });

  it('drains: no slot, no waiter, no coordinator, no ffmpeg left', async () => {
    await waitFor(async () => {
      const s = await stats(h.proxy.actors.semaphore);
      return s.held === 0 && s.queued === 0;
    });
    await waitFor(() => services.low.live + services.normal.live + h.proxy.renders.live === 0);
    await closeLeavingNothing(h);
  });
});
