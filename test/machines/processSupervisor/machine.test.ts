/**
 * Chart tests for the process supervisor: every transition of the chart, driven by pure
 * `transition()` calls, asserting the next state, the context, the replies and the I/O the
 * machine plans (invoked actors and their input) without executing any of it. The process
 * handed in records every call, and the last test proves none was made.
 */
import { describe, expect, test } from 'vitest';
import { type EventFromLogic, initialTransition, transition } from 'xstate';
import {
  DEFAULT_MAX_TASKS,
  DRAIN_TIMEOUT_MS,
  HEALTH_DEADLINE_MS,
  HEALTH_INTERVAL_MS,
  isHealthy,
  processSupervisorMachine as machine,
  type ProcessSupervisorSnapshot,
  statsOf,
} from '../../../src/machines/processSupervisor.js';
import { FakeProcess } from './fixtures.js';

type Ev = EventFromLogic<typeof machine>;
/** A planned action as `transition()` returns it (emit, spawnChild, stopChild, ...). */
type Planned = ReadonlyArray<{ readonly type: string; readonly params?: unknown }>;

const INTERVAL_MS = 1_000;
const DEADLINE_MS = 100;
const DRAIN_MS = 5_000;

const fake = new FakeProcess();
let nowMs = 0;
let limit = 3;

function boot(): ProcessSupervisorSnapshot {
  nowMs = 0;
  limit = 3;
  return initialTransition(machine, {
    process: fake,
    now: () => nowMs,
    maxTasks: () => limit,
    healthIntervalMs: INTERVAL_MS,
    healthDeadlineMs: DEADLINE_MS,
    drainTimeoutMs: DRAIN_MS,
  })[0];
}

function send(s: ProcessSupervisorSnapshot, event: object) {
  const [next, actions] = transition(machine, s, event as Ev);
  return { s: next, actions: actions as unknown as Planned };
}

const done = (id: string, output?: unknown) => ({
  type: `xstate.done.actor.${id}`,
  output,
  actorId: id,
});
const error = (id: string) => ({
  type: `xstate.error.actor.${id}`,
  error: new Error(`${id} broke`),
  actorId: id,
});
const after = (delay: string, state: string) => ({
  type: `xstate.after.${delay}.processSupervisor.${state}`,
});

function emitted(actions: Planned, type: string): any[] {
  return actions
    .filter((a) => a.type === 'xstate.emit')
    .map((a) => (a.params as { event: { type: string } }).event)
    .filter((e) => e.type === type);
}
const replies = (actions: Planned) => emitted(actions, 'reply');
const spawned = (actions: Planned) =>
  actions
    .filter((a) => a.type === 'xstate.spawnChild')
    .map((a) => {
      const p = a.params as { src: string; input?: Record<string, unknown> };
      const { process: _process, ...rest } = p.input ?? {};
      return { src: p.src, ...rest };
    });

/** notStarted → starting → running with task ids `ids` admitted on generation 1. */
function running(ids: number[] = [1]): ProcessSupervisorSnapshot {
  let s = send(boot(), { type: 'acquire', callId: ids[0] }).s;
  s = send(s, done('start')).s;
  for (const id of ids.slice(1)) s = send(s, { type: 'acquire', callId: id }).s;
  return s;
}

/** running with task 1, then the periodic probe is in flight. */
function probing(): ProcessSupervisorSnapshot {
  return send(running([1]), after('healthInterval', 'running.serving')).s;
}

/** draining because the probe said unhealthy, with tasks `ids` still running. */
function drainingUnhealthy(ids: number[] = [1]): ProcessSupervisorSnapshot {
  let s = running(ids);
  s = send(s, after('healthInterval', 'running.serving')).s;
  return send(s, done('probe', false)).s;
}

/** draining after a manual restart, with tasks `ids` still running. */
function drainingManual(ids: number[] = [1]): ProcessSupervisorSnapshot {
  return send(running(ids), { type: 'restart' }).s;
}

/** restarting.stoppingOld (graceful) after a drained manual restart, with waiter 9 queued. */
function stoppingOld(): ProcessSupervisorSnapshot {
  let s = drainingManual([1]);
  s = send(s, { type: 'acquire', callId: 9 }).s;
  return send(s, { type: 'taskDone', taskId: 1, generation: 1 }).s;
}

