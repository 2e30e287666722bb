/**
 * The supervisor as a running actor, with its start/stop/probe actors provided as fakes whose
 * promises the tests settle by hand and with XState's SimulatedClock standing in for time.
 * Proves the behaviours callers rely on: one shared first start (and one shared failure),
 * recycling arithmetic, health replacement without `/health` flapping, drain bounds, shutdown,
 * withdrawal, and that no task ever starts on a process that is dead, starting or stopping.
 */
import { afterEach, describe, expect, test } from 'vitest';
import { createActor, fromCallback, SimulatedClock } from 'xstate';
import { CallError } from '../../../src/actors/call.js';
import {
  isHealthy,
  type ProcessSupervisorActor,
  type ProcessSupervisorInput,
  type SupervisorTelemetry,
} from '../../../src/machines/processSupervisor.js';
import {
  restartSupervisor,
  runSupervised,
  SupervisorError,
  startProcessSupervisor,
  stopSupervisor,
  supervisorHealthy,
  supervisorStats,
} from '../../../src/services/supervisorClient.js';
import { type Deferred, deferred, FakeProcess, flush, machineWithFake } from './fixtures.js';

const INTERVAL_MS = 1_000;
const DEADLINE_MS = 100;
const DRAIN_MS = 5_000;

interface Rig {
  readonly fake: FakeProcess;
  readonly clock: SimulatedClock;
  readonly actor: ProcessSupervisorActor;
  readonly health: boolean[];
  readonly telemetry: SupervisorTelemetry[];
}

let rigs: Rig[] = [];

function rig(overrides: Partial<ProcessSupervisorInput> = {}): Rig {
  const fake = new FakeProcess();
  const clock = new SimulatedClock();
  const input: ProcessSupervisorInput = {
    process: fake,
    now: () => clock.now(),
    maxTasks: () => 10,
    healthIntervalMs: INTERVAL_MS,
    healthDeadlineMs: DEADLINE_MS,
    drainTimeoutMs: DRAIN_MS,
    ...overrides,
  };
  const actor = createActor(machineWithFake(fake), { input, clock }) as ProcessSupervisorActor;
  const health: boolean[] = [];
  const telemetry: SupervisorTelemetry[] = [];
  actor.subscribe((s) => health.push(isHealthy(s)));
  actor.on('telemetry', (t) => telemetry.push(t));
  actor.start();
  const made = { fake, clock, actor, health, telemetry };
  rigs.push(made);
  return made;
}

afterEach(() => {
  const made = rigs;
  rigs = [];
  for (const { actor } of made) actor.stop();
  for (const { fake } of made) expect(fake.violations).toEqual([]);
});

/** A task that runs at once on the process it was given and reports its generation. */
function quick(fake: FakeProcess) {
  return async (_process: unknown, lease: { generation: number }) => {
    const incarnation = fake.enter();
    await Promise.resolve();
    fake.leave(incarnation);
    return lease.generation;
  };
}

/** A task the test finishes by hand; it also checks the process it was given is usable. */
function held(fake: FakeProcess) {
  const gate: Deferred<string> = deferred();
  const started: number[] = [];
  const task = async (_process: unknown, lease: { generation: number }) => {
    const incarnation = fake.enter();
    started.push(lease.generation);
    try {
      return await gate.promise;
    } finally {
      fake.leave(incarnation);
    }
  };
  return { gate, started, task };
}

