/**
 * The turn budget: stages run at once while a loop turn has budget, wait in FIFO order once it is
 * spent, are released a budget's worth per later turn, and none is ever lost. The clock is a
 * variable the test moves; stages "cost" time by advancing it.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TurnBudget } from '../../src/http/turns.js';

const nextTurn = () => new Promise<void>((r) => setImmediate(r));

describe('TurnBudget', () => {
  it('lets stages through at once while the turn has budget', () => {
    let now = 0;
    const turns = new TurnBudget(8, () => now);
    expect(turns.pass()).toBeUndefined();
    now = 7.9;
    expect(turns.pass()).toBeUndefined();
    expect(turns.deferred).toBe(0);
  });

  it('defers stages past the budget and releases them in arrival order in later turns', async () => {
    let now = 0;
    const turns = new TurnBudget(8, () => now);
    expect(turns.pass()).toBeUndefined();
    now = 8;
    const order: number[] = [];
    const waits = [1, 2, 3, 4, 5].map((n) => {
      const w = turns.pass();
      expect(w).toBeInstanceOf(Promise);
      // Each released stage costs 3 ms of the next turn's budget.
      return w!.then(() => {
        order.push(n);
        now += 3;
      });
    });
    expect(turns.waiting).toBe(5);
    await nextTurn(); // the drain was scheduled first, so it has run one turn's worth
    // One turn of 8 ms releases three 3 ms stages (0, 3, 6 < 8), not all five.
    expect(order).toEqual([1, 2, 3]);
    await Promise.all(waits);
    expect(order).toEqual([1, 2, 3, 4, 5]);
    expect(turns.waiting).toBe(0);
    expect(turns.deferred).toBe(5);
  });

  it('counts a released stage whole, not only up to its first await', async () => {
    let now = 0;
    const turns = new TurnBudget(8, () => now);
    expect(turns.pass()).toBeUndefined();
    now = 8;
    const order: number[] = [];
    const waits = [1, 2, 3, 4, 5].map(async (n) => {
      await turns.pass();
      order.push(n);
      // The stage's cost lands a few promise hops after its release, as a route's stages do.
      await null;
      await null;
      now += 3;
    });
    await nextTurn();
    expect(order).toEqual([1, 2, 3]);
    await Promise.all(waits);
    expect(order).toEqual([1, 2, 3, 4, 5]);
  });

  it('sends a newcomer behind the waiters even when the clock says there is budget', async () => {
    let now = 0;
    const turns = new TurnBudget(8, () => now);
    turns.pass();
    now = 10;
    const order: string[] = [];
    const first = turns.pass()!.then(() => order.push('first'));
    now = 0; // a clock that went back must not let anyone overtake a waiter
    const second = turns.pass();
    expect(second).toBeInstanceOf(Promise);
    await Promise.all([first, second!.then(() => order.push('second'))]);
    expect(order).toEqual(['first', 'second']);
  });

  it('opens a fresh budget in a later turn once nobody waits', async () => {
    let now = 0;
    const turns = new TurnBudget(8, () => now);
    turns.pass();
    now = 100;
    await turns.pass();
    await nextTurn();
    await nextTurn();
    expect(turns.pass()).toBeUndefined();
  });

  it('refuses a budget that is not positive', () => {
    expect(() => new TurnBudget(0)).toThrow(RangeError);
    expect(() => new TurnBudget(Number.NaN)).toThrow(RangeError);
  });

  it('releases every stage exactly once, in order, whatever the costs (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            cost: fc.double({ min: 0, max: 20, noNaN: true }),
            yieldAfter: fc.boolean(),
          }),
          {
            minLength: 1,
            maxLength: 60,
          },
        ),
        async (stages) => {
          let now = 0;
          const turns = new TurnBudget(8, () => now);
          const ran: number[] = [];
          const runs = stages.map(async (s, i) => {
            const w = turns.pass();
            if (w) await w;
            ran.push(i);
            now += s.cost;
          });
          await Promise.all(runs);
          expect(ran).toEqual(stages.map((_, i) => i));
          expect(turns.waiting).toBe(0);
        },
      ),
      { numRuns: 50 },
    );
  });
});
