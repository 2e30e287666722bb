// Walks the semaphore chart with pure `initialTransition()`/`transition()`: no actor runs and
// no effect executes. Each test asserts the next table and the planned effects in order:
// replies, `notify` messages to waiters, and telemetry with counts after each event. Proves
// grant/queue/refuse/displace, release and `gone` for holders and waiters, class order,
// capacity read per operation (raised and lowered), and the Retry-After formula.
// The table is mutable, so every step feeds `transition()` a clone (see `step`).

import { describe, expect, it } from 'vitest';
import { createActor, initialTransition, transition } from 'xstate';
import {
  cloneSemaphoreSnapshot,
  DEFAULT_HOLD_MS,
  estimateRetryAfterS,
  HOLD_SAMPLES,
  type SemaphoreEvent,
  type SemaphoreInput,
  SlotTable,
  semaphoreMachine,
} from '../../../src/machines/semaphore.js';

type Snapshot = ReturnType<typeof initialTransition<typeof semaphoreMachine>>[0];
type Planned = { via: 'emit' | 'sendTo'; event: any; to?: unknown };

let clock = 0;
const now = () => clock;

function boot(input: Partial<SemaphoreInput> = {}): Snapshot {
  clock = 0;
  const [snapshot, actions] = initialTransition(semaphoreMachine, {
    capacity: 1,
    queueSize: 2,
    now,
    ...input,
  });
  expect(actions).toEqual([]);
  return snapshot;
}

/** One pure step over a clone; returns the next snapshot and the planned effects in order. */
function step(snapshot: Snapshot, event: SemaphoreEvent): { next: Snapshot; out: Planned[] } {
  const [next, actions] = transition(semaphoreMachine, cloneSemaphoreSnapshot(snapshot), event);
  const out = actions.map((action: any): Planned => {
    if (action.type === 'xstate.emit') return { via: 'emit', event: action.params.event };
    if (action.type === 'xstate.raise') return { via: 'emit', event: { type: 'raise' } };
    if (action.type === 'xstate.sendTo') {
      return { via: 'sendTo', event: action.params.event, to: action.params.to };
    }
    throw new Error(`unexpected planned action ${action.type}`);
  });
  return { next, out };
}

/** Runs events in order, returning the last snapshot and every planned effect. */
function steps(snapshot: Snapshot, ...events: SemaphoreEvent[]) {
  let current = snapshot;
  const out: Planned[] = [];
  for (const event of events) {
    const result = step(current, event);
    current = result.next;
    out.push(...result.out);
  }
  return { next: current, out };
}

const events = (out: Planned[]) => out.map((p) => p.event);
const shape = (out: Planned[]) =>
  events(out).map((e) =>
    e.type === 'telemetry'
      ? `${e.event}:${e.metadata.class}`
      : e.type === 'notify'
        ? `notify:${e.to}:${e.message.type}`
        : e.type === 'raise'
          ? 'reconsider'
          : `reply:${e.payload?.type ?? e.payload}`,
  );
const telemetry = (out: Planned[]) => events(out).filter((e) => e.type === 'telemetry');
const replies = (out: Planned[]) => events(out).filter((e) => e.type === 'reply');
const table = (s: Snapshot) => s.context.table;
const occupancy = (s: Snapshot) => ({
  held: [...table(s).holders.keys()],
  queue: table(s).queueOrder(),
});

const req = (id: string, callId?: number, cls?: any): SemaphoreEvent =>
  cls === undefined ? { type: 'request', id, callId } : { type: 'request', id, callId, class: cls };
const rel = (id: string, callId?: number): SemaphoreEvent => ({ type: 'release', id, callId });

describe('initial state', () => {
  it('is serving with nothing held or queued, and plans nothing', () => {
    const s = boot();
    expect(s.value).toBe('serving');
    expect(occupancy(s)).toEqual({ held: [], queue: [] });
  });

  it.each([
    [{ capacity: 0, queueSize: 1 }, RangeError],
    [{ capacity: 1.5, queueSize: 1 }, RangeError],
    [{ capacity: 1, queueSize: -1 }, RangeError],
    [{ capacity: 1, queueSize: 1, renderTimeoutS: 0 }, RangeError],
    [{ capacity: 1 }, TypeError],
  ])('fails to start on impossible input %j (a programmer error)', (input, kind) => {
    const [snapshot] = initialTransition(semaphoreMachine, input);
    expect(snapshot.status).toBe('error');
    expect((snapshot as unknown as { error: unknown }).error).toBeInstanceOf(kind);
  });
});