describe('first start', () => {
  test('concurrent first tasks share one start, and all run once it resolves', async () => {
    const { fake, actor } = rig();
    const results = [1, 2, 3].map((n) =>
      runSupervised(actor, async (p, lease) => `${n}@${await quick(fake)(p, lease)}`),
    );
    await flush();
    expect(fake.log).toEqual(['start']);
    expect(supervisorStats(actor)).toMatchObject({ state: 'starting', waiting: 3, healthy: true });
    fake.starts[0].resolve();
    expect(await Promise.all(results)).toEqual(['1@1', '2@1', '3@1']);
    expect(fake.log).toEqual(['start']);
  });

  test('one start failure reaches every waiting task; a later task retries the start', async () => {
    const { fake, actor } = rig();
    const results = [1, 2, 3].map(() => runSupervised(actor, async () => 'ran'));
    await flush();
    fake.starts[0].reject(new Error('no threads'));
    const outcomes = await Promise.allSettled(results);
    for (const outcome of outcomes) {
      expect(outcome.status).toBe('rejected');
      const error = (outcome as PromiseRejectedResult).reason as SupervisorError;
      expect(error).toBeInstanceOf(SupervisorError);
      expect(error.code).toBe('ERR_SUPERVISOR_START_FAILED');
    }
    expect(supervisorStats(actor)).toMatchObject({ state: 'failed', healthy: false });
    expect(supervisorHealthy(actor)).toBe(false);

    const retry = runSupervised(actor, async (_p, lease) => lease.generation);
    await flush();
    expect(fake.log).toEqual(['start', 'stop(force)']); // leftovers of the failed start go first
    fake.stops[0].resolve();
    await flush();
    fake.starts[1].resolve();
    expect(await retry).toBe(1);
    expect(supervisorStats(actor)).toMatchObject({ state: 'running', restarts: 0, healthy: true });
  });

  test('a task that asks after a shutdown began, mid-retry, is refused when the stop ends', async () => {
    // Found by the property test: [acquire, start fails, acquire, shutdown, acquire].
    const { fake, actor } = rig();
    const first = runSupervised(actor, async () => 'ran');
    await flush();
    fake.starts[0].reject(new Error('no threads'));
    await expect(first).rejects.toMatchObject({ code: 'ERR_SUPERVISOR_START_FAILED' });
    const retry = runSupervised(actor, async () => 'ran'); // failed -> restarting.stoppingOld
    await flush();
    const stopped = stopSupervisor(actor, { timeoutMs: Number.POSITIVE_INFINITY });
    await expect(retry).rejects.toMatchObject({ code: 'ERR_SUPERVISOR_STOPPING' });
    const late = runSupervised(actor, async () => 'ran'); // joins waiters after the request
    await flush();
    fake.stops[0].resolve(); // the old incarnation is gone: straight to `stopped`
    await expect(late).rejects.toMatchObject({ code: 'ERR_SUPERVISOR_STOPPING' });
    expect(await stopped).toMatchObject({ type: 'stopped' });
    expect(supervisorStats(actor)).toMatchObject({ state: 'stopped', waiting: 0 });
  });

  test('a task withdrawn while the start is pending is forgotten', async () => {
    const { fake, actor } = rig();
    const abort = new AbortController();
    const gone = runSupervised(actor, async () => 'never', { signal: abort.signal });
    const stays = runSupervised(actor, async () => 'ran');
    await flush();
    abort.abort();
    await expect(gone).rejects.toMatchObject({ code: 'ERR_CALL_ABORTED' });
    expect(supervisorStats(actor).waiting).toBe(1);
    fake.starts[0].resolve();
    expect(await stays).toBe('ran');
    await flush();
    expect(supervisorStats(actor)).toMatchObject({ running: 0, tasksSinceStart: 1 });
  });

  test('replies reach a machine caller through replyTo', async () => {
    const { fake, actor } = rig();
    const got: unknown[] = [];
    const caller = createActor(
      fromCallback(({ receive }) => {
        receive((event) => got.push(event));
      }),
    ).start();
    actor.send({ type: 'acquire', callId: 991, replyTo: caller });
    await flush();
    fake.starts[0].resolve();
    await flush();
    expect(got).toEqual([
      { type: 'reply', callId: 991, payload: { type: 'ready', generation: 1, process: fake } },
    ]);
    caller.stop();
  });
});

