// `transition()` is a function of (snapshot, event): an event that carries its `step` (time,
// limits, observed telemetry) gives the same next table and the same planned actions whatever
// the clock, the config provider and the telemetry filter say between two calls, and none of
// them is read. An event without a step reads the clock and the provider at most once per step
// (grants, preemptions and the reconsidered request included), and the step then behaves
// exactly as if its sender had stamped that reading itself.

import { describe, expect, it } from 'vitest';
import { type AnyMachineSnapshot, createActor, initialTransition, transition } from 'xstate';
import {
  cloneSemaphoreSnapshot,
  observedMask,
  type SemaphoreContext,
  type SemaphoreEvent,
  type SemaphoreLimits,
  type SemaphoreStep,
  type SemaphoreTelemetryName,
  semaphoreMachine,
} from '../../../src/machines/semaphore.js';

type Snapshot = ReturnType<typeof initialTransition<typeof semaphoreMachine>>[0];

/** The world a semaphore reads through its input, with a count of every reading. */
function world() {
  const w = {
    clock: 0,
    limits: { capacity: 2, queueSize: 2, renderTimeoutS: 300 } as SemaphoreLimits,
    observing: true,
    /** What the provider answers; a test may swap it for one that changes per reading. */
    answer: (): SemaphoreLimits => w.limits,
    reads: { now: 0, limits: 0, telemetry: 0 },
    input: {
      now: () => {
        w.reads.now++;
        return w.clock;
      },
      limits: () => {
        w.reads.limits++;
        return w.answer();
      },
      telemetry: (_: SemaphoreTelemetryName) => {
        w.reads.telemetry++;
        return w.observing;
      },
    },
    resetReads() {
      w.reads = { now: 0, limits: 0, telemetry: 0 };
    },
  };
  return w;
}

/** Everything a snapshot holds that a step can change, as plain data. */
function state(s: AnyMachineSnapshot) {
  const { table } = s.context as SemaphoreContext;
  return {
    value: s.value,
    holders: [...table.holders.values()].map((h) => ({ ...h })),
    queue: table.queueOrder(),
    waiters: [...table.waiters.values()].map((h) => ({ ...h })),
    depths: table.depths,
    yieldable: table.yieldable,
    preempted: table.preempted,
    averageHoldMs: table.averageHoldMs(),
  };
}

/** The planned actions as plain data. */
const planned = (actions: unknown[]) =>
  actions.map((a) => {
    const { type, params } = a as { type: string; params?: { event?: unknown } };
    return { type, event: params?.event };
  });

/** One pure step over a clone. */
function step(s: Snapshot, event: SemaphoreEvent) {
  const [next, actions] = transition(semaphoreMachine, cloneSemaphoreSnapshot(s), event);
  return { next, state: state(next), actions: planned(actions) };
}

/**
 * A busy semaphore, built by unstamped steps: capacity 2 held by `a` (orphaned, and so already
 * told `preempted`) and `b`; `n` (normal) and `c` (low) waiting; holds of 1 s and 3 s recorded.
 */
function busy() {
  const w = world();
  let s = initialTransition(semaphoreMachine, w.input)[0];
  const go = (event: SemaphoreEvent, at: number) => {
    w.clock = at;
    s = step(s, event).next;
  };
  go({ type: 'request', id: 'x' }, 0);
  go({ type: 'release', id: 'x' }, 1_000);
  go({ type: 'request', id: 'y' }, 1_000);
  go({ type: 'release', id: 'y' }, 4_000);
  go({ type: 'request', id: 'a' }, 5_000);
  go({ type: 'request', id: 'b' }, 6_000);
  go({ type: 'request', id: 'c', class: 'low' }, 7_000);
  go({ type: 'request', id: 'n', class: 'normal' }, 7_500);
  go({ type: 'orphaned', id: 'a' }, 8_000);
  expect(state(s).holders.map((h) => h.id)).toEqual(['a', 'b']);
  expect(state(s).queue).toEqual(['n', 'c']);
  expect([state(s).yieldable, state(s).preempted]).toEqual([1, 1]);
  w.resetReads();
  return { w, s };
}

