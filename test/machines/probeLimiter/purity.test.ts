// The probe limiter's `transition()` is a function of (snapshot, event): a stamped event (`step`:
// time and cap) gives the same next holders and actions whatever the clock and the provider say
// between two calls, and reads neither. An unstamped one is stamped by the door with one reading
// of each per step, and behaves as if its sender had stamped that reading.

import { describe, expect, it } from 'vitest';
import { initialTransition, transition } from 'xstate';
import {
  cloneProbeLimiterSnapshot,
  type ProbeLimiterEvent,
  type ProbeLimiterStep,
  probeLimiterMachine,
} from '../../../src/machines/probeLimiter.js';

type Snapshot = ReturnType<typeof initialTransition<typeof probeLimiterMachine>>[0];

function world() {
  const w = {
    clock: 0,
    capacity: 2,
    reads: { now: 0, limits: 0 },
    input: {
      now: () => {
        w.reads.now++;
        return w.clock;
      },
      limits: () => {
        w.reads.limits++;
        return { capacity: w.capacity };
      },
    },
  };
  return w;
}

function step(s: Snapshot, event: ProbeLimiterEvent) {
  const [next, actions] = transition(probeLimiterMachine, cloneProbeLimiterSnapshot(s), event);
  return { holders: [...next.context.holders], out: actions.map((a: any) => a.params.event) };
}

/** `a` holds since 1 000 ms, `b` since 2 000 ms: both slots of 2. */
function full() {
  const w = world();
  let s = initialTransition(probeLimiterMachine, w.input)[0];
  for (const [id, at] of [
    ['a', 1_000],
    ['b', 2_000],
  ] as const) {
    w.clock = at;
    [s] = transition(probeLimiterMachine, s, { type: 'acquire', id });
  }
  w.reads = { now: 0, limits: 0 };
  return { w, s };
}

const STEP: ProbeLimiterStep = { at: 5_000, capacity: 2 };
const CASES: [string, ProbeLimiterEvent][] = [
  ['acquire, refused', { type: 'acquire', id: 'c', callId: 1 }],
  ['acquire, already held', { type: 'acquire', id: 'a', callId: 2 }],
  ['release', { type: 'release', id: 'a', callId: 3 }],
  ['gone', { type: 'gone', id: 'b' }],
  ['stats', { type: 'stats', callId: 4 }],
];

describe('probe limiter: transition() depends only on its arguments', () => {
  it.each(CASES)('%s, stamped: same result whatever the world says; nothing read', (_, e) => {
    const { w, s } = full();
    const first = step(s, { ...e, step: STEP });
    w.clock = 1e9;
    w.capacity = 9;
    const second = step(s, { ...e, step: STEP });
    expect(second).toEqual(first);
    expect(w.reads).toEqual({ now: 0, limits: 0 });
  });

  it.each(CASES)('%s, unstamped: one reading each, as if stamped with it', (_, e) => {
    const { w, s } = full();
    w.clock = 7_000;
    w.capacity = 3;
    const viaDoor = step(s, e);
    expect(w.reads).toEqual({ now: 1, limits: 1 });
    w.clock = 0;
    w.capacity = 1;
    expect(step(s, { ...e, step: { at: 7_000, capacity: 3 } })).toEqual(viaDoor);
  });

  it('the step decides: its cap, not the provider’s, grants a third slot', () => {
    const { s } = full();
    const { holders } = step(s, { type: 'acquire', id: 'c', step: { at: 6_000, capacity: 3 } });
    expect(holders).toEqual([
      ['a', 1_000],
      ['b', 2_000],
      ['c', 6_000],
    ]);
  });
});