describe('notStarted', () => {
  test('starts with defaults documented as constants, and reports healthy', () => {
    const [s] = initialTransition(machine, { process: fake });
    expect(s.value).toBe('notStarted');
    expect(s.context.healthIntervalMs).toBe(HEALTH_INTERVAL_MS);
    expect(s.context.healthDeadlineMs).toBe(HEALTH_DEADLINE_MS);
    expect(s.context.drainTimeoutMs).toBe(DRAIN_TIMEOUT_MS);
    expect(s.context.maxTasks()).toBe(DEFAULT_MAX_TASKS);
    expect(statsOf(s)).toEqual({
      state: 'notStarted',
      generation: 0,
      restarts: 0,
      tasksSinceStart: 0,
      running: 0,
      waiting: 0,
      lastRestartReason: null,
      healthy: true,
    });
  });

  test('acquire → starting: the task waits and the start is invoked (lazy first start)', () => {
    const { s, actions } = send(boot(), { type: 'acquire', callId: 1 });
    expect(s.value).toBe('starting');
    expect(s.context.waiters.map((w) => w.callId)).toEqual([1]);
    expect(spawned(actions)).toEqual([{ src: 'startProcess' }]);
    expect(replies(actions)).toEqual([]);
    expect(isHealthy(s)).toBe(true);
  });

  test('an acquire without a task id is ignored (nothing to answer, nothing to count)', () => {
    const { s, actions } = send(boot(), { type: 'acquire' });
    expect(s.value).toBe('notStarted');
    expect(actions).toEqual([]);
  });

  test('restart is declined: there is nothing to restart', () => {
    const { s, actions } = send(boot(), { type: 'restart', callId: 5 });
    expect(s.value).toBe('notStarted');
    expect(replies(actions)).toEqual([
      { type: 'reply', callId: 5, payload: { type: 'restart', accepted: false } },
    ]);
  });

  test('stop → stopped at once, with no process to stop', () => {
    const { s, actions } = send(boot(), { type: 'stop', callId: 6 });
    expect(s.value).toBe('stopped');
    expect(spawned(actions)).toEqual([]);
    expect(replies(actions)).toEqual([
      { type: 'reply', callId: 6, payload: { type: 'stopped', abandoned: 0, stopFailed: false } },
    ]);
  });
});

describe('starting', () => {
  test('concurrent acquires join the one start in arrival order', () => {
    let s = send(boot(), { type: 'acquire', callId: 1 }).s;
    const second = send(s, { type: 'acquire', callId: 2 });
    s = send(second.s, { type: 'acquire', callId: 3 }).s;
    expect(spawned(second.actions)).toEqual([]);
    expect(s.value).toBe('starting');
    expect(s.context.waiters.map((w) => w.callId)).toEqual([1, 2, 3]);
  });

  test('start done → running: generation 1, every waiter is answered ready in order', () => {
    let s = send(boot(), { type: 'acquire', callId: 1 }).s;
    s = send(s, { type: 'acquire', callId: 2 }).s;
    nowMs = 40;
    const { s: next, actions } = send(s, done('start'));
    expect(next.value).toEqual({ running: 'serving' });
    expect(next.context.generation).toBe(1);
    expect(next.context.restarts).toBe(0);
    expect(next.context.active).toEqual([1, 2]);
    expect(next.context.lastHealthyAt).toBe(40);
    expect(replies(actions)).toEqual([
      { type: 'reply', callId: 1, payload: { type: 'ready', generation: 1, process: fake } },
      { type: 'reply', callId: 2, payload: { type: 'ready', generation: 1, process: fake } },
    ]);
  });

  test('start done with more waiters than the budget: the budget runs, the rest wait for the recycle', () => {
    let s = send(boot(), { type: 'acquire', callId: 1 }).s;
    for (const id of [2, 3, 4, 5]) s = send(s, { type: 'acquire', callId: id }).s;
    const { s: next, actions } = send(s, done('start'));
    expect(next.value).toBe('draining');
    expect(next.context.active).toEqual([1, 2, 3]);
    expect(next.context.waiters.map((w) => w.callId)).toEqual([4, 5]);
    expect(next.context.lastRestartReason).toBe('max_tasks');
    expect(replies(actions).map((r) => r.callId)).toEqual([1, 2, 3]);
  });

  test('start error → failed: the failure reaches every waiter, and health turns false', () => {
    let s = send(boot(), { type: 'acquire', callId: 1 }).s;
    s = send(s, { type: 'acquire', callId: 2 }).s;
    const { s: next, actions } = send(s, error('start'));
    expect(next.value).toBe('failed');
    expect(next.context.waiters).toEqual([]);
    expect(replies(actions)).toEqual([
      { type: 'reply', callId: 1, payload: { type: 'failed', reason: 'start_failed' } },
      { type: 'reply', callId: 2, payload: { type: 'failed', reason: 'start_failed' } },
    ]);
    expect(isHealthy(next)).toBe(false);
    expect(statsOf(next).healthy).toBe(false);
  });

  test('restart while starting is declined (one start at a time)', () => {
    const s = send(boot(), { type: 'acquire', callId: 1 }).s;
    const { s: next, actions } = send(s, { type: 'restart', callId: 7 });
    expect(next.value).toBe('starting');
    expect(replies(actions)[0].payload).toEqual({ type: 'restart', accepted: false });
  });

  test('stop while starting: waiters fail now, the start is left to settle', () => {
    const s = send(boot(), { type: 'acquire', callId: 1 }).s;
    const { s: next, actions } = send(s, { type: 'stop', callId: 8 });
    expect(next.value).toBe('starting');
    expect(next.context.stopRequested).toBe(true);
    expect(replies(actions)).toEqual([
      { type: 'reply', callId: 1, payload: { type: 'failed', reason: 'stopping' } },
    ]);
    const settled = send(next, done('start'));
    expect(settled.s.value).toEqual({ stopping: 'killing' });
    expect(spawned(settled.actions)).toEqual([{ src: 'stopProcess', force: true }]);
  });

  test('stop while starting, then the start fails: the half-started process is still stopped', () => {
    let s = send(boot(), { type: 'acquire', callId: 1 }).s;
    s = send(s, { type: 'stop' }).s;
    const { s: next, actions } = send(s, error('start'));
    expect(next.value).toEqual({ stopping: 'killing' });
    expect(spawned(actions)).toEqual([{ src: 'stopProcess', force: true }]);
  });
});