const STEP: SemaphoreStep = {
  at: 9_000,
  limits: { capacity: 2, queueSize: 2, renderTimeoutS: 300 },
};
const stamped = (event: SemaphoreEvent, step: SemaphoreStep = STEP): SemaphoreEvent => ({
  ...event,
  step,
});

// One event per branch of the chart, each stamped.
const CASES: [string, SemaphoreEvent][] = [
  ['request, already held', { type: 'request', id: 'a', callId: 1 }],
  ['request, displacing a lower waiter', { type: 'request', id: 'h', class: 'high', callId: 2 }],
  ['request, refused', { type: 'request', id: 'l', class: 'low', callId: 3 }],
  ['release of a holder, granting the next waiter', { type: 'release', id: 'b', callId: 4 }],
  ['release of a waiter', { type: 'release', id: 'c', callId: 5 }],
  ['release of nobody', { type: 'release', id: 'z', callId: 6 }],
  ['gone of a holder', { type: 'gone', id: 'a' }],
  ['gone of a waiter', { type: 'gone', id: 'n' }],
  ['transfer', { type: 'transfer', from: 'b', to: 'b2', callId: 7 }],
  ['orphaned, preempting at once', { type: 'orphaned', id: 'b', callId: 8 }],
  ['adopted', { type: 'adopted', id: 'a', callId: 9 }],
  ['retryAfter', { type: 'retryAfter', callId: 10 }],
  ['stats', { type: 'stats', callId: 11 }],
];

describe('a stamped event: transition() depends only on its arguments', () => {
  it.each(CASES)('%s: same next table and actions, whatever the world says', (_, event) => {
    const { w, s } = busy();
    const first = step(s, stamped(event));
    // The world changes completely between the two calls.
    w.clock = 1e9;
    w.limits = { capacity: 1, queueSize: 0, renderTimeoutS: 1 };
    w.observing = false;
    const second = step(s, stamped(event));
    expect(second.state).toEqual(first.state);
    expect(second.actions).toEqual(first.actions);
    expect(first.actions.length).toBeGreaterThan(0); // not vacuous: the step did something
    expect(w.reads).toEqual({ now: 0, limits: 0, telemetry: 0 });
  });

  it('the step, not the provider, decides: a raised capacity in the step grants at once', () => {
    const { w, s } = busy();
    w.limits = { capacity: 1, queueSize: 0, renderTimeoutS: 300 };
    const raised = { ...STEP, limits: { ...STEP.limits, capacity: 5 } };
    const { state: next, actions } = step(s, stamped({ type: 'request', id: 'r' }, raised));
    // The owed waiters are served first (n, then c), then the request is reconsidered.
    expect(next.holders.map((h) => h.id)).toEqual(['a', 'b', 'n', 'c', 'r']);
    expect(next.holders.find((h) => h.id === 'r')?.grantedAt).toBe(STEP.at);
    expect(actions.filter((a) => a.type === 'xstate.raise')).toHaveLength(1);
  });

  it('observed telemetry comes from the step: none observed, none built', () => {
    const { s } = busy();
    const quiet = step(s, stamped({ type: 'release', id: 'b' }, { ...STEP, observed: 0 }));
    const loud = step(s, stamped({ type: 'release', id: 'b' }));
    const telemetry = (r: typeof quiet) =>
      r.actions.filter((a) => (a.event as { type?: string })?.type === 'telemetry');
    expect(telemetry(quiet)).toEqual([]);
    expect(telemetry(loud).map((a) => (a.event as { event: string }).event)).toEqual([
      'released',
      'acquired',
    ]);
    expect(quiet.state).toEqual(loud.state);
    const some = observedMask((name) => name === 'acquired');
    const partly = step(s, stamped({ type: 'release', id: 'b' }, { ...STEP, observed: some }));
    expect(telemetry(partly).map((a) => (a.event as { event: string }).event)).toEqual([
      'acquired',
    ]);
  });
});