describe('recycling', () => {
  async function runMany(total: number, limit: number, lanes: number) {
    const r = rig({ maxTasks: () => limit });
    r.fake.auto = true;
    const perGeneration = new Map<number, number>();
    let issued = 0;
    const lane = async () => {
      while (issued < total) {
        issued += 1;
        await runSupervised(r.actor, async (p, lease) => {
          perGeneration.set(lease.generation, (perGeneration.get(lease.generation) ?? 0) + 1);
          await quick(r.fake)(p, lease);
        });
      }
    };
    await Promise.all(Array.from({ length: lanes }, lane));
    await flush();
    return { ...r, perGeneration };
  }

  // Eager recycle: the task that reaches the budget is the last one the process admits, and
  // draining starts at once, so N tasks with budget L cause floor(N / L) restarts.
  test.each([
    [100, 7, 14],
    [98, 7, 14],
    [97, 7, 13],
    [7, 7, 1],
    [6, 7, 0],
  ])(
    '%i tasks with a budget of %i → %i restarts, no generation over budget',
    async (total, limit, restarts) => {
      const { actor, perGeneration, fake } = await runMany(total, limit, 3);
      expect(supervisorStats(actor)).toMatchObject({
        state: 'running',
        restarts,
        generation: restarts + 1,
        running: 0,
        waiting: 0,
        lastRestartReason: restarts > 0 ? 'max_tasks' : null,
      });
      expect([...perGeneration.values()].reduce((a, b) => a + b, 0)).toBe(total);
      expect(Math.max(...perGeneration.values())).toBeLessThanOrEqual(limit);
      expect(fake.log.filter((op) => op === 'stop')).toHaveLength(restarts); // all graceful
    },
  );

  test('while draining, new tasks wait in order and are released on the new process', async () => {
    const { fake, actor, telemetry } = rig({ maxTasks: () => 2 });
    const a = held(fake);
    const b = held(fake);
    const first = runSupervised(actor, a.task);
    const second = runSupervised(actor, b.task);
    await flush();
    fake.starts[0].resolve();
    await flush();
    expect(supervisorStats(actor).state).toBe('draining');
    const order: string[] = [];
    const waiting = ['x', 'y', 'z'].map((name) =>
      runSupervised(actor, async (p, lease) => {
        order.push(`${name}@${await quick(fake)(p, lease)}`);
      }),
    );
    await flush();
    expect(supervisorStats(actor)).toMatchObject({ running: 2, waiting: 3, healthy: true });
    a.gate.resolve('a');
    await flush();
    expect(fake.log).toEqual(['start']); // the old process stays until its last task ends
    b.gate.resolve('b');
    await flush();
    expect(fake.log).toEqual(['start', 'stop']);
    fake.stops[0].resolve();
    await flush();
    fake.starts[1].resolve();
    await flush();
    // x and y fill generation 2's budget of 2, so z waits for the next recycle.
    expect(order).toEqual(['x@2', 'y@2']);
    fake.stops[1].resolve();
    await flush();
    fake.starts[2].resolve();
    await Promise.all([first, second, ...waiting]);
    expect(order).toEqual(['x@2', 'y@2', 'z@3']);
    expect(telemetry.filter((t) => t.to === 'restarting.startingNew')).toHaveLength(2);
  });

  test('manual restart drains and replaces the process', async () => {
    const { fake, actor } = rig();
    fake.auto = true;
    await runSupervised(actor, quick(fake));
    expect(await restartSupervisor(actor)).toBe(true);
    await flush();
    expect(supervisorStats(actor)).toMatchObject({
      state: 'running',
      generation: 2,
      restarts: 1,
      lastRestartReason: 'manual',
    });
  });
});