describe('running.serving', () => {
  test('acquire with fresh health evidence → ready at once, counted against the budget', () => {
    const s = running([1]);
    nowMs = INTERVAL_MS; // younger than interval + deadline
    const { s: next, actions } = send(s, { type: 'acquire', callId: 2 });
    expect(next.value).toEqual({ running: 'serving' });
    expect(next.context.tasksSinceStart).toBe(2);
    expect(replies(actions)).toEqual([
      { type: 'reply', callId: 2, payload: { type: 'ready', generation: 1, process: fake } },
    ]);
  });

  test('acquire with stale evidence → probing first; the task waits for the verdict', () => {
    const s = running([1]);
    nowMs = INTERVAL_MS + DEADLINE_MS;
    const { s: next, actions } = send(s, { type: 'acquire', callId: 2 });
    expect(next.value).toEqual({ running: 'probing' });
    expect(next.context.waiters.map((w) => w.callId)).toEqual([2]);
    expect(replies(actions)).toEqual([]);
    expect(spawned(actions)).toEqual([{ src: 'probeProcess', deadlineMs: DEADLINE_MS }]);
  });

  test('after the health interval → probing, busy or idle', () => {
    const { s, actions } = send(running([1]), after('healthInterval', 'running.serving'));
    expect(s.value).toEqual({ running: 'probing' });
    expect(s.context.active).toEqual([1]);
    expect(spawned(actions)).toEqual([{ src: 'probeProcess', deadlineMs: DEADLINE_MS }]);
  });

  test('the acquire that reaches the budget runs, and draining starts at once (eager recycle)', () => {
    const { s, actions } = send(running([1, 2]), { type: 'acquire', callId: 3 });
    expect(s.value).toBe('draining');
    expect(s.context.lastRestartReason).toBe('max_tasks');
    expect(replies(actions).map((r) => r.callId)).toEqual([3]);
    expect(isHealthy(s)).toBe(true);
  });

  test('the budget is read per operation: lowering it recycles on the next event', () => {
    let s = running([1]);
    limit = 1;
    s = send(s, { type: 'taskDone', taskId: 1, generation: 1 }).s;
    expect(s.value).toEqual({ restarting: 'stoppingOld' }); // drained at once: nothing ran
    expect(s.context.lastRestartReason).toBe('max_tasks');
  });

  test('a budget of 0 never recycles', () => {
    let s = running([1]);
    limit = 0;
    for (let id = 2; id < 40; id++) s = send(s, { type: 'acquire', callId: id }).s;
    expect(s.value).toEqual({ running: 'serving' });
    expect(s.context.tasksSinceStart).toBe(39);
  });

  test('taskDone frees the task', () => {
    const { s } = send(running([1, 2]), { type: 'taskDone', taskId: 1, generation: 1 });
    expect(s.context.active).toEqual([2]);
    expect(statsOf(s).running).toBe(1);
  });

  test('taskDone from an older generation is ignored', () => {
    const { s } = send(running([1]), { type: 'taskDone', taskId: 1, generation: 0 });
    expect(s.context.active).toEqual([1]);
  });

  test('taskDone with a fault makes the next acquire probe first', () => {
    let s = send(running([1]), { type: 'taskDone', taskId: 1, generation: 1, fault: true }).s;
    expect(s.context.lastHealthyAt).toBe(-Infinity);
    s = send(s, { type: 'acquire', callId: 2 }).s;
    expect(s.value).toEqual({ running: 'probing' });
  });

  test('withdraw of a running task frees it like taskDone', () => {
    const { s } = send(running([1, 2]), { type: 'withdraw', taskId: 2 });
    expect(s.context.active).toEqual([1]);
  });

  test('restart → draining (manual), accepted', () => {
    const { s, actions } = send(running([1]), { type: 'restart', callId: 3 });
    expect(s.value).toBe('draining');
    expect(s.context.lastRestartReason).toBe('manual');
    expect(replies(actions)[0].payload).toEqual({ type: 'restart', accepted: true });
  });

  test('stop with tasks running → stopping.draining', () => {
    const { s, actions } = send(running([1]), { type: 'stop', callId: 4 });
    expect(s.value).toEqual({ stopping: 'draining' });
    expect(spawned(actions)).toEqual([]);
  });

  test('stop when idle → stopping.killing at once', () => {
    const s = send(running([1]), { type: 'taskDone', taskId: 1, generation: 1 }).s;
    const { s: next, actions } = send(s, { type: 'stop', callId: 4 });
    expect(next.value).toEqual({ stopping: 'killing' });
    expect(spawned(actions)).toEqual([{ src: 'stopProcess', force: true }]);
  });

  test('stats replies with the gauges', () => {
    const { actions } = send(running([1]), { type: 'stats', callId: 11 });
    expect(replies(actions)).toEqual([
      {
        type: 'reply',
        callId: 11,
        payload: {
          state: 'running',
          generation: 1,
          restarts: 0,
          tasksSinceStart: 1,
          running: 1,
          waiting: 0,
          lastRestartReason: null,
          healthy: true,
        },
      },
    ]);
  });
});