describe('request', () => {
  it('grants a free slot: acquired (wait 0, counts after), then the reply', () => {
    const { next, out } = step(boot(), req('a', 1));
    expect(occupancy(next)).toEqual({ held: ['a'], queue: [] });
    expect(events(out)).toEqual([
      {
        type: 'telemetry',
        event: 'acquired',
        measurements: {
          held: 1,
          queued: 0,
          queued_interactive: 0,
          queued_high: 0,
          queued_normal: 0,
          queued_low: 0,
          wait: 0,
        },
        metadata: { capacity: 1, queueSize: 2, class: 'interactive' },
      },
      { type: 'reply', callId: 1, payload: { type: 'granted' } },
    ]);
  });

  it('answers a cast (no callId) with nothing, and an actor caller through sendTo', () => {
    const cast = step(boot(), req('a'));
    expect(shape(cast.out)).toEqual(['acquired:interactive']);
    const caller = createActor(semaphoreMachine, { input: { capacity: 1, queueSize: 0 } });
    const { out } = step(boot(), { type: 'request', id: 'a', callId: 9, replyTo: caller });
    expect(out[1]).toEqual({
      via: 'sendTo',
      to: caller,
      event: { type: 'reply', callId: 9, payload: { type: 'granted' } },
    });
  });

  it('queues behind a full slot, FIFO, with counts after the event', () => {
    const { next, out } = steps(boot(), req('a', 1), req('b', 2), req('c', 3));
    expect(occupancy(next)).toEqual({ held: ['a'], queue: ['b', 'c'] });
    expect(shape(out)).toEqual([
      'acquired:interactive',
      'reply:granted',
      'queued:interactive',
      'reply:queued',
      'queued:interactive',
      'reply:queued',
    ]);
    expect(telemetry(out).map((t) => [t.measurements.held, t.measurements.queued])).toEqual([
      [1, 0],
      [1, 1],
      [1, 2],
    ]);
    expect(telemetry(out)[2].measurements.queued_interactive).toBe(2);
  });

  it('refuses when the queue is full: queue_full carries the same Retry-After as `rejected`', () => {
    const { next, out } = steps(boot(), req('a'), req('b'), req('c'), req('d', 4));
    expect(occupancy(next)).toEqual({ held: ['a'], queue: ['b', 'c'] });
    const rejected = telemetry(out).at(-1);
    // Placeholder 2 s × (2 queued + 1) ÷ 1 slot = 6 s.
    expect(rejected).toMatchObject({
      event: 'rejected',
      measurements: { held: 1, queued: 2, retry_after: 6 },
      metadata: { class: 'interactive' },
    });
    expect(replies(out)).toEqual([
      { type: 'reply', callId: 4, payload: { type: 'queue_full', retryAfterS: 6 } },
    ]);
  });

  it('refuses at once with queue size 0', () => {
    const { next, out } = steps(boot({ queueSize: 0 }), req('a'), req('b', 2));
    expect(occupancy(next)).toEqual({ held: ['a'], queue: [] });
    expect(replies(out)[0].payload).toEqual({ type: 'queue_full', retryAfterS: 2 });
  });

  it('answers already_held to a holder or a waiter asking again, changing nothing', () => {
    const s = steps(boot(), req('a'), req('b')).next;
    for (const id of ['a', 'b']) {
      const { next, out } = step(s, req(id, 5, 'low'));
      expect(events(out)).toEqual([
        { type: 'reply', callId: 5, payload: { type: 'already_held' } },
      ]);
      expect(occupancy(next)).toEqual({ held: ['a'], queue: ['b'] });
    }
  });

  it('throws on a class that bypassed the client (a caller bug, loud by design)', () => {
    expect(() => step(boot(), req('a', 1, 'urgent'))).toThrow(/unknown admission class/);
  });
});

