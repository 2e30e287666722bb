/**
 * The semaphore's holders and waiters: two maps and one doubly linked FIFO per admission class,
 * changed only through the verbs below, each O(1) but `preemptNext` (O(capacity)). The chart
 * (`semaphore.ts`) decides; the table refuses what would break it, so a wrong decision is an
 * exception in the step that made it, never a quietly bent queue.
 *
 * ## Invariants
 * - **An id is in one place at most**: holding, waiting or unknown. `grant`, `enqueue`,
 *   `displace` and `transfer` throw `TypeError` for an id already here.
 * - **No verb takes a holder past capacity or a waiter past the queue bound**: `grant` needs a
 *   free slot, `enqueue` a free place; `displace` swaps one waiter for another (1 → 1). A lowered
 *   limit is never enforced on those already in (they drain), only on those who come.
 * - **Class order**: a slot is granted to the oldest waiter of the highest class (`grantNext`),
 *   and only when nobody waits may an arrival take one at once (`grant`); `displace` removes
 *   the newest waiter of the lowest class strictly below the arrival's, never an interactive one.
 * - **The counts are the sets**: `held`, `queued`, `depths`, `yieldable` and `preempted` always
 *   equal what they count; each verb moves them with the slot it moves.
 * - **Time is given, never read**: every verb that records a time takes it as `at`.
 *
 * ## Races
 * - None of its own: one actor owns the table and runs one step at a time. A pure `transition()`
 *   mutates the table of the snapshot it is given, so a test hands it `clone()`.
 */

/** Slot-hold durations averaged for Retry-After: smooths one outlier, still tracks a change. */
export const HOLD_SAMPLES = 20;
/** Stands in for the average until a hold completes: a small wrong hint beats none. */
export const DEFAULT_HOLD_MS = 2_000;

/** Admission ranks, 0 (`interactive`) the highest: one per `ADMISSION_CLASSES` entry. */
const RANKS = 4;
const INTERACTIVE = 0;
const LOWEST = RANKS - 1;

/** What the table shows of a participant. Read-only: only the table's verbs change a slot. */
export interface SlotView {
  readonly id: string;
  /** Its admission rank, 0 (`interactive`) first. */
  readonly rank: number;
  /** When it asked; equal to `grantedAt` for an immediate grant. */
  readonly queuedAt: number;
  /** When it was granted (for a waiter: when it asked, until it is granted). */
  readonly grantedAt: number;
  /** A holder running only for the store (`orphan`): it may be preempted. */
  readonly yieldable: boolean;
  /** A yieldable holder already told `preempted`. */
  readonly preempted: boolean;
}

/** One participant: a waiter linked into its class FIFO, then (same object) a holder. */
interface Slot extends SlotView {
  grantedAt: number;
  yieldable: boolean;
  preempted: boolean;
  prev: Slot | undefined;
  next: Slot | undefined;
}

function newSlot(id: string, rank: number, at: number): Slot {
  if (!(Number.isInteger(rank) && rank >= INTERACTIVE && rank <= LOWEST)) {
    throw new RangeError(`admission rank must be 0..${LOWEST}, got ${rank}`);
  }
  return {
    id,
    rank,
    queuedAt: at,
    grantedAt: at,
    yieldable: false,
    preempted: false,
    prev: undefined,
    next: undefined,
  };
}

