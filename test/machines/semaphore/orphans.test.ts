// Orphans yield (issue #14, item 5), walked with pure `transition()` steps: a holder marked
// `orphaned` (its render goes on only for the variant store) is told `preempted` as soon as a
// waiter queues that no free slot and no earlier preemption will serve; `adopted` takes the mark
// back. The preempted holder's normal `release` grants the waiter. Each step feeds a clone.

import { describe, expect, it } from 'vitest';
import { initialTransition, transition } from 'xstate';
import {
  cloneSemaphoreSnapshot,
  type SemaphoreEvent,
  type SemaphoreInput,
  semaphoreMachine,
} from '../../../src/machines/semaphore.js';

type Snapshot = ReturnType<typeof initialTransition<typeof semaphoreMachine>>[0];

let clock = 0;
const now = () => clock;

function boot(input: Partial<SemaphoreInput> = {}): Snapshot {
  clock = 0;
  return initialTransition(semaphoreMachine, { capacity: 2, queueSize: 4, now, ...input })[0];
}

/** Runs events in order (each on a clone); returns the last snapshot and the emitted events. */
function steps(snapshot: Snapshot, ...events: SemaphoreEvent[]) {
  let current = snapshot;
  const out: any[] = [];
  for (const event of events) {
    const [next, actions] = transition(semaphoreMachine, cloneSemaphoreSnapshot(current), event);
    current = next;
    for (const action of actions as any[]) {
      if (action.type === 'xstate.emit') out.push(action.params.event);
      else if (action.type === 'xstate.sendTo') out.push(action.params.event);
    }
  }
  return { next: current, out };
}

const req = (id: string, callId?: number): SemaphoreEvent => ({ type: 'request', id, callId });
const orphaned = (id: string, callId?: number): SemaphoreEvent => ({
  type: 'orphaned',
  id,
  callId,
});
const adopted = (id: string, callId?: number): SemaphoreEvent => ({ type: 'adopted', id, callId });
const rel = (id: string): SemaphoreEvent => ({ type: 'release', id });
const preemptions = (out: any[]) =>
  out.filter((e) => e.type === 'notify' && e.message.type === 'preempted').map((e) => e.to);
const grants = (out: any[]) =>
  out.filter((e) => e.type === 'notify' && e.message.type === 'granted').map((e) => e.to);
const marks = (s: Snapshot) => {
  const { table } = s.context;
  return { yieldable: table.yieldable, preempted: table.preempted };
};

