/**
 * Bounds how much request work one event-loop turn does, so a burst cannot starve the loop.
 *
 * A request's path is a chain of short synchronous stages between awaits (parse and sign, look
 * the variant up, resolve the source, probe, admit). Node runs every stage that became ready in
 * one turn back to back: thousands of file-system completions land in a single turn during a
 * burst, and the turn then lasts seconds while `/health` and every stream wait behind it. The
 * handler calls `pass()` at the start of each stage. While the turn's budget lasts (and nobody is
 * waiting) it answers `undefined` and the stage runs at once, costing one clock read; past the
 * budget the stage waits in a FIFO, and the rest are let through a budget's worth per later turn,
 * after the loop has polled its sockets again.
 *
 * ## Invariants
 * - **Work-conserving and FIFO**: a stage is deferred only while the turn is over budget or
 *   others wait before it; the waiters are released in arrival order, one at a time.
 * - **A turn releases about `budgetMs` of stages**: each released stage runs as far as it can
 *   without waiting (all the promise reactions it chains, up to I/O or its next `pass()`) before
 *   the clock is read again and the next is released.
 * - **Nothing is dropped**: a deferred stage always runs; admission and refusal stay the
 *   semaphore's business, this only orders the CPU.
 *
 * ## Races
 * - *A stage reaches `pass()` while the queue drains*: it joins the back of the queue, behind
 *   the stages already waiting, so a request cannot overtake by arriving mid-drain.
 * - *The turn ends with nobody over budget*: the budget is measured from the first stage of a
 *   turn and re-armed by a `setImmediate` (the check phase, after this turn's I/O callbacks).
 */

/** Request work one loop turn may do before later stages wait for the next turn, in ms. */
export const TURN_BUDGET_MS = 1;

/** Released slots at the queue's front are dropped once this many accumulate. */
const COMPACT_AT = 1_024; // amortised O(1) per waiter, and the array never grows without bound

export class TurnBudget {
  readonly #budgetMs: number;
  readonly #now: () => number;
  #waiting: Array<() => void> = [];
  #head = 0;
  /** When this turn's first stage ran, or -1 when no stage ran yet this turn. */
  #turnStart = -1;
  #rearmScheduled = false;
  #drainScheduled = false;
  #deferred = 0;

  constructor(budgetMs: number = TURN_BUDGET_MS, now: () => number = () => performance.now()) {
    if (!(budgetMs > 0)) throw new RangeError(`budgetMs must be > 0, got ${String(budgetMs)}`);
    this.#budgetMs = budgetMs;
    this.#now = now;
  }

  /** `undefined`: go on now. A promise: go on when it resolves (a later turn). */
  pass(): Promise<void> | undefined {
    if (this.#head === this.#waiting.length) {
      const t = this.#now();
      if (this.#turnStart < 0) {
        this.#turnStart = t;
        this.#rearm();
      }
      if (t - this.#turnStart < this.#budgetMs) return undefined;
    }
    this.#deferred += 1;
    return new Promise<void>((resolve) => {
      this.#waiting.push(resolve);
      this.#scheduleDrain();
    });
  }

  /** Stages waiting now. */
  get waiting(): number {
    return this.#waiting.length - this.#head;
  }

  /** Stages deferred to a later turn since creation. */
  get deferred(): number {
    return this.#deferred;
  }

  #rearm(): void {
    if (this.#rearmScheduled) return;
    this.#rearmScheduled = true;
    setImmediate(() => {
      this.#rearmScheduled = false;
      if (!this.#drainScheduled) this.#turnStart = -1;
    });
  }

  #scheduleDrain(): void {
    if (this.#drainScheduled) return;
    this.#drainScheduled = true;
    setImmediate(this.#drain);
  }

  readonly #drain = (): void => {
    this.#drainScheduled = false;
    this.#turnStart = this.#now();
    // As a microtask, so the tick `#step` queues runs after the released stage's microtasks
    // (from a macrotask, Node would run that tick first).
    queueMicrotask(this.#step);
  };

  /** Releases one waiter, then (after its stage ran) looks at the clock again. */
  readonly #step = (): void => {
    if (this.#head === this.#waiting.length) {
      this.#waiting = [];
      this.#head = 0;
      // The next stage opens a fresh budget: a turn does at most the drain's plus one more.
      this.#turnStart = -1;
      return;
    }
    if (this.#now() - this.#turnStart >= this.#budgetMs) {
      this.#scheduleDrain();
      return;
    }
    const release = this.#waiting[this.#head]!;
    this.#head += 1;
    if (this.#head >= COMPACT_AT && this.#head * 2 >= this.#waiting.length) {
      this.#waiting = this.#waiting.slice(this.#head);
      this.#head = 0;
    }
    release();
    // The clock is read again once the released stage has run as far as it can without waiting:
    // every promise reaction it chains (this microtask checkpoint drains them all before any
    // tick) and the ticks it queued before this one. A microtask alone would run after only its
    // first hop, and the rest of each stage would pile up behind later releases unmeasured.
    process.nextTick(this.#afterTick);
  };

  /** Back to a microtask for the next step, so the stages it releases are not held behind ticks. */
  readonly #afterTick = (): void => {
    queueMicrotask(this.#step);
  };
}