describe('running.probing', () => {
  test('healthy → serving: evidence refreshed, waiters admitted', () => {
    let s = running([1]);
    nowMs = 2 * INTERVAL_MS;
    s = send(s, { type: 'acquire', callId: 2 }).s; // stale: waits in probing
    const { s: next, actions } = send(s, done('probe', true));
    expect(next.value).toEqual({ running: 'serving' });
    expect(next.context.lastHealthyAt).toBe(2 * INTERVAL_MS);
    expect(replies(actions).map((r) => r.callId)).toEqual([2]);
  });

  test('a fresh acquire during a periodic probe is admitted without waiting', () => {
    const { s, actions } = send(probing(), { type: 'acquire', callId: 2 });
    expect(s.value).toEqual({ running: 'probing' });
    expect(replies(actions).map((r) => r.callId)).toEqual([2]);
  });

  test('a stale acquire during a probe waits for it', () => {
    const s = probing();
    nowMs = INTERVAL_MS + DEADLINE_MS;
    const { s: next, actions } = send(s, { type: 'acquire', callId: 2 });
    expect(next.context.waiters.map((w) => w.callId)).toEqual([2]);
    expect(replies(actions)).toEqual([]);
  });

  test('unhealthy → draining (reason unhealthy), still reported healthy', () => {
    const { s } = send(probing(), done('probe', false));
    expect(s.value).toBe('draining');
    expect(s.context.lastRestartReason).toBe('unhealthy');
    expect(isHealthy(s)).toBe(true);
  });

  test('a probe that rejects → draining (unhealthy)', () => {
    const { s } = send(probing(), error('probe'));
    expect(s.value).toBe('draining');
    expect(s.context.lastRestartReason).toBe('unhealthy');
  });

  test('a probe that outlives its deadline → draining (unhealthy)', () => {
    const { s } = send(probing(), after('healthDeadline', 'running.probing'));
    expect(s.value).toBe('draining');
    expect(s.context.lastRestartReason).toBe('unhealthy');
  });

  test('leaving probing cancels the probe, so a late verdict cannot act', () => {
    const { s, actions } = send(probing(), { type: 'restart' });
    expect(s.value).toBe('draining');
    expect(actions.some((a) => a.type === 'xstate.stopChild')).toBe(true);
    expect(s.children.probe).toBeUndefined();
  });
});