describe('health', () => {
  test('a failed probe replaces the process while health stays true throughout', async () => {
    const { fake, actor, clock, health } = rig();
    const long = held(fake);
    const first = runSupervised(actor, long.task);
    await flush();
    fake.starts[0].resolve();
    await flush();
    clock.increment(INTERVAL_MS);
    expect(fake.log).toEqual(['start', `healthy(${DEADLINE_MS})`]);
    fake.probes[0].resolve(false);
    await flush();
    expect(supervisorStats(actor)).toMatchObject({
      state: 'draining',
      lastRestartReason: 'unhealthy',
      healthy: true,
    });
    const next = runSupervised(actor, quick(fake));
    await flush();
    long.gate.resolve('done');
    await first;
    await flush();
    fake.stops[0].resolve();
    await flush();
    fake.starts[1].resolve();
    expect(await next).toBe(2);
    expect(health.length).toBeGreaterThan(5);
    expect(health.every(Boolean)).toBe(true);
    expect(supervisorStats(actor)).toMatchObject({ restarts: 1, generation: 2, healthy: true });
  });

  test('a probe that never answers is judged by its deadline', async () => {
    const { fake, actor, clock } = rig();
    fake.auto = true;
    await runSupervised(actor, quick(fake));
    fake.auto = false;
    clock.increment(INTERVAL_MS);
    expect(supervisorStats(actor).state).toBe('running');
    clock.increment(DEADLINE_MS);
    await flush();
    expect(supervisorStats(actor)).toMatchObject({ lastRestartReason: 'unhealthy' });
    expect(fake.log.at(-1)).toBe('stop(force)'); // a graceful stop would wait on the stuck worker
  });

  test('healthy probes keep the process and re-arm the interval', async () => {
    const { fake, actor, clock } = rig();
    fake.auto = true;
    await runSupervised(actor, quick(fake));
    for (let i = 0; i < 3; i++) {
      clock.increment(INTERVAL_MS);
      await flush();
    }
    expect(fake.log.filter((op) => op.startsWith('healthy'))).toHaveLength(3);
    expect(supervisorStats(actor)).toMatchObject({ state: 'running', generation: 1 });
  });

  test('a task that faults makes the next task wait for a probe, which replaces a dead process', async () => {
    const { fake, actor } = rig();
    fake.auto = true;
    await expect(
      runSupervised(actor, async () => {
        fake.leave(fake.enter());
        throw new Error('worker died');
      }),
    ).rejects.toThrow('worker died');
    fake.auto = false;
    const next = runSupervised(actor, quick(fake));
    await flush();
    expect(fake.log.at(-1)).toBe(`healthy(${DEADLINE_MS})`);
    fake.probes[0].resolve(false);
    await flush();
    fake.stops[0].resolve();
    await flush();
    fake.starts[1].resolve();
    expect(await next).toBe(2);
  });

  test('errors the caller says are not process faults cost no probe', async () => {
    const { fake, actor } = rig();
    fake.auto = true;
    await expect(
      runSupervised(
        actor,
        async () => {
          fake.leave(fake.enter());
          throw new Error('undecodable input');
        },
        { isProcessFault: () => false },
      ),
    ).rejects.toThrow('undecodable');
    await runSupervised(actor, quick(fake));
    expect(fake.log.some((op) => op.startsWith('healthy'))).toBe(false);
  });
});

describe('drain bound', () => {
  test('tasks still running at the drain bound are abandoned, and the old process is force-stopped', async () => {
    const { fake, actor, clock, telemetry } = rig();
    const stuck = held(fake);
    const doomed = runSupervised(actor, stuck.task);
    await flush();
    fake.starts[0].resolve();
    await flush();
    clock.increment(INTERVAL_MS);
    fake.probes[0].resolve(false);
    await flush();
    fake.inTick = true;
    clock.increment(DRAIN_MS);
    fake.inTick = false;
    expect(fake.log.at(-1)).toBe('stop(force)');
    expect(telemetry.at(-1)).toMatchObject({ to: 'restarting.stoppingOld', abandoned: 1 });
    fake.stops[0].resolve();
    await flush();
    fake.starts[1].resolve();
    await flush();
    const fresh = held(fake);
    const later = runSupervised(actor, fresh.task);
    await flush();
    expect(supervisorStats(actor)).toMatchObject({ generation: 2, running: 1 });
    // The abandoned task ends late: its taskDone names generation 1 and frees nothing of 2.
    stuck.gate.reject(new Error('process killed'));
    await expect(doomed).rejects.toThrow('process killed');
    await flush();
    expect(supervisorStats(actor)).toMatchObject({ generation: 2, running: 1 });
    fresh.gate.resolve('ok');
    expect(await later).toBe('ok');
  });
});

