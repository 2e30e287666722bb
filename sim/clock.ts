/**
 * Simulated time: a virtual clock whose timers run only when the scheduler says so.
 *
 * `SimClock` is XState v5's `Clock` (`setTimeout(fn, ms)`, `clearTimeout(id)`) plus `now()`. It is
 * handed to every actor that takes a clock or a `now` (the semaphore, the process supervisor, the
 * waiting room), and `install()` puts the same timers in place of the global `setTimeout` family
 * for the length of a run, so the runtime's own waits (a call's timeout, the registry's, the
 * default clock of every coordinator, render and tee) are simulated too. Nothing in a run waits
 * for real time: a 310 s drain bound costs nothing.
 *
 * ## Invariants
 * - **Time moves only forward, and only in `fireNext`**: to the due time of the timer it runs.
 * - **Ties are the scheduler's choice**: of the timers due at the same instant, `fireNext` runs
 *   the one the run's `Prng` picks, not the oldest, so the seed explores interleavings a FIFO
 *   timer queue would never produce. A timer due later never runs before one due earlier.
 * - **`install` is undone by the function it returns**, whatever the run threw.
 */
import type { Prng } from './prng.js';

interface Timer {
  readonly id: number;
  due: number;
  readonly fn: (...args: unknown[]) => void;
  readonly args: unknown[];
  /** Re-armed after each run (setInterval). */
  readonly every: number | null;
}

export class SimClock {
  #now = 0;
  #seq = 0;
  readonly #timers = new Map<number, Timer>();
  readonly #prng: Prng;

  constructor(prng: Prng) {
    this.#prng = prng;
  }

  now = (): number => this.#now;

  get pending(): number {
    return this.#timers.size;
  }

  setTimeout = (fn: (...args: unknown[]) => void, ms?: number, ...args: unknown[]): number => {
    const id = ++this.#seq;
    const delay = Math.max(0, Number.isFinite(ms) ? (ms as number) : 0);
    this.#timers.set(id, { id, due: this.#now + delay, fn, args, every: null });
    return id;
  };

  setInterval = (fn: (...args: unknown[]) => void, ms?: number, ...args: unknown[]): number => {
    const id = ++this.#seq;
    const every = Math.max(1, Number.isFinite(ms) ? (ms as number) : 1);
    this.#timers.set(id, { id, due: this.#now + every, fn, args, every });
    return id;
  };

  clearTimeout = (id: unknown): void => {
    if (typeof id === 'number') this.#timers.delete(id);
  };

  /** Due time of the next timer, or null when none is armed. */
  nextDue(): number | null {
    let min: number | null = null;
    for (const t of this.#timers.values()) if (min === null || t.due < min) min = t.due;
    return min;
  }

  /** Runs one timer due at the earliest instant (the Prng breaks ties); false when none. */
  fireNext(): boolean {
    const due = this.nextDue();
    if (due === null) return false;
    const ready: Timer[] = [];
    for (const t of this.#timers.values()) if (t.due === due) ready.push(t);
    const timer = ready.length === 1 ? (ready[0] as Timer) : this.#prng.pick(ready);
    this.#now = due;
    if (timer.every === null) this.#timers.delete(timer.id);
    else timer.due = due + timer.every;
    timer.fn(...timer.args);
    return true;
  }

  /** Puts this clock's timers in place of the global ones; returns the undo. */
  install(): () => void {
    const g = globalThis as unknown as Record<string, unknown>;
    const saved = {
      setTimeout: g.setTimeout,
      clearTimeout: g.clearTimeout,
      setInterval: g.setInterval,
      clearInterval: g.clearInterval,
    };
    g.setTimeout = this.setTimeout;
    g.clearTimeout = this.clearTimeout;
    g.setInterval = this.setInterval;
    g.clearInterval = this.clearTimeout;
    return () => Object.assign(g, saved);
  }
}