describe('draining', () => {
  test('new acquires wait; none is refused', () => {
    const { s, actions } = send(drainingUnhealthy([1]), { type: 'acquire', callId: 2 });
    expect(s.value).toBe('draining');
    expect(s.context.waiters.map((w) => w.callId)).toEqual([2]);
    expect(replies(actions)).toEqual([]);
  });

  test('the last taskDone → restarting.stoppingOld, a graceful stop of the old process', () => {
    let s = drainingManual([1, 2]);
    s = send(s, { type: 'taskDone', taskId: 1, generation: 1 }).s;
    expect(s.value).toBe('draining');
    const { s: next, actions } = send(s, { type: 'taskDone', taskId: 2, generation: 1 });
    expect(next.value).toEqual({ restarting: 'stoppingOld' });
    expect(spawned(actions)).toEqual([{ src: 'stopProcess', force: false }]);
  });

  test('after an unhealthy verdict the drained process is stopped with force', () => {
    const s = drainingUnhealthy([1]);
    const { s: next, actions } = send(s, { type: 'taskDone', taskId: 1, generation: 1 });
    expect(next.value).toEqual({ restarting: 'stoppingOld' });
    expect(next.context.abandoned).toBe(0);
    expect(spawned(actions)).toEqual([{ src: 'stopProcess', force: true }]);
  });

  test('draining with nothing running goes straight to restarting', () => {
    const s = send(running([1]), { type: 'taskDone', taskId: 1, generation: 1 }).s;
    const { s: next, actions } = send(s, { type: 'restart' });
    expect(next.value).toEqual({ restarting: 'stoppingOld' });
    expect(emitted(actions, 'telemetry').map((t) => t.to)).toEqual([
      'draining',
      'restarting.stoppingOld',
    ]);
  });

  test('drain timeout → restarting with the running tasks abandoned and a forced stop', () => {
    const { s, actions } = send(drainingUnhealthy([1, 2]), after('drainTimeout', 'draining'));
    expect(s.value).toEqual({ restarting: 'stoppingOld' });
    expect(s.context.active).toEqual([]);
    expect(s.context.abandoned).toBe(2);
    expect(spawned(actions)).toEqual([{ src: 'stopProcess', force: true }]);
  });

  test('restart while draining is declined (one restart at a time)', () => {
    const { s, actions } = send(drainingUnhealthy([1]), { type: 'restart', callId: 3 });
    expect(s.value).toBe('draining');
    expect(replies(actions)[0].payload).toEqual({ type: 'restart', accepted: false });
  });

  test('stop while draining → stopping.draining; waiters fail with stopping', () => {
    const s = send(drainingUnhealthy([1]), { type: 'acquire', callId: 2 }).s;
    const { s: next, actions } = send(s, { type: 'stop' });
    expect(next.value).toEqual({ stopping: 'draining' });
    expect(replies(actions)).toEqual([
      { type: 'reply', callId: 2, payload: { type: 'failed', reason: 'stopping' } },
    ]);
  });
});

