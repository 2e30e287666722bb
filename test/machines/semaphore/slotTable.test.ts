// The slot table on its own: each verb keeps the table's invariants or throws, whatever the
// chart asks. Ids are unique; no verb grants past capacity, queues past the bound, or lets a
// waiter stand beside a free slot; grants go to the oldest waiter of the highest class;
// displacement swaps one waiter for another and never touches `interactive`; the counts are
// the sets; and its state is reachable only through its verbs and read-only views.

import { describe, expect, it } from 'vitest';
import { DEFAULT_HOLD_MS, HOLD_SAMPLES, SlotTable } from '../../../src/machines/slotTable.js';

const LIMITS = { capacity: 1, queueSize: 4 };
const [INTERACTIVE, HIGH, NORMAL, LOW] = [0, 1, 2, 3];

/** One holder `h`, then the given waiters (id, rank) in order. */
function table(...waiters: [string, number][]): SlotTable {
  const t = new SlotTable();
  t.grant('h', INTERACTIVE, 0, LIMITS.capacity);
  waiters.forEach(([id, rank], i) => {
    t.enqueue(id, rank, i + 1, LIMITS);
  });
  return t;
}

/** The counts, checked against what they count. */
function counted(t: SlotTable) {
  const holders = [...t.holders.values()];
  expect(t.held).toBe(holders.length);
  expect(t.queued).toBe(t.queueOrder().length);
  expect(t.depths.reduce((a, b) => a + b, 0)).toBe(t.queued);
  expect(t.yieldable).toBe(holders.filter((s) => s.yieldable).length);
  expect(t.preempted).toBe(holders.filter((s) => s.preempted).length);
  return { held: [...t.holders.keys()], queue: t.queueOrder() };
}

describe('grant', () => {
  it('takes a free slot while nobody waits', () => {
    const t = new SlotTable();
    expect(t.grant('a', NORMAL, 5, 2)).toMatchObject({ id: 'a', rank: NORMAL, grantedAt: 5 });
    expect(counted(t)).toEqual({ held: ['a'], queue: [] });
  });

  it('refuses an id already here, a full table, and overtaking a waiter', () => {
    const t = table(['w', LOW]);
    expect(() => t.grant('h', INTERACTIVE, 9, 5)).toThrow(TypeError);
    expect(() => t.grant('w', INTERACTIVE, 9, 5)).toThrow(TypeError);
    expect(() => t.grant('x', INTERACTIVE, 9, 5)).toThrow(/overtake/);
    const full = new SlotTable();
    full.grant('a', INTERACTIVE, 0, 1);
    expect(() => full.grant('b', INTERACTIVE, 0, 1)).toThrow(/no free slot/);
    expect(counted(t)).toEqual({ held: ['h'], queue: ['w'] });
  });

  it('refuses a rank that is no admission class', () => {
    expect(() => new SlotTable().grant('a', 4, 0, 1)).toThrow(RangeError);
    expect(() => new SlotTable().grant('a', -1, 0, 1)).toThrow(RangeError);
  });
});

describe('enqueue', () => {
  it('queues per class, and grantNext serves the oldest of the highest class', () => {
    const t = table(['l1', LOW], ['n1', NORMAL], ['l2', LOW], ['i1', INTERACTIVE]);
    expect(counted(t).queue).toEqual(['i1', 'n1', 'l1', 'l2']);
    t.release('h', 10);
    const order: string[] = [];
    for (let at = 11; t.queued > 0; at++) {
      const granted = t.grantNext(at, 1)!;
      order.push(granted.id);
      expect(granted.grantedAt).toBe(at);
      expect(t.grantNext(at, 1)).toBeUndefined(); // capacity 1: nothing more until a release
      t.release(granted.id, at);
    }
    expect(order).toEqual(['i1', 'n1', 'l1', 'l2']);
  });

  it('refuses an id already here, a full queue, and waiting beside a free slot', () => {
    const t = table(['a', NORMAL], ['b', NORMAL], ['c', NORMAL]);
    expect(() => t.enqueue('a', NORMAL, 9, { capacity: 1, queueSize: 9 })).toThrow(TypeError);
    expect(() => t.enqueue('d', NORMAL, 9, { capacity: 1, queueSize: 3 })).toThrow(/no place/);
    expect(() => t.enqueue('d', NORMAL, 9, { capacity: 2, queueSize: 9 })).toThrow(/slot is free/);
    expect(counted(t)).toEqual({ held: ['h'], queue: ['a', 'b', 'c'] });
  });
});