describe('release and gone', () => {
  it('a holder: released (duration), then the oldest waiter is granted and told, then ok', () => {
    let s = steps(boot(), req('a'), req('b'), req('c')).next;
    clock = 250;
    const { next, out } = step(s, rel('a', 7));
    s = next;
    expect(occupancy(s)).toEqual({ held: ['b'], queue: ['c'] });
    expect(events(out)).toEqual([
      expect.objectContaining({
        event: 'released',
        measurements: expect.objectContaining({ held: 0, queued: 2, duration: 250 }),
        metadata: expect.objectContaining({ class: 'interactive' }),
      }),
      { type: 'notify', to: 'b', message: { type: 'granted' } },
      expect.objectContaining({
        event: 'acquired',
        measurements: expect.objectContaining({ held: 1, queued: 1, wait: 250 }),
      }),
      { type: 'reply', callId: 7, payload: { type: 'ok' } },
    ]);
  });

  it('a waiter: dropped from its FIFO with `abandoned`, and nothing is granted', () => {
    const s = steps(boot(), req('a'), req('b'), req('c')).next;
    const { next, out } = step(s, rel('b', 8));
    expect(occupancy(next)).toEqual({ held: ['a'], queue: ['c'] });
    expect(shape(out)).toEqual(['abandoned:interactive', 'reply:ok']);
    expect(telemetry(out)[0].measurements).toMatchObject({ held: 1, queued: 1 });
  });

  it('an unknown id, or a second release, is ok and emits nothing else', () => {
    const s = steps(boot(), req('a'), rel('a')).next;
    expect(shape(step(s, rel('a', 3)).out)).toEqual(['reply:ok']);
    expect(shape(step(s, rel('nobody', 4)).out)).toEqual(['reply:ok']);
  });

  it('gone takes the release branches without a reply', () => {
    const s = steps(boot(), req('a'), req('b'), req('c')).next;
    const waiterGone = step(s, { type: 'gone', id: 'c', reason: 'close' });
    expect(shape(waiterGone.out)).toEqual(['abandoned:interactive']);
    const holderGone = step(s, { type: 'gone', id: 'a' });
    expect(shape(holderGone.out)).toEqual([
      'released:interactive',
      'notify:b:granted',
      'acquired:interactive',
    ]);
    expect(step(s, { type: 'gone', id: 'stranger' }).out).toEqual([]);
  });
});

describe('admission classes', () => {
  it('grants interactive, high, normal, low in that order, FIFO within a class', () => {
    let s = boot({ queueSize: 8 });
    s = steps(
      s,
      req('holder'),
      req('low1', undefined, 'low'),
      req('normal1', undefined, 'normal'),
      req('high1', undefined, 'high'),
      req('plain1'),
      req('high2', undefined, 'high'),
      req('low2', undefined, 'low'),
    ).next;
    expect(table(s).queueOrder()).toEqual(['plain1', 'high1', 'high2', 'normal1', 'low1', 'low2']);
    const granted: string[] = [];
    let holder = 'holder';
    for (let i = 0; i < 6; i++) {
      const { next, out } = step(s, rel(holder));
      s = next;
      const notify = events(out).find((e) => e.type === 'notify');
      granted.push(notify.to);
      holder = notify.to;
    }
    expect(granted).toEqual(['plain1', 'high1', 'high2', 'normal1', 'low1', 'low2']);
  });

  it('a full queue: a higher arrival displaces the newest waiter of the lowest class below it', () => {
    let s = boot({ queueSize: 3 });
    s = steps(
      s,
      req('h'),
      req('low1', 1, 'low'),
      req('low2', 2, 'low'),
      req('n', 3, 'normal'),
    ).next;
    const { next, out } = step(s, req('hi', 4, 'high'));
    expect(table(next).queueOrder()).toEqual(['hi', 'n', 'low1']);
    expect(events(out)).toEqual([
      // Depth 2 after the victim left: 2 s × 3 ÷ 1 = 6 s.
      { type: 'notify', to: 'low2', message: { type: 'displaced', retryAfterS: 6 } },
      expect.objectContaining({
        event: 'displaced',
        measurements: {
          held: 1,
          queued: 2,
          queued_interactive: 0,
          queued_high: 0,
          queued_normal: 1,
          queued_low: 1,
          retry_after: 6,
        },
        metadata: { capacity: 1, queueSize: 3, class: 'low' },
      }),
      expect.objectContaining({
        event: 'queued',
        measurements: expect.objectContaining({ queued: 3, queued_high: 1, queued_low: 1 }),
        metadata: expect.objectContaining({ class: 'high' }),
      }),
      { type: 'reply', callId: 4, payload: { type: 'queued' } },
    ]);
  });

  it('takes the lowest class present even when a nearer class below the arrival has waiters', () => {
    let s = boot({ queueSize: 2 });
    s = steps(s, req('h'), req('n1', 1, 'normal'), req('low1', 2, 'low')).next;
    const { next } = step(s, req('x', 3, 'interactive'));
    expect(table(next).queueOrder()).toEqual(['x', 'n1']);
  });

  it.each([
    ['high', 'high', 'normal'],
    ['low', 'low', 'low'],
    ['interactive', undefined, 'high'],
    ['interactive', undefined, 'interactive'],
  ] as const)(
    'queue full of %s, arrival %s: queue_full, nothing displaced',
    (_, queuedClass, arrival) => {
      let s = boot({ queueSize: 2 });
      s = steps(s, req('h'), req('w1', 1, queuedClass), req('w2', 2, queuedClass)).next;
      const { next, out } = step(s, req('x', 3, arrival === 'interactive' ? undefined : arrival));
      expect(table(next).queueOrder()).toEqual(['w1', 'w2']);
      expect(shape(out)).toEqual([`rejected:${arrival}`, 'reply:queue_full']);
    },
  );

  it('a killed low holder hands its slot to a queued high, not an older low', () => {
    let s = boot({ queueSize: 4 });
    s = steps(s, req('lowHolder', 1, 'low'), req('low1', 2, 'low'), req('high1', 3, 'high')).next;
    const { out } = step(s, { type: 'gone', id: 'lowHolder' });
    expect(shape(out)).toEqual(['released:low', 'notify:high1:granted', 'acquired:high']);
  });
});