describe('restarting', () => {
  test('old process stopped → startingNew', () => {
    const { s, actions } = send(stoppingOld(), done('stopOld'));
    expect(s.value).toEqual({ restarting: 'startingNew' });
    expect(spawned(actions)).toEqual([{ src: 'startProcess' }]);
    expect(isHealthy(s)).toBe(true);
  });

  test('new process started → running, generation 2, restart counted, waiters released', () => {
    let s = send(stoppingOld(), { type: 'acquire', callId: 10 }).s;
    s = send(s, done('stopOld')).s;
    const { s: next, actions } = send(s, done('start'));
    expect(next.value).toEqual({ running: 'serving' });
    expect(next.context.generation).toBe(2);
    expect(next.context.restarts).toBe(1);
    expect(next.context.tasksSinceStart).toBe(2);
    expect(replies(actions).map((r) => [r.callId, r.payload.generation])).toEqual([
      [9, 2],
      [10, 2],
    ]);
  });

  test('a graceful stop that fails is retried once with force', () => {
    const { s, actions } = send(stoppingOld(), error('stopOld'));
    expect(s.value).toEqual({ restarting: 'stoppingOld' });
    expect(spawned(actions)).toEqual([{ src: 'stopProcess', force: true }]);
  });

  test('a forced stop that fails → failed; no second process is started', () => {
    const s = send(stoppingOld(), error('stopOld')).s;
    const { s: next, actions } = send(s, error('stopOld'));
    expect(next.value).toBe('failed');
    expect(spawned(actions)).toEqual([]);
    expect(replies(actions)).toEqual([
      { type: 'reply', callId: 9, payload: { type: 'failed', reason: 'stop_failed' } },
    ]);
  });

  test('the new start fails → failed; waiters get start_failed', () => {
    const s = send(stoppingOld(), done('stopOld')).s;
    const { s: next, actions } = send(s, error('start'));
    expect(next.value).toBe('failed');
    expect(replies(actions)[0].payload).toEqual({ type: 'failed', reason: 'start_failed' });
  });

  test('acquires and restarts during a restart wait or are declined', () => {
    let s = stoppingOld();
    s = send(s, { type: 'acquire', callId: 12 }).s;
    expect(s.context.waiters.map((w) => w.callId)).toEqual([9, 12]);
    const { actions } = send(s, { type: 'restart', callId: 13 });
    expect(replies(actions)[0].payload).toEqual({ type: 'restart', accepted: false });
  });

  test('stop during stoppingOld: waiters fail, and the finished stop ends in stopped', () => {
    const stopping = send(stoppingOld(), { type: 'stop', callId: 14 });
    expect(stopping.s.value).toEqual({ restarting: 'stoppingOld' });
    expect(replies(stopping.actions).map((r) => r.payload)).toEqual([
      { type: 'failed', reason: 'stopping' },
    ]);
    const { s, actions } = send(stopping.s, done('stopOld'));
    expect(s.value).toBe('stopped');
    expect(replies(actions)).toEqual([
      { type: 'reply', callId: 14, payload: { type: 'stopped', abandoned: 0, stopFailed: false } },
    ]);
  });

  test('stop during stoppingOld, then that stop fails → stopping.killing (forced)', () => {
    const s = send(stoppingOld(), { type: 'stop' }).s;
    const { s: next, actions } = send(s, error('stopOld'));
    expect(next.value).toEqual({ stopping: 'killing' });
    expect(spawned(actions)).toEqual([{ src: 'stopProcess', force: true }]);
  });

  test('stop during startingNew: the new process is stopped once it is up', () => {
    let s = send(stoppingOld(), done('stopOld')).s;
    s = send(s, { type: 'stop' }).s;
    const { s: next, actions } = send(s, done('start'));
    expect(next.value).toEqual({ stopping: 'killing' });
    expect(spawned(actions)).toEqual([{ src: 'stopProcess', force: true }]);
  });

  test('stop during startingNew, then the start fails → stopping.killing', () => {
    let s = send(stoppingOld(), done('stopOld')).s;
    s = send(s, { type: 'stop' }).s;
    expect(send(s, error('start')).s.value).toEqual({ stopping: 'killing' });
  });
});

describe('failed', () => {
  function failed(): ProcessSupervisorSnapshot {
    const s = send(boot(), { type: 'acquire', callId: 1 }).s;
    return send(s, error('start')).s;
  }

  test('a later acquire retries: forced stop of the leftovers, then a fresh start', () => {
    const { s, actions } = send(failed(), { type: 'acquire', callId: 2 });
    expect(s.value).toEqual({ restarting: 'stoppingOld' });
    expect(spawned(actions)).toEqual([{ src: 'stopProcess', force: true }]);
    const started = send(send(s, done('stopOld')).s, done('start'));
    expect(started.s.context.generation).toBe(1);
    expect(started.s.context.restarts).toBe(0); // the first successful start is no restart
    expect(replies(started.actions).map((r) => r.callId)).toEqual([2]);
  });

  test('restart → restarting, accepted (reason manual)', () => {
    const { s, actions } = send(failed(), { type: 'restart', callId: 3 });
    expect(s.value).toEqual({ restarting: 'stoppingOld' });
    expect(s.context.lastRestartReason).toBe('manual');
    expect(replies(actions)[0].payload).toEqual({ type: 'restart', accepted: true });
  });

  test('stop → stopping.killing', () => {
    const { s, actions } = send(failed(), { type: 'stop' });
    expect(s.value).toEqual({ stopping: 'killing' });
    expect(spawned(actions)).toEqual([{ src: 'stopProcess', force: true }]);
  });
});

