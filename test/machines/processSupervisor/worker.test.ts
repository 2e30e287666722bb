/**
 * The supervisor owning a real process: one `worker_threads` Worker answering echoes, started,
 * probed and terminated for real (only the supervisor's own timers run on a SimulatedClock).
 * Proves that 100 tasks under a recycle budget of 7 all succeed with floor(100 / 7) restarts
 * and never two threads alive at once; that a thread killed mid-task fails only that task and
 * the next one is served by a replacement; that a wedged thread is replaced while health stays
 * true; and that after every test no thread is left alive.
 */
import { afterEach, expect, test } from 'vitest';
import { SimulatedClock } from 'xstate';
import {
  isHealthy,
  type ProcessSupervisorActor,
  type SupervisorStats,
} from '../../../src/machines/processSupervisor.js';
import {
  runSupervised,
  startProcessSupervisor,
  stopSupervisor,
  supervisorStats,
} from '../../../src/services/supervisorClient.js';
import { EchoWorkerProcess, WorkerGoneError } from './fixtures.js';

const INTERVAL_MS = 1_000;
const PROBE_DEADLINE_MS = 200; // real time: an idle worker answers in well under 1 ms

let owned: Array<{ actor: ProcessSupervisorActor; process: EchoWorkerProcess }> = [];

function supervise(maxTasks: number) {
  const process = new EchoWorkerProcess();
  const clock = new SimulatedClock();
  const actor = startProcessSupervisor(
    {
      process,
      maxTasks: () => maxTasks,
      now: () => clock.now(),
      healthIntervalMs: INTERVAL_MS,
      healthDeadlineMs: PROBE_DEADLINE_MS,
      drainTimeoutMs: 5_000,
    },
    { clock },
  );
  const health: boolean[] = [];
  actor.subscribe((s) => health.push(isHealthy(s)));
  owned.push({ actor, process });
  return { process, clock, actor, health };
}

/** Resolves once the supervisor's stats satisfy `ok` (it is driven by real worker events). */
function until(actor: ProcessSupervisorActor, ok: (stats: SupervisorStats) => boolean) {
  return new Promise<void>((resolve) => {
    const check = () => {
      if (ok(supervisorStats(actor))) {
        sub.unsubscribe();
        resolve();
      }
    };
    const sub = actor.subscribe(check);
    check();
  });
}

afterEach(async () => {
  const all = owned;
  owned = [];
  for (const { actor, process } of all) {
    await stopSupervisor(actor, { drainTimeoutMs: 0 });
    actor.stop();
    expect(process.alive).toBe(0); // no thread outlives its test
    expect(process.violations).toEqual([]);
  }
});

test('100 echoes with a recycle budget of 7: all succeed, floor(100/7) = 14 restarts, one thread at a time', async () => {
  const { process, actor, health } = supervise(7);
  const lanes = 4;
  let next = 0;
  const results: number[] = [];
  await Promise.all(
    Array.from({ length: lanes }, async () => {
      while (next < 100) {
        const value = next++;
        results.push(await runSupervised<number, EchoWorkerProcess>(actor, (p) => p.echo(value)));
      }
    }),
  );
  expect(results.sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, i) => i));
  expect(supervisorStats(actor)).toMatchObject({
    state: 'running',
    restarts: 14,
    generation: 15,
    lastRestartReason: 'max_tasks',
    healthy: true,
  });
  expect(process.created).toBe(15);
  expect(process.maxAlive).toBe(1);
  expect(process.served.slice(0, 14).every((n) => n === 7)).toBe(true);
  expect(process.served[14]).toBe(2);
  expect(health.every(Boolean)).toBe(true);
});

test('a thread killed mid-task fails that task; the next task is served by a replacement', async () => {
  const { process, actor, health } = supervise(0);
  expect(await runSupervised<string, EchoWorkerProcess>(actor, (p) => p.echo('warm'))).toBe('warm');
  const release = process.wedge(); // the next echo cannot be answered...
  const victim = runSupervised<string, EchoWorkerProcess>(actor, (p) => p.echo('victim'));
  await new Promise((resolve) => setImmediate(resolve));
  await process.crash(); // ...and the thread dies under it
  release();
  await expect(victim).rejects.toBeInstanceOf(WorkerGoneError);
  // The failed task reported a fault: the next one waits for a probe, which finds the thread
  // dead, and runs on a fresh one.
  expect(await runSupervised<string, EchoWorkerProcess>(actor, (p) => p.echo('after'))).toBe(
    'after',
  );
  expect(supervisorStats(actor)).toMatchObject({
    generation: 2,
    restarts: 1,
    lastRestartReason: 'unhealthy',
  });
  expect(process.maxAlive).toBe(1);
  expect(health.every(Boolean)).toBe(true);
});

test('a wedged thread fails its probe and is replaced while health stays true', async () => {
  const { process, actor, clock, health } = supervise(0);
  expect(await runSupervised<number, EchoWorkerProcess>(actor, (p) => p.echo(1))).toBe(1);
  const release = process.wedge();
  clock.increment(INTERVAL_MS); // the periodic probe: a real echo with a real deadline
  // probing → draining → restarting → running on a new thread, driven by the real deadline
  await until(actor, (s) => s.state === 'running' && s.generation === 2);
  release();
  expect(supervisorStats(actor)).toMatchObject({
    generation: 2,
    restarts: 1,
    lastRestartReason: 'unhealthy',
  });
  expect(await runSupervised<number, EchoWorkerProcess>(actor, (p) => p.echo(2))).toBe(2);
  expect(process.created).toBe(2);
  expect(process.maxAlive).toBe(1);
  expect(health.every(Boolean)).toBe(true);
});