describe('shutdown', () => {
  test('stop refuses new tasks, fails waiters, drains running ones, then kills and replies', async () => {
    const { fake, actor } = rig();
    const running = held(fake);
    const first = runSupervised(actor, running.task);
    await flush();
    fake.starts[0].resolve();
    await flush();
    const stopped = stopSupervisor(actor);
    await flush();
    expect(supervisorStats(actor).state).toBe('stopping');
    await expect(runSupervised(actor, async () => 'late')).rejects.toMatchObject({
      code: 'ERR_SUPERVISOR_STOPPING',
    });
    expect(fake.log).toEqual(['start']);
    running.gate.resolve('finished');
    expect(await first).toBe('finished');
    await flush();
    expect(fake.log).toEqual(['start', 'stop(force)']);
    fake.stops[0].resolve();
    expect(await stopped).toEqual({ type: 'stopped', abandoned: 0, stopFailed: false });
    expect(fake.alive).toBe(false);
    expect(supervisorStats(actor).state).toBe('stopped');
  });

  test('shutdown drain bound: what is left is abandoned and killed', async () => {
    const { fake, actor, clock } = rig();
    const stuck = held(fake);
    const doomed = runSupervised(actor, stuck.task);
    await flush();
    fake.starts[0].resolve();
    await flush();
    const stopped = stopSupervisor(actor, { drainTimeoutMs: 50 });
    await flush();
    fake.inTick = true;
    clock.increment(50);
    fake.inTick = false;
    expect(fake.log.at(-1)).toBe('stop(force)');
    fake.stops[0].resolve();
    expect(await stopped).toEqual({ type: 'stopped', abandoned: 1, stopFailed: false });
    stuck.gate.reject(new Error('killed'));
    await expect(doomed).rejects.toThrow('killed');
  });

  test('stop during the first start waits for it, then stops what it produced', async () => {
    const { fake, actor } = rig();
    const waiting = runSupervised(actor, async () => 'never');
    await flush();
    const stopped = stopSupervisor(actor);
    await expect(waiting).rejects.toMatchObject({ code: 'ERR_SUPERVISOR_STOPPING' });
    expect(fake.log).toEqual(['start']); // no stop racing the start
    fake.starts[0].resolve();
    await flush();
    expect(fake.log).toEqual(['start', 'stop(force)']);
    fake.stops[0].resolve();
    expect(await stopped).toMatchObject({ type: 'stopped' });
    expect(fake.alive).toBe(false);
  });

  test('a supervisor that never started stops without touching the process', async () => {
    const { fake, actor } = rig();
    expect(await stopSupervisor(actor)).toEqual({
      type: 'stopped',
      abandoned: 0,
      stopFailed: false,
    });
    expect(fake.log).toEqual([]);
  });
});

describe('boundary', () => {
  test('bad options throw at once, naming the option', () => {
    const process = new FakeProcess();
    expect(() => startProcessSupervisor({ process: {} as FakeProcess })).toThrow(TypeError);
    expect(() => startProcessSupervisor({ process, maxTasks: () => -1 })).toThrow(
      /maxTasks\(\) must return an integer/,
    );
    expect(() => startProcessSupervisor({ process, healthIntervalMs: 0 })).toThrow(RangeError);
    expect(() => startProcessSupervisor({ process, healthDeadlineMs: 1.5 })).toThrow(
      /healthDeadlineMs/,
    );
    expect(() => startProcessSupervisor({ process, drainTimeoutMs: -1 })).toThrow(RangeError);
  });

  test('startProcessSupervisor starts lazily: nothing runs until a task', async () => {
    const process = new FakeProcess();
    const actor = startProcessSupervisor({ process });
    await flush();
    expect(process.log).toEqual([]);
    expect(supervisorStats(actor).state).toBe('notStarted');
    expect(supervisorHealthy(actor)).toBe(true);
    actor.stop();
  });

  test('an acquire that times out withdraws itself', async () => {
    const { fake, actor } = rig();
    await expect(
      runSupervised(actor, async () => 'never', { acquireTimeoutMs: 1 }),
    ).rejects.toBeInstanceOf(CallError);
    expect(supervisorStats(actor).waiting).toBe(0);
    fake.starts[0].resolve();
    await flush();
    expect(supervisorStats(actor)).toMatchObject({ state: 'running', running: 0 });
  });
});