describe('limits read per operation', () => {
  function provider(initial: { capacity: number; queueSize: number; renderTimeoutS: number }) {
    const limits = { ...initial };
    return { limits, read: () => ({ ...limits }) };
  }

  it('a raised capacity grants the owed waiters (in order) before the arrival is considered', () => {
    const { limits, read } = provider({ capacity: 1, queueSize: 4, renderTimeoutS: 300 });
    let s = boot({ capacity: undefined, queueSize: undefined, limits: read });
    s = steps(s, req('a'), req('b'), req('c')).next;
    limits.capacity = 3;
    const { next, out } = step(s, req('d', 9));
    expect(shape(out)).toEqual([
      'notify:b:granted',
      'acquired:interactive',
      'notify:c:granted',
      'acquired:interactive',
      'reconsider',
      'queued:interactive',
      'reply:queued',
    ]);
    expect(occupancy(next)).toEqual({ held: ['a', 'b', 'c'], queue: ['d'] });
    expect(telemetry(out)[0].metadata.capacity).toBe(3);
  });

  it('a raised capacity lets a release grant several waiters at once', () => {
    const { limits, read } = provider({ capacity: 1, queueSize: 4, renderTimeoutS: 300 });
    let s = boot({ capacity: undefined, queueSize: undefined, limits: read });
    s = steps(s, req('a'), req('b'), req('c'), req('d')).next;
    limits.capacity = 3;
    const { next, out } = step(s, rel('a'));
    expect(shape(out).filter((x) => x.startsWith('notify'))).toEqual([
      'notify:b:granted',
      'notify:c:granted',
      'notify:d:granted',
    ]);
    expect(occupancy(next)).toEqual({ held: ['b', 'c', 'd'], queue: [] });
  });

  it('a lowered capacity grants nothing until the holders drain below it', () => {
    const { limits, read } = provider({ capacity: 3, queueSize: 4, renderTimeoutS: 300 });
    let s = boot({ capacity: undefined, queueSize: undefined, limits: read });
    s = steps(s, req('a'), req('b'), req('c'), req('w')).next;
    expect(occupancy(s).queue).toEqual(['w']);
    limits.capacity = 1;
    const first = step(s, rel('a'));
    expect(shape(first.out)).toEqual(['released:interactive']);
    const second = step(first.next, rel('b'));
    expect(shape(second.out)).toEqual(['released:interactive']);
    const third = step(second.next, rel('c'));
    expect(shape(third.out)).toEqual([
      'released:interactive',
      'notify:w:granted',
      'acquired:interactive',
    ]);
  });

  it('a lowered queue size refuses arrivals while the queue is above it', () => {
    const { limits, read } = provider({ capacity: 1, queueSize: 3, renderTimeoutS: 300 });
    let s = boot({ capacity: undefined, queueSize: undefined, limits: read });
    s = steps(s, req('a'), req('b'), req('c')).next;
    limits.queueSize = 1;
    expect(shape(step(s, req('d', 1)).out)).toEqual(['rejected:interactive', 'reply:queue_full']);
  });

  it('pinned values win over the provider', () => {
    const read = () => ({ capacity: 5, queueSize: 5, renderTimeoutS: 300 });
    const s = steps(boot({ capacity: 1, queueSize: 0, limits: read }), req('a'), req('b', 2));
    expect(replies(s.out)[0].payload.type).toBe('queue_full');
  });
});