/** A map shown, not handed over: reading only, so no caller can bypass the verbs. */
class MapView<V> implements ReadonlyMap<string, V> {
  readonly #map: ReadonlyMap<string, V>;
  constructor(map: ReadonlyMap<string, V>) {
    this.#map = map;
  }
  get size(): number {
    return this.#map.size;
  }
  get(id: string): V | undefined {
    return this.#map.get(id);
  }
  has(id: string): boolean {
    return this.#map.has(id);
  }
  keys(): MapIterator<string> {
    return this.#map.keys();
  }
  values(): MapIterator<V> {
    return this.#map.values();
  }
  entries(): MapIterator<[string, V]> {
    return this.#map.entries();
  }
  forEach(fn: (value: V, id: string, map: ReadonlyMap<string, V>) => void): void {
    for (const [id, value] of this.#map) fn(value, id, this);
  }
  [Symbol.iterator](): MapIterator<[string, V]> {
    return this.#map.entries();
  }
}

export class SlotTable {
  readonly #holders = new Map<string, Slot>();
  readonly #waiters = new Map<string, Slot>();
  readonly #holdersView = new MapView<SlotView>(this.#holders);
  readonly #waitersView = new MapView<SlotView>(this.#waiters);
  /** Oldest waiter of each class, indexed by rank. */
  readonly #heads: (Slot | undefined)[] = [undefined, undefined, undefined, undefined];
  /** Newest waiter of each class, indexed by rank. */
  readonly #tails: (Slot | undefined)[] = [undefined, undefined, undefined, undefined];
  readonly #depths: number[] = [0, 0, 0, 0];
  /** Holders marked yieldable, and how many of them were told `preempted`: O(1) checks. */
  #yieldable = 0;
  #preempted = 0;
  /** Ring of the last `HOLD_SAMPLES` hold durations (ms). */
  readonly #samples = new Float64Array(HOLD_SAMPLES);
  #sampleCount = 0;
  #sampleNext = 0;

  // ---- reading ------------------------------------------------------------------------------

  get held(): number {
    return this.#holders.size;
  }

  get queued(): number {
    return this.#waiters.size;
  }

  /** Waiters of the class of `rank`. */
  depth(rank: number): number {
    return this.#depths[rank] ?? 0;
  }