describe('orphans yield to waiters', () => {
  it('an orphan with nobody waiting keeps its slot: only the reply', () => {
    const { next, out } = steps(boot(), req('a'), req('b'), orphaned('a', 7));
    expect(out.slice(-1)).toEqual([{ type: 'reply', callId: 7, payload: { type: 'ok' } }]);
    expect(preemptions(out)).toEqual([]);
    expect(marks(next)).toEqual({ yieldable: 1, preempted: 0 });
  });

  it('a waiter queuing behind full slots preempts the orphan; its release grants the waiter', () => {
    const s = steps(boot(), req('a'), req('b'), orphaned('a')).next;
    clock = 1_500;
    const queued = steps(s, req('w', 3));
    expect(preemptions(queued.out)).toEqual(['a']);
    // The waiter is answered `queued` first, then the orphan is told, then telemetry.
    expect(queued.out.map((e) => (e.type === 'telemetry' ? e.event : e.type))).toEqual([
      'queued',
      'reply',
      'notify',
      'preempted',
    ]);
    expect(queued.out.at(-1)).toMatchObject({
      event: 'preempted',
      measurements: { held: 2, queued: 1, duration: 1_500 },
    });
    expect(marks(queued.next)).toEqual({ yieldable: 1, preempted: 1 });
    const released = steps(queued.next, rel('a'));
    expect(grants(released.out)).toEqual(['w']);
    expect([...released.next.context.table.holders.keys()].sort()).toEqual(['b', 'w']);
    expect(marks(released.next)).toEqual({ yieldable: 0, preempted: 0 });
  });

  it('a holder turning orphan while a waiter already queues is preempted at once', () => {
    const s = steps(boot(), req('a'), req('b'), req('w')).next;
    const { out } = steps(s, orphaned('b', 4));
    expect(preemptions(out)).toEqual(['b']);
    expect(out.at(-1)).toEqual({ type: 'reply', callId: 4, payload: { type: 'ok' } });
  });

  it('one preemption per waiter: the orphan granted last is asked first', () => {
    clock = 0;
    let s = boot();
    s = steps(s, req('old')).next;
    clock = 10;
    s = steps(s, req('young'), orphaned('old'), orphaned('young')).next;
    const first = steps(s, req('w1'));
    expect(preemptions(first.out)).toEqual(['young']);
    // A second waiter is owed a second slot: the other orphan.
    const second = steps(first.next, req('w2'));
    expect(preemptions(second.out)).toEqual(['old']);
    // A third has nobody left to preempt: it waits like any waiter.
    const third = steps(second.next, req('w3'));
    expect(preemptions(third.out)).toEqual([]);
    expect(marks(third.next)).toEqual({ yieldable: 2, preempted: 2 });
  });

  it('a listener that comes back (`adopted`) takes the mark back; the next orphan is asked', () => {
    clock = 0;
    let s = boot();
    s = steps(s, req('a')).next;
    clock = 5;
    s = steps(s, req('b'), orphaned('a'), orphaned('b'), req('w')).next;
    expect(marks(s)).toEqual({ yieldable: 2, preempted: 1 });
    const back = steps(s, adopted('b', 9));
    expect(preemptions(back.out)).toEqual(['a']);
    expect(marks(back.next)).toEqual({ yieldable: 1, preempted: 1 });
    // Adopted again: nobody is left to ask; the waiter waits for a normal release.
    const none = steps(back.next, adopted('a'));
    expect(preemptions(none.out)).toEqual([]);
    expect(marks(none.next)).toEqual({ yieldable: 0, preempted: 0 });
    expect(grants(steps(none.next, rel('b')).out)).toEqual(['w']);
  });

  it('an adopted holder is never preempted', () => {
    const s = steps(boot(), req('a'), req('b'), orphaned('a'), adopted('a')).next;
    const { next, out } = steps(s, req('w'));
    expect(preemptions(out)).toEqual([]);
    expect(next.context.table.queueOrder()).toEqual(['w']);
  });

  it('a free slot (capacity raised) serves the waiter: no preemption', () => {
    let capacity = 1;
    const limits = () => ({ capacity, queueSize: 4, renderTimeoutS: 300 });
    let s = steps(
      boot({ capacity: undefined, queueSize: undefined, limits }),
      req('a'),
      req('w'),
    ).next;
    capacity = 2;
    const { out } = steps(s, orphaned('a'));
    expect(preemptions(out)).toEqual([]);
    s = steps(s, orphaned('a')).next;
    expect(marks(s)).toEqual({ yieldable: 1, preempted: 0 });
  });

  it('orphaned/adopted for a waiter or an unknown id change nothing but answer ok', () => {
    const s = steps(boot({ capacity: 1 }), req('a'), req('w')).next;
    const cases = [orphaned('w', 1), orphaned('x', 2), adopted('w', 3), adopted('x', 4)];
    for (const [i, event] of cases.entries()) {
      const { next, out } = steps(s, event);
      expect(out).toEqual([{ type: 'reply', callId: i + 1, payload: { type: 'ok' } }]);
      expect(marks(next)).toEqual({ yieldable: 0, preempted: 0 });
    }
  });

  it('a preempted holder that goes away (gone) frees its slot and its marks', () => {
    const s = steps(boot({ capacity: 1 }), req('a'), orphaned('a'), req('w')).next;
    expect(marks(s)).toEqual({ yieldable: 1, preempted: 1 });
    const { next, out } = steps(s, { type: 'gone', id: 'a' });
    expect(grants(out)).toEqual(['w']);
    expect(marks(next)).toEqual({ yieldable: 0, preempted: 0 });
  });

  it('a transferred orphan keeps its mark (occupancy and counts 1 → 1)', () => {
    const s = steps(boot({ capacity: 1 }), req('a'), orphaned('a')).next;
    const moved = steps(s, { type: 'transfer', from: 'a', to: 'b' }).next;
    expect(marks(moved)).toEqual({ yieldable: 1, preempted: 0 });
    expect(preemptions(steps(moved, req('w')).out)).toEqual(['b']);
  });
});

describe('orphans yield to listeners only, and a promoted waiter is a listener (issue #19)', () => {
  const warm = (id: string, cls: 'high' | 'normal' | 'low'): SemaphoreEvent => ({
    type: 'request',
    id,
    class: cls,
  });
  const promote = (id: string, callId?: number): SemaphoreEvent => ({
    type: 'promote',
    id,
    class: 'interactive',
    callId,
  });

  it('a queued warm request never preempts an orphan; a listener does', () => {
    const s = steps(boot(), req('a'), req('b'), orphaned('a'), orphaned('b'));
    const lowWaits = steps(s.next, warm('w1', 'low'), warm('w2', 'high'));
    expect(preemptions(lowWaits.out)).toEqual([]);
    const listener = steps(lowWaits.next, req('L'));
    expect(preemptions(listener.out)).toEqual(['b']);
    // the orphan's release grants the listener, ahead of both warm waiters
    expect(grants(steps(listener.next, rel('b')).out)).toEqual(['L']);
  });

  it('the orphan of the lowest class yields first, the youngest among equals', () => {
    let s = boot();
    s = steps(s, warm('w', 'low')).next;
    clock = 5;
    s = steps(s, req('a'), orphaned('w'), orphaned('a')).next;
    expect(preemptions(steps(s, req('L')).out)).toEqual(['w']);
  });

  it('promote moves a waiter to the tail of the higher class and lets it preempt', () => {
    const s = steps(boot(), req('a'), req('b'), orphaned('a'), warm('w1', 'low'), req('L1'));
    expect(preemptions(s.out)).toEqual(['a']);
    const up = steps(s.next, warm('w2', 'low'), promote('w2', 9));
    expect(up.next.context.table.queueOrder()).toEqual(['L1', 'w2', 'w1']);
    expect(up.out.slice(-1)).toEqual([{ type: 'reply', callId: 9, payload: { type: 'ok' } }]);
    // no second orphan: nothing more to preempt, and a promote of a holder or nobody is a no-op
    expect(preemptions(up.out)).toEqual([]);
    const noop = steps(up.next, promote('a', 10), promote('nobody', 11));
    expect(noop.next.context.table.queueOrder()).toEqual(['L1', 'w2', 'w1']);
  });
});