describe('stopping and stopped', () => {
  test('acquires during shutdown fail with stopping; stop callers queue for one reply each', () => {
    let s = send(running([1]), { type: 'stop', callId: 20 }).s;
    const refused = send(s, { type: 'acquire', callId: 2 });
    expect(replies(refused.actions)).toEqual([
      { type: 'reply', callId: 2, payload: { type: 'failed', reason: 'stopping' } },
    ]);
    s = send(refused.s, { type: 'stop', callId: 21 }).s;
    expect(s.context.stoppers.map((c) => c.callId)).toEqual([20, 21]);
    s = send(s, { type: 'taskDone', taskId: 1, generation: 1 }).s;
    expect(s.value).toEqual({ stopping: 'killing' });
    const { s: next, actions } = send(s, done('kill'));
    expect(next.value).toBe('stopped');
    expect(replies(actions).map((r) => r.callId)).toEqual([20, 21]);
  });

  test('shutdown drain bound → killing with the tasks abandoned', () => {
    const s = send(running([1, 2]), { type: 'stop', drainTimeoutMs: 50 }).s;
    expect(s.context.stopDrainTimeoutMs).toBe(50);
    const { s: next, actions } = send(s, after('stopDrainTimeout', 'stopping.draining'));
    expect(next.value).toEqual({ stopping: 'killing' });
    expect(next.context.abandoned).toBe(2);
    expect(spawned(actions)).toEqual([{ src: 'stopProcess', force: true }]);
  });

  test('a failed kill still ends in stopped, and says so', () => {
    let s = send(running([1]), { type: 'taskDone', taskId: 1, generation: 1 }).s;
    s = send(s, { type: 'stop', callId: 22 }).s;
    const { s: next, actions } = send(s, error('kill'));
    expect(next.value).toBe('stopped');
    expect(replies(actions)[0].payload).toEqual({
      type: 'stopped',
      abandoned: 0,
      stopFailed: true,
    });
  });

  test('stopped refuses acquires and answers further stops at once', () => {
    const s = send(boot(), { type: 'stop' }).s;
    expect(replies(send(s, { type: 'acquire', callId: 1 }).actions)[0].payload).toEqual({
      type: 'failed',
      reason: 'stopping',
    });
    expect(replies(send(s, { type: 'stop', callId: 2 }).actions)[0].payload).toEqual({
      type: 'stopped',
      abandoned: 0,
      stopFailed: false,
    });
    expect(replies(send(s, { type: 'restart', callId: 3 }).actions)[0].payload).toEqual({
      type: 'restart',
      accepted: false,
    });
  });
});

describe('telemetry', () => {
  test('every state entered is published once with from/to and the gauges after it', () => {
    let s = boot();
    const seen: any[] = [];
    const steps: object[] = [
      { type: 'acquire', callId: 1 },
      done('start'),
      { type: 'restart' },
      { type: 'taskDone', taskId: 1, generation: 1 },
      done('stopOld'),
      done('start'),
    ];
    for (const event of steps) {
      const r = send(s, event);
      s = r.s;
      seen.push(...emitted(r.actions, 'telemetry'));
    }
    expect(seen.map((t) => `${t.from}→${t.to}`)).toEqual([
      'notStarted→starting',
      'starting→running.serving',
      'running.serving→draining',
      'draining→restarting.stoppingOld',
      'restarting.stoppingOld→restarting.startingNew',
      'restarting.startingNew→running.serving',
    ]);
    expect(seen.at(-1)).toMatchObject({
      type: 'telemetry',
      event: 'transition',
      state: 'running',
      generation: 2,
      restarts: 1,
      lastRestartReason: 'manual',
      healthy: true,
    });
  });

  test('the initial entry is published with from = null', () => {
    const [, actions] = initialTransition(machine, { process: fake });
    expect(emitted(actions as unknown as Planned, 'telemetry').map((t) => [t.from, t.to])).toEqual([
      [null, 'notStarted'],
    ]);
  });
});

test('pure transitions never touched the process', () => {
  expect(fake.log).toEqual([]);
});
