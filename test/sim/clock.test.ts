/**
 * The simulator's scheduler parts: the seeded generator and the simulated clock. Time moves only
 * in `fireNext`, never backwards; ties are the seed's choice (different seeds order them
 * differently, the same seed the same way); `install` is undone by its return.
 */
import { describe, expect, it } from 'vitest';
import { SimClock } from '../../sim/clock.js';
import { Prng } from '../../sim/prng.js';

describe('Prng', () => {
  it('is a function of its seed', () => {
    const a = new Prng(42);
    const b = new Prng(42);
    const c = new Prng(43);
    const xs = Array.from({ length: 8 }, () => a.next());
    expect(Array.from({ length: 8 }, () => b.next())).toEqual(xs);
    expect(Array.from({ length: 8 }, () => c.next())).not.toEqual(xs);
  });

  it('never sticks at zero, whatever the seed', () => {
    for (const seed of [0, -1, 2 ** 31, 0x9e3779b9 * -1]) {
      const r = new Prng(seed);
      expect(new Set(Array.from({ length: 16 }, () => r.next())).size).toBeGreaterThan(1);
    }
  });

  it('draws within bounds', () => {
    const r = new Prng(7);
    for (let i = 0; i < 1_000; i++) {
      const n = r.int(3, 9);
      expect(n).toBeGreaterThanOrEqual(3);
      expect(n).toBeLessThanOrEqual(9);
    }
  });
});

function order(seed: number): string[] {
  const clock = new SimClock(new Prng(seed));
  const ran: string[] = [];
  for (const name of ['a', 'b', 'c', 'd']) clock.setTimeout(() => ran.push(name), 10);
  clock.setTimeout(() => ran.push('later'), 11);
  clock.setTimeout(() => ran.push('first'), 5);
  while (clock.fireNext()) {}
  return ran;
}

describe('SimClock', () => {
  it('runs the earliest timer first, ties in the order the seed picks', () => {
    const orders = new Set<string>();
    for (let seed = 1; seed <= 20; seed++) {
      const ran = order(seed);
      expect(ran[0]).toBe('first');
      expect(ran[5]).toBe('later');
      expect(ran.slice(1, 5).sort()).toEqual(['a', 'b', 'c', 'd']);
      expect(order(seed)).toEqual(ran);
      orders.add(ran.join());
    }
    expect(orders.size).toBeGreaterThan(1); // not FIFO
  });

  it('moves time only when a timer runs, to its due time', () => {
    const clock = new SimClock(new Prng(1));
    const seen: number[] = [];
    clock.setTimeout(() => {
      seen.push(clock.now());
      clock.setTimeout(() => seen.push(clock.now()), 0);
    }, 250);
    expect(clock.now()).toBe(0);
    while (clock.fireNext()) {}
    expect(seen).toEqual([250, 250]);
  });

  it('forgets a cleared timer, repeats an interval, passes extra arguments', () => {
    const clock = new SimClock(new Prng(1));
    const ran: unknown[] = [];
    const id = clock.setTimeout(() => ran.push('cleared'), 5);
    clock.clearTimeout(id);
    const every = clock.setInterval((x: unknown) => ran.push(x), 10, 'tick');
    clock.fireNext();
    clock.fireNext();
    clock.clearTimeout(every);
    expect(clock.fireNext()).toBe(false);
    expect(ran).toEqual(['tick', 'tick']);
    expect(clock.now()).toBe(20);
  });

  it('stands in for the global timers until undone', () => {
    const clock = new SimClock(new Prng(1));
    const real = globalThis.setTimeout;
    const restore = clock.install();
    try {
      let fired = false;
      setTimeout(() => {
        fired = true;
      }, 60_000);
      expect(clock.pending).toBe(1);
      clock.fireNext();
      expect(fired).toBe(true);
      expect(clock.now()).toBe(60_000);
    } finally {
      restore();
    }
    expect(globalThis.setTimeout).toBe(real);
  });
});