describe('Retry-After', () => {
  const limits = (capacity: number, renderTimeoutS = 300) => ({
    capacity,
    queueSize: 100,
    renderTimeoutS,
  });

  function tableWith(holds: number[], queued: number): SlotTable {
    const t = new SlotTable();
    for (const ms of holds) t.recordHold(ms);
    // Waiters queue only behind a held slot; the holder does not count in the estimate.
    if (queued > 0) t.grant('holder', 0, 0, 1);
    for (let i = 0; i < queued; i++) t.enqueue(`w${i}`, 0, 0, { capacity: 1, queueSize: queued });
    return t;
  }

  it('uses the 2 s placeholder before any hold completed', () => {
    expect(DEFAULT_HOLD_MS).toBe(2_000);
    expect(estimateRetryAfterS(tableWith([], 0), limits(1))).toBe(2);
    expect(estimateRetryAfterS(tableWith([], 0), limits(4))).toBe(1); // 0.5 s, rounded up
  });

  it('is mean hold × (depth + 1) ÷ capacity, rounded up', () => {
    // mean 3000 ms × (4 + 1) ÷ 2 = 7.5 s → 8
    expect(estimateRetryAfterS(tableWith([1_000, 5_000], 4), limits(2))).toBe(8);
    // more waiters ahead, longer wait
    expect(estimateRetryAfterS(tableWith([1_000, 5_000], 0), limits(2))).toBe(2);
  });

  it('is clamped to [1, render timeout]', () => {
    expect(estimateRetryAfterS(tableWith([1], 0), limits(8))).toBe(1);
    expect(estimateRetryAfterS(tableWith([60_000], 50), limits(1, 30))).toBe(30);
  });

  it(`averages only the last ${HOLD_SAMPLES} holds`, () => {
    const t = tableWith([100_000], 0);
    for (let i = 0; i < HOLD_SAMPLES; i++) t.recordHold(1_000);
    expect(t.averageHoldMs()).toBe(1_000);
    expect(estimateRetryAfterS(t, limits(1))).toBe(1);
    t.recordHold(21_000); // one outlier among 20
    expect(t.averageHoldMs()).toBe(2_000);
  });

  it('learns from releases and answers retryAfter with the current estimate', () => {
    let s = boot({ capacity: 1, queueSize: 4 });
    clock = 0;
    s = step(s, req('a')).next;
    clock = 4_000;
    s = steps(s, rel('a'), req('b'), req('c'), req('d')).next;
    // one hold of 4000 ms × (2 queued + 1) ÷ 1 = 12 s
    expect(replies(step(s, { type: 'retryAfter', callId: 1 }).out)[0].payload).toBe(12);
  });
});

describe('stats', () => {
  it('answers held, queued, limits and per-class depths', () => {
    const s = steps(boot({ queueSize: 4 }), req('a'), req('b', 1, 'low'), req('c', 2, 'high')).next;
    expect(replies(step(s, { type: 'stats', callId: 3 }).out)[0].payload).toEqual({
      held: 1,
      queued: 2,
      capacity: 1,
      queueSize: 4,
      queuedByClass: { interactive: 0, high: 1, normal: 0, low: 1 },
    });
  });
});

describe('the mutable table', () => {
  it('is shared by an uncloned input snapshot: why every pure step clones first', () => {
    const s = boot();
    transition(semaphoreMachine, s, req('a'));
    expect(occupancy(s).held).toEqual(['a']);
    const fresh = boot();
    step(fresh, req('a'));
    expect(occupancy(fresh).held).toEqual([]);
  });
});