describe('an unstamped event: the world is read once per step', () => {
  it.each(CASES)('%s: at most one clock and one provider reading', (_, event) => {
    const { w, s } = busy();
    step(s, event);
    expect(w.reads.now).toBeLessThanOrEqual(1);
    expect(w.reads.limits).toBeLessThanOrEqual(1);
  });

  it('once even when the step grants several waiters and reconsiders the request', () => {
    const { w, s } = busy();
    w.limits = { ...w.limits, capacity: 5 };
    const { state: next } = step(s, { type: 'request', id: 'r' });
    expect(next.holders.map((h) => h.id)).toEqual(['a', 'b', 'n', 'c', 'r']);
    expect(w.reads.now).toBe(1);
    expect(w.reads.limits).toBe(1);
  });

  it('every guard and action of the step sees the same limits', () => {
    const { w, s } = busy();
    // A provider that answers differently on every reading: only one of them is used.
    let readings = 0;
    const capacities = [3, 1, 1, 1];
    w.answer = () => ({ capacity: capacities[readings++]!, queueSize: 2, renderTimeoutS: 9 });
    const released = step(s, { type: 'release', id: 'b' });
    expect(readings).toBe(1);
    // Capacity 3 for the whole step: b's slot and the third one go to n and c.
    expect(released.state.holders.map((h) => h.id)).toEqual(['a', 'n', 'c']);
    const caps = released.actions
      .map((a) => a.event as { type?: string; metadata?: { capacity: number } })
      .filter((e) => e?.type === 'telemetry')
      .map((e) => e.metadata!.capacity);
    expect(caps).toEqual([3, 3, 3]);
  });

  it('gives exactly what its sender would have got by stamping that reading itself', () => {
    const unstamp = (actions: ReturnType<typeof step>['actions']) =>
      actions.map((a) => {
        if (a.type !== 'xstate.raise') return a;
        const { step: _, ...event } = a.event as { step?: unknown };
        return { ...a, event };
      });
    for (const [, event] of CASES) {
      const { w, s } = busy();
      w.clock = 12_345;
      w.observing = true;
      const unstamped = step(s, event);
      w.clock = 0; // the stamped replay must not look
      const replay = step(s, stamped(event, { at: 12_345, limits: w.limits }));
      expect(replay.state).toEqual(unstamped.state);
      expect(unstamp(replay.actions)).toEqual(unstamp(unstamped.actions));
    }
  });

  it('an event object sent twice is read afresh the second time', () => {
    const w = world();
    const actor = createActor(semaphoreMachine, { input: w.input }).start();
    const request: SemaphoreEvent = { type: 'request', id: 'a' };
    w.clock = 100;
    actor.send(request);
    actor.send({ type: 'release', id: 'a' });
    w.clock = 5_000;
    actor.send(request);
    const holder = actor.getSnapshot().context.table.holders.get('a');
    expect(holder?.grantedAt).toBe(5_000);
    actor.stop();
  });

  it('works the same through provide(), and when asked can()', () => {
    const { w, s } = busy();
    const provided = semaphoreMachine.provide({});
    const [next] = transition(provided, cloneSemaphoreSnapshot(s), { type: 'release', id: 'b' });
    expect(state(next).holders.map((h) => h.id)).toEqual(['a', 'n']);
    expect(w.reads.now).toBe(1);
    expect(s.can({ type: 'request', id: 'q' })).toBe(true);
  });

  it('reads nothing for XState’s own events: stopping an actor', () => {
    const w = world();
    const actor = createActor(semaphoreMachine, { input: w.input }).start();
    actor.send({ type: 'request', id: 'a' });
    w.resetReads();
    actor.stop();
    expect(w.reads).toEqual({ now: 0, limits: 0, telemetry: 0 });
  });
});