describe('displace', () => {
  it('swaps the newest waiter of the lowest class below the arrival; `left` sees the gap', () => {
    const t = table(['n1', NORMAL], ['l1', LOW], ['l2', LOW]);
    let seen: unknown;
    const arrival = t.displace('x', HIGH, 9, 1, (victim) => {
      seen = { victim: victim.id, queue: t.queueOrder(), queued: t.queued };
    });
    expect(seen).toEqual({ victim: 'l2', queue: ['n1', 'l1'], queued: 2 });
    expect(arrival).toMatchObject({ id: 'x', rank: HIGH, queuedAt: 9 });
    expect(counted(t)).toEqual({ held: ['h'], queue: ['x', 'n1', 'l1'] });
  });

  it('never displaces interactive, nor anyone of the arrival’s class or above', () => {
    const t = table(['i1', INTERACTIVE], ['n1', NORMAL]);
    expect(t.canDisplaceFor(INTERACTIVE)).toBe(true); // n1 is below
    expect(t.canDisplaceFor(NORMAL)).toBe(false);
    expect(() => t.displace('x', NORMAL, 9, 1, () => {})).toThrow(/nobody below/);
    const all = table(['i1', INTERACTIVE], ['i2', INTERACTIVE]);
    expect(all.canDisplaceFor(INTERACTIVE)).toBe(false);
    expect(counted(t)).toEqual({ held: ['h'], queue: ['i1', 'n1'] });
  });
});

describe('release and drop', () => {
  it('release frees a holder and records its hold; drop takes a waiter out', () => {
    const t = table(['a', NORMAL], ['b', NORMAL]);
    expect(t.averageHoldMs()).toBe(DEFAULT_HOLD_MS);
    expect(t.release('h', 3_000)?.id).toBe('h');
    expect(t.averageHoldMs()).toBe(3_000);
    expect(t.drop('a')?.id).toBe('a');
    expect(t.release('b', 9)).toBeUndefined(); // a waiter is not released
    expect(t.drop('h')).toBeUndefined(); // nor is a holder (gone) dropped
    expect(counted(t)).toEqual({ held: [], queue: ['b'] });
  });

  it(`averages the last ${HOLD_SAMPLES} holds`, () => {
    const t = new SlotTable();
    t.recordHold(100_000);
    for (let i = 0; i < HOLD_SAMPLES; i++) t.recordHold(1_000);
    expect(t.averageHoldMs()).toBe(1_000);
  });
});

describe('orphans', () => {
  it('preemptNext marks the last-granted orphan once per waiter no free slot serves', () => {
    const t = new SlotTable();
    t.grant('old', NORMAL, 1, 2);
    t.grant('new', NORMAL, 2, 2);
    expect(t.orphan('old')).toBe(true);
    expect(t.orphan('new')).toBe(true);
    expect(t.orphan('nobody')).toBe(false);
    expect(t.preemptNext(2)).toBeUndefined(); // nobody waits
    t.enqueue('w', NORMAL, 3, { capacity: 2, queueSize: 2 });
    expect(t.preemptNext(2)?.id).toBe('new');
    expect(t.preemptNext(2)).toBeUndefined(); // one waiter, one preemption
    counted(t);
    expect(t.adopt('new')).toBe(true); // the preemption is forgotten: the other orphan is asked
    expect(t.preempted).toBe(0);
    expect(t.preemptNext(2)?.id).toBe('old');
    t.release('old', 9); // a released orphan leaves its marks with it
    expect([t.yieldable, t.preempted]).toEqual([0, 0]);
    counted(t);
  });
});

describe('transfer', () => {
  it('renames a holder or a waiter in place, and refuses a known target', () => {
    const t = table(['a', NORMAL], ['b', NORMAL], ['c', NORMAL]);
    expect(t.transfer('b', 'b2')).toBe('waiter');
    expect(t.transfer('h', 'h2')).toBe('holder');
    expect(t.transfer('a', 'c')).toBeUndefined();
    expect(t.transfer('nobody', 'z')).toBeUndefined();
    expect(counted(t)).toEqual({ held: ['h2'], queue: ['a', 'b2', 'c'] });
    expect(t.waiters.get('b2')).toMatchObject({ queuedAt: 2, rank: NORMAL });
  });
});

describe('encapsulation', () => {
  it('has no public fields, and its maps are views without setters', () => {
    const t = table(['a', NORMAL]);
    expect(Object.keys(t)).toEqual([]);
    expect(JSON.stringify(t)).toBe('{}');
    const view = t.holders as unknown as Record<string, unknown>;
    expect(view.set).toBeUndefined();
    expect(view.delete).toBeUndefined();
    expect(view.clear).toBeUndefined();
    (t.depths as number[])[NORMAL] = 99; // a copy: the table is not changed through it
    expect(t.depth(NORMAL)).toBe(1);
  });

  it('clone() is deep: changing the copy leaves the original as it was', () => {
    const t = table(['a', NORMAL], ['b', LOW]);
    t.orphan('h');
    const copy = t.clone();
    copy.release('h', 5);
    copy.grantNext(5, 1);
    copy.drop('b');
    expect(counted(t)).toEqual({ held: ['h'], queue: ['a', 'b'] });
    expect(t.holders.get('h')?.yieldable).toBe(true);
    expect(counted(copy)).toEqual({ held: ['a'], queue: [] });
  });
});