  /** Waiters per class, indexed by rank (a copy: `depth(rank)` reads one without one). */
  get depths(): readonly number[] {
    return [...this.#depths];
  }

  /** Holders marked yieldable (`orphan`). */
  get yieldable(): number {
    return this.#yieldable;
  }

  /** Yieldable holders already told `preempted`. */
  get preempted(): number {
    return this.#preempted;
  }

  /** Holders by id, in grant order (a transferred holder counts as granted at its transfer). */
  get holders(): ReadonlyMap<string, SlotView> {
    return this.#holdersView;
  }

  /** Waiters by id, in arrival order across classes (`queueOrder()` gives the grant order). */
  get waiters(): ReadonlyMap<string, SlotView> {
    return this.#waitersView;
  }

  knows(id: string): boolean {
    return this.#holders.has(id) || this.#waiters.has(id);
  }

  holds(id: string): boolean {
    return this.#holders.has(id);
  }

  waits(id: string): boolean {
    return this.#waiters.has(id);
  }

  /** Whether an arrival of `rank` would find a waiter to displace. */
  canDisplaceFor(rank: number): boolean {
    return this.#victimFor(rank) !== undefined;
  }

  /** Waiter ids in grant order, walking the FIFOs (O(queue); tests and debugging). */
  queueOrder(): string[] {
    const ids: string[] = [];
    for (let rank = INTERACTIVE; rank <= LOWEST; rank++) {
      for (let slot = this.#heads[rank]; slot; slot = slot.next) ids.push(slot.id);
    }
    return ids;
  }

  /** The mean of the last `HOLD_SAMPLES` holds, or `DEFAULT_HOLD_MS` before the first one. */
  averageHoldMs(): number {
    if (this.#sampleCount === 0) return DEFAULT_HOLD_MS;
    let sum = 0;
    for (let i = 0; i < this.#sampleCount; i++) sum += this.#samples[i]!;
    return sum / this.#sampleCount;
  }

  // ---- verbs --------------------------------------------------------------------------------

  /** `id` takes a free slot at once: only while nobody waits for one. */
  grant(id: string, rank: number, at: number, capacity: number): SlotView {
    this.#assertNew(id);
    if (this.#waiters.size > 0) {
      throw new RangeError(`slot table: ${id} may not overtake ${this.#waiters.size} waiter(s)`);
    }
    if (this.#holders.size >= capacity) {
      throw new RangeError(`slot table: no free slot for ${id} (${capacity} held)`);
    }
    const slot = newSlot(id, rank, at);
    this.#holders.set(id, slot);
    return slot;
  }

  /** `id` joins the back of its class's FIFO: only when no slot is free and the queue has room. */
  enqueue(
    id: string,
    rank: number,
    at: number,
    limits: { readonly capacity: number; readonly queueSize: number },
  ): SlotView {
    this.#assertNew(id);
    this.#assertNoFreeSlot(id, limits.capacity);
    if (this.#waiters.size >= limits.queueSize) {
      throw new RangeError(`slot table: no place for ${id} (${this.#waiters.size} waiting)`);
    }
    const slot = newSlot(id, rank, at);
    this.#link(slot);
    return slot;
  }

  /**
   * `id` takes the place of the newest waiter of the lowest class strictly below `rank` (never
   * an interactive one): the queue keeps its length. `left` runs once that waiter is out and
   * before `id` is in, so what it reads of the table is the queue the victim left.
   */
  displace(
    id: string,
    rank: number,
    at: number,
    capacity: number,
    left: (victim: SlotView) => void,
  ): SlotView {
    this.#assertNew(id);
    this.#assertNoFreeSlot(id, capacity);
    const arrival = newSlot(id, rank, at);
    const victim = this.#victimFor(rank);
    if (victim === undefined) throw new RangeError(`slot table: nobody below rank ${rank} waits`);
    this.#unlink(victim);
    left(victim);
    this.#link(arrival);
    return arrival;
  }

  /** Grant-next: the oldest waiter of the highest class becomes a holder, if a slot is free. */
  grantNext(at: number, capacity: number): SlotView | undefined {
    if (this.#holders.size >= capacity) return undefined;
    let slot: Slot | undefined;
    for (let rank = INTERACTIVE; rank <= LOWEST && slot === undefined; rank++) {
      slot = this.#heads[rank];
    }
    if (slot === undefined) return undefined;
    this.#unlink(slot);
    slot.grantedAt = at;
    this.#holders.set(slot.id, slot);
    return slot;
  }

  /** A holder gives its slot back at `at`: its hold is recorded. Undefined if `id` holds none. */
  release(id: string, at: number): SlotView | undefined {
    const slot = this.#holders.get(id);
    if (slot === undefined) return undefined;
    this.#holders.delete(id);
    this.#setYieldable(slot, false);
    this.recordHold(at - slot.grantedAt);
    return slot;
  }

  /** A waiter leaves its FIFO; no slot is freed. Undefined if `id` waits for none. */
  drop(id: string): SlotView | undefined {
    const slot = this.#waiters.get(id);
    if (slot !== undefined) this.#unlink(slot);
    return slot;
  }

  /** Marks a holder yieldable (it renders only for the store). False if `id` holds none. */
  orphan(id: string): boolean {
    const slot = this.#holders.get(id);
    if (slot !== undefined) this.#setYieldable(slot, true);
    return slot !== undefined;
  }

  /** Unmarks a holder; a preemption it was sent is forgotten. False if `id` holds none. */
  adopt(id: string): boolean {
    const slot = this.#holders.get(id);
    if (slot !== undefined) this.#setYieldable(slot, false);
    return slot !== undefined;
  }

  /**
   * If more wait than the free slots and the preemptions already sent will serve, marks the
   * yieldable holder not yet asked that was granted last (it rendered least; older orphans,
   * nearer their commit, finish) as `preempted` and returns it. O(1) while none is yieldable.
   */
  preemptNext(capacity: number): SlotView | undefined {
    if (this.#yieldable === this.#preempted) return undefined;
    const free = Math.max(0, capacity - this.#holders.size);
    if (this.#waiters.size <= free + this.#preempted) return undefined;
    let victim: Slot | undefined;
    for (const slot of this.#holders.values()) {
      if (!slot.yieldable || slot.preempted) continue;
      if (victim === undefined || slot.grantedAt >= victim.grantedAt) victim = slot;
    }
    if (victim === undefined) return undefined;
    victim.preempted = true;
    this.#preempted++;
    return victim;
  }

  /**
   * Gives `from`'s place (a held slot, or a place in its FIFO) to `to`, keeping its class and
   * times: occupancy never changes. Undefined (nothing moved) if `from` is unknown or `to` known.
   */
  transfer(from: string, to: string): 'holder' | 'waiter' | undefined {
    if (this.knows(to)) return undefined;
    const held = this.#holders.get(from);
    if (held) {
      this.#holders.delete(from);
      this.#holders.set(to, { ...held, id: to, prev: undefined, next: undefined });
      return 'holder';
    }
    const waiting = this.#waiters.get(from);
    if (!waiting) return undefined;
    const moved: Slot = { ...waiting, id: to };
    if (moved.prev) moved.prev.next = moved;
    else this.#heads[moved.rank] = moved;
    if (moved.next) moved.next.prev = moved;
    else this.#tails[moved.rank] = moved;
    this.#waiters.delete(from);
    this.#waiters.set(to, moved);
    return 'waiter';
  }

  /** Adds one hold duration (ms) to the Retry-After average; `release` calls it. */
  recordHold(ms: number): void {
    this.#samples[this.#sampleNext] = ms;
    this.#sampleNext = (this.#sampleNext + 1) % HOLD_SAMPLES;
    if (this.#sampleCount < HOLD_SAMPLES) this.#sampleCount++;
  }

  /** A deep copy, for a pure `transition()` test to consume instead of the original. */
  clone(): SlotTable {
    const copy = new SlotTable();
    for (const [id, slot] of this.#holders) copy.#holders.set(id, { ...slot });
    copy.#yieldable = this.#yieldable;
    copy.#preempted = this.#preempted;
    for (let rank = INTERACTIVE; rank <= LOWEST; rank++) {
      for (let slot = this.#heads[rank]; slot; slot = slot.next) copy.#link({ ...slot });
    }
    copy.#samples.set(this.#samples);
    copy.#sampleCount = this.#sampleCount;
    copy.#sampleNext = this.#sampleNext;
    return copy;
  }

  // ---- the structure ------------------------------------------------------------------------

  #assertNew(id: string): void {
    if (this.knows(id)) throw new TypeError(`slot table: ${id} already holds or waits`);
  }

  /** Nobody waits beside a free slot: a free one is granted (`grant`, `grantNext`) instead. */
  #assertNoFreeSlot(id: string, capacity: number): void {
    if (this.#holders.size < capacity) {
      throw new RangeError(`slot table: ${id} may not wait while a slot is free`);
    }
  }

  /** Appends a waiter to its class FIFO. */
  #link(slot: Slot): void {
    const tail = this.#tails[slot.rank];
    slot.prev = tail;
    slot.next = undefined;
    if (tail) tail.next = slot;
    else this.#heads[slot.rank] = slot;
    this.#tails[slot.rank] = slot;
    this.#depths[slot.rank]!++;
    this.#waiters.set(slot.id, slot);
  }

  /** Unlinks a waiter wherever it sits in its FIFO: O(1), and no tombstone is left. */
  #unlink(slot: Slot): void {
    if (slot.prev) slot.prev.next = slot.next;
    else this.#heads[slot.rank] = slot.next;
    if (slot.next) slot.next.prev = slot.prev;
    else this.#tails[slot.rank] = slot.prev;
    slot.prev = slot.next = undefined;
    this.#depths[slot.rank]!--;
    this.#waiters.delete(slot.id);
  }

  /** Marks or unmarks a holder; unmarking also forgets a preemption sent to it. */
  #setYieldable(slot: Slot, yieldable: boolean): void {
    if (slot.yieldable === yieldable) return;
    slot.yieldable = yieldable;
    this.#yieldable += yieldable ? 1 : -1;
    if (!yieldable && slot.preempted) {
      slot.preempted = false;
      this.#preempted--;
    }
  }

  /** The newest waiter of the lowest class strictly below `rank`; never an interactive one. */
  #victimFor(rank: number): Slot | undefined {
    for (let candidate = LOWEST; candidate > rank && candidate > INTERACTIVE; candidate--) {
      const tail = this.#tails[candidate];
      if (tail) return tail;
    }
    return undefined;
  }
}
