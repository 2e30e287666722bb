/**
 * The render-slot budget: at most `capacity` encoders at once and at most `queueSize` waiting
 * behind them. Every request is answered by the step that receives it; waiters are granted only
 * by the step that frees a slot, so no handler ever waits for anything.
 *
 * ## Invariants
 * - **held <= capacity**, unless capacity was lowered: then nothing is granted until it drains.
 * - **waiters <= queueSize**; the class FIFOs hold exactly the waiters, each once.
 * - **An id is in one place at most**: holding, waiting or unknown. Asking again: `already_held`.
 * - **A freed slot goes to the oldest waiter of the highest non-empty class**. No class given
 *   means `interactive`, so traffic that names none is plain FIFO.
 * - **`interactive` is never displaced**: a full queue gives an arrival the place of the newest
 *   waiter of the lowest class strictly below its own, or refuses it.
 * - **held/queued in every telemetry event are the values after that event.**
 * - **An orphan never makes a waiter wait**: a holder marked `orphaned` (its render goes on only
 *   for the variant store) is told `preempted` as soon as a waiter is queued that no free slot
 *   and no earlier preemption will serve; at most one preemption per waiter is outstanding.
 *   The preempted holder gives its slot back by the normal `release`, which grants the waiter.
 *
 * ## Races
 * - *Capacity raised while waiters queue*: a request first grants what the new limit owes the
 *   waiters (`slotsOwed`) and is then reconsidered, so an arrival never overtakes them.
 * - *Grant after the caller gave up*: the client releases and drops what its inbox got
 *   (`services/semaphoreClient.ts`); releasing a holder frees the slot, so none leaks.
 * - *Holder or waiter goes away*: `gone` takes the branches of `release`; a displaced or
 *   released id is unknown afterwards, so a late `gone` for it changes nothing.
 * - *Preempted, then adopted* (a listener joined the orphan while `preempted` was on its way):
 *   `adopted` clears the marks and the next orphan, if any, is asked instead; the holder ignores
 *   a `preempted` that finds it listened to. A holder that finishes instead of yielding just
 *   releases: the waiter is granted all the same.
 * - *A reserved slot changes hands* (a waiting-room ticket's render claims it): `transfer` renames
 *   the holder or the waiter in place, so occupancy goes 1 → 1 and no arrival can take the slot
 *   between a release and a request. A `to` that already holds or waits is refused (`unknown`).
 *
 * ## A mutable table, safely
 * Holders and waiters live in a `SlotTable` (two maps, one doubly linked FIFO per class): every
 * operation is O(1) and no event copies the queue. Each step is one `enqueueActions` that
 * mutates the table and queues that step's emits; the actor is the only writer and handles one
 * event at a time. So: clone before a pure `transition()` test (`cloneSemaphoreSnapshot`), as
 * the input snapshot's table is mutated; the snapshot object is reused and not persistable.
 *
 * ## Events (emitted `telemetry`, published by `telemetry/channels.ts`)
 * | Event | Measurements besides held, queued, queued_<class> | When |
 * |---|---|---|
 * | `acquired` | `wait` (ms, 0 if immediate) | a slot was taken, at once or after queueing |
 * | `queued` / `abandoned` | — | a caller joined the queue / a waiter left before its turn |
 * | `rejected` | `retry_after` (s, as answered) | the queue was full |
 * | `released` | `duration` (ms held) | a holder gave its slot back or went away |
 * | `displaced` | `retry_after` (s, as told to the victim) | a waiter lost its place to a higher class |
 * | `preempted` | `duration` (ms the orphan had held) | an orphaned holder was told to yield to a waiter |
 * Metadata is `{ capacity, queueSize, class }`, `class` being whoever the event is about. An
 * event is built only when the `telemetry` input says someone wants it (default: always; the
 * proxy asks its diagnostics channels), so an unobserved step emits nothing but its replies.
 */
import { enqueueActions, setup } from 'xstate';
import {
  answer,
  type CallEnvelope,
  type NotifyEvent,
  type Outbox,
  type ReplyEvent,
} from '../core/protocol.js';
import { DEFAULT_RENDER_TIMEOUT_S } from '../core/worker.js';

/** Admission classes, highest first. The order is the ranking. */
export const ADMISSION_CLASSES = ['interactive', 'high', 'normal', 'low'] as const;
export type AdmissionClass = (typeof ADMISSION_CLASSES)[number];

/** Slot-hold durations averaged for Retry-After: smooths one outlier, still tracks a change. */
export const HOLD_SAMPLES = 20;
/** Stands in for the average until a hold completes: a small wrong hint beats none. */
export const DEFAULT_HOLD_MS = 2_000;

/** What the config provider answers. Read on every operation, never cached. */
export interface SemaphoreLimits {
  readonly capacity: number;
  readonly queueSize: number;
  readonly renderTimeoutS: number;
}

export interface SemaphoreInput {
  /** Pins the slot count (tests); otherwise `limits().capacity` is read per operation. */
  readonly capacity?: number;
  /** Pins the queue bound (tests); otherwise `limits().queueSize` is read per operation. */
  readonly queueSize?: number;
  /** Pins the Retry-After ceiling (s); otherwise `limits().renderTimeoutS`. @default 300 */
  readonly renderTimeoutS?: number;
  /** The config provider. Required unless capacity and queueSize are both pinned. */
  readonly limits?: () => SemaphoreLimits;
  /** Monotonic milliseconds. @default performance.now */
  readonly now?: () => number;
  /**
   * Asked before each telemetry event is built: `false` skips it (no object, no emit). The proxy
   * answers from its diagnostics channels, so a step nobody observes costs nothing extra.
   * @default every event is emitted
   */
  readonly telemetry?: (event: SemaphoreTelemetryName) => boolean;
}

export type RequestOutcome =
  | { readonly type: 'granted' }
  | { readonly type: 'queued' }
  | { readonly type: 'queue_full'; readonly retryAfterS: number }
  | { readonly type: 'already_held' };

/** Sent later, through `notify`, to a participant that was told `queued`. */
export type WaiterMessage =
  | { readonly type: 'granted' }
  | { readonly type: 'displaced'; readonly retryAfterS: number };

/** Sent through `notify` to a holder that declared itself `orphaned`: give the slot back. */
export type HolderMessage = { readonly type: 'preempted' };

/** Everything the semaphore notifies a slot id of. */
export type SlotMessage = WaiterMessage | HolderMessage;

export interface SemaphoreStats {
  readonly held: number;
  readonly queued: number;
  readonly capacity: number;
  readonly queueSize: number;
  readonly queuedByClass: Readonly<Record<AdmissionClass, number>>;
}

export type SemaphoreEvent =
  | ({ type: 'request'; id: string; class?: AdmissionClass } & CallEnvelope)
  | ({ type: 'release'; id: string } & CallEnvelope)
  | { type: 'gone'; id: string; reason?: unknown }
  | ({ type: 'retryAfter' } & CallEnvelope)
  | ({ type: 'stats' } & CallEnvelope)
  /** Reply `{ type: 'transferred', as: 'holder' | 'waiter' }`, or `{ type: 'unknown' }`. */
  | ({ type: 'transfer'; from: string; to: string } & CallEnvelope)
  /** The holder now runs only for the store: it may be preempted for a waiter. Reply `ok`. */
  | ({ type: 'orphaned'; id: string } & CallEnvelope)
  /** The holder has a listener again: it is not to be preempted. Reply `ok`. */
  | ({ type: 'adopted'; id: string } & CallEnvelope);

export type SemaphoreTelemetryName =
  | 'acquired'
  | 'queued'
  | 'rejected'
  | 'released'
  | 'abandoned'
  | 'displaced'
  | 'preempted';

export interface SemaphoreMeasurements {
  held: number;
  queued: number;
  queued_interactive: number;
  queued_high: number;
  queued_normal: number;
  queued_low: number;
  wait?: number;
  retry_after?: number;
  duration?: number;
}

export interface SemaphoreTelemetry {
  readonly type: 'telemetry';
  readonly event: SemaphoreTelemetryName;
  readonly measurements: Readonly<SemaphoreMeasurements>;
  readonly metadata: {
    readonly capacity: number;
    readonly queueSize: number;
    readonly class: AdmissionClass;
  };
}

export type SemaphoreEmitted = ReplyEvent<unknown> | NotifyEvent<SlotMessage> | SemaphoreTelemetry;

const RANK: Readonly<Record<string, number>> = { interactive: 0, high: 1, normal: 2, low: 3 };
const INTERACTIVE = 0;
const LOWEST = ADMISSION_CLASSES.length - 1;

/** One participant: a waiter linked into its class FIFO, then (same object) a holder. */
export interface Slot {
  readonly id: string;
  readonly rank: number;
  /** When it asked; equal to `grantedAt` for an immediate grant. */
  readonly queuedAt: number;
  grantedAt: number;
  /** A holder running only for the store (`orphaned`): it may be preempted. */
  yieldable: boolean;
  /** A yieldable holder already told `preempted` (counted in `SlotTable.preempted`). */
  preempted: boolean;
  prev: Slot | undefined;
  next: Slot | undefined;
}

/** Holders and waiters, mutated in place by the machine's steps only; see the header. */
export class SlotTable {
  readonly holders = new Map<string, Slot>();
  readonly waiters = new Map<string, Slot>();
  /** Oldest waiter of each class, indexed by rank. */
  readonly heads: (Slot | undefined)[] = [undefined, undefined, undefined, undefined];
  /** Newest waiter of each class, indexed by rank. */
  readonly tails: (Slot | undefined)[] = [undefined, undefined, undefined, undefined];
  readonly depths: number[] = [0, 0, 0, 0];
  /** Holders marked yieldable, and how many of them were told `preempted`: O(1) checks. */
  yieldable = 0;
  preempted = 0;
  /** Ring of the last `HOLD_SAMPLES` hold durations (ms). */
  readonly samples = new Float64Array(HOLD_SAMPLES);
  sampleCount = 0;
  sampleNext = 0;

  /** Appends a waiter to its class FIFO. */
  enqueue(slot: Slot): void {
    const tail = this.tails[slot.rank];
    slot.prev = tail;
    slot.next = undefined;
    if (tail) tail.next = slot;
    else this.heads[slot.rank] = slot;
    this.tails[slot.rank] = slot;
    this.depths[slot.rank]!++;
    this.waiters.set(slot.id, slot);
  }

  /** Unlinks a waiter wherever it sits in its FIFO: O(1), and no tombstone is left. */
  unlink(slot: Slot): void {
    if (slot.prev) slot.prev.next = slot.next;
    else this.heads[slot.rank] = slot.next;
    if (slot.next) slot.next.prev = slot.prev;
    else this.tails[slot.rank] = slot.prev;
    slot.prev = slot.next = undefined;
    this.depths[slot.rank]!--;
    this.waiters.delete(slot.id);
  }

  /** Removes a holder, keeping the yieldable/preempted counts right. */
  removeHolder(slot: Slot): void {
    this.holders.delete(slot.id);
    this.setYieldable(slot, false);
  }

  /** Marks or unmarks a holder as yieldable; unmarking also forgets a preemption sent to it. */
  setYieldable(slot: Slot, yieldable: boolean): void {
    if (slot.yieldable === yieldable) return;
    slot.yieldable = yieldable;
    this.yieldable += yieldable ? 1 : -1;
    if (!yieldable && slot.preempted) {
      slot.preempted = false;
      this.preempted--;
    }
  }

  /**
   * The yieldable holder not yet preempted that was granted last: it has rendered the least,
   * so cancelling it wastes the least work, and older orphans, nearer their commit, finish.
   * O(capacity), and only called while some holder is yieldable.
   */
  preemptionVictim(): Slot | undefined {
    let victim: Slot | undefined;
    for (const slot of this.holders.values()) {
      if (!slot.yieldable || slot.preempted) continue;
      if (victim === undefined || slot.grantedAt >= victim.grantedAt) victim = slot;
    }
    return victim;
  }

  /**
   * Gives `from`'s place (a held slot, or a place in its FIFO) to `to`, keeping its class and
   * times: occupancy never changes, so no other participant can be granted in between.
   */
  rename(from: string, to: string): 'holder' | 'waiter' | undefined {
    const held = this.holders.get(from);
    if (held) {
      this.holders.delete(from);
      this.holders.set(to, { ...held, id: to, prev: undefined, next: undefined });
      return 'holder';
    }
    const waiting = this.waiters.get(from);
    if (!waiting) return undefined;
    const moved: Slot = { ...waiting, id: to };
    if (moved.prev) moved.prev.next = moved;
    else this.heads[moved.rank] = moved;
    if (moved.next) moved.next.prev = moved;
    else this.tails[moved.rank] = moved;
    this.waiters.delete(from);
    this.waiters.set(to, moved);
    return 'waiter';
  }

  /** The oldest waiter of the highest non-empty class. */
  nextWaiter(): Slot | undefined {
    for (let rank = INTERACTIVE; rank <= LOWEST; rank++) {
      const head = this.heads[rank];
      if (head) return head;
    }
    return undefined;
  }

  /** The newest waiter of the lowest class strictly below `rank`; never an interactive one. */
  victimFor(rank: number): Slot | undefined {
    for (let candidate = LOWEST; candidate > rank && candidate > INTERACTIVE; candidate--) {
      const tail = this.tails[candidate];
      if (tail) return tail;
    }
    return undefined;
  }

  recordHold(ms: number): void {
    this.samples[this.sampleNext] = ms;
    this.sampleNext = (this.sampleNext + 1) % HOLD_SAMPLES;
    if (this.sampleCount < HOLD_SAMPLES) this.sampleCount++;
  }

  averageHoldMs(): number {
    if (this.sampleCount === 0) return DEFAULT_HOLD_MS;
    let sum = 0;
    for (let i = 0; i < this.sampleCount; i++) sum += this.samples[i]!;
    return sum / this.sampleCount;
  }

  /** Waiter ids in grant order, walking the FIFOs (O(queue); tests and debugging). */
  queueOrder(): string[] {
    const ids: string[] = [];
    for (let rank = INTERACTIVE; rank <= LOWEST; rank++) {
      for (let slot = this.heads[rank]; slot; slot = slot.next) ids.push(slot.id);
    }
    return ids;
  }

  /** A deep copy, for a pure `transition()` test to consume instead of the original. */
  clone(): SlotTable {
    const copy = new SlotTable();
    for (const [id, slot] of this.holders) copy.holders.set(id, { ...slot });
    copy.yieldable = this.yieldable;
    copy.preempted = this.preempted;
    for (let rank = INTERACTIVE; rank <= LOWEST; rank++) {
      for (let slot = this.heads[rank]; slot; slot = slot.next) copy.enqueue({ ...slot });
    }
    copy.samples.set(this.samples);
    copy.sampleCount = this.sampleCount;
    copy.sampleNext = this.sampleNext;
    return copy;
  }
}

/** Where limits and time come from: fixed at start; the provider inside is read per use. */
export interface SemaphoreConfig {
  readonly pinned: Partial<SemaphoreLimits>;
  /** The limits when there is no provider: one frozen object instead of one per operation. */
  readonly fixed: SemaphoreLimits | undefined;
  readonly limits: (() => SemaphoreLimits) | undefined;
  readonly now: () => number;
  /** Whether anyone wants this telemetry event now; see `SemaphoreInput.telemetry`. */
  readonly wants: (event: SemaphoreTelemetryName) => boolean;
}

export interface SemaphoreContext {
  readonly table: SlotTable;
  readonly config: SemaphoreConfig;
}

/** The limits in force for this operation: pinned values win over the provider's. */
export function limitsOf({ pinned, fixed, limits }: SemaphoreConfig): SemaphoreLimits {
  if (fixed !== undefined) return fixed;
  const read = limits!();
  return {
    capacity: pinned.capacity ?? read.capacity,
    queueSize: pinned.queueSize ?? read.queueSize,
    renderTimeoutS: pinned.renderTimeoutS ?? read.renderTimeoutS,
  };
}

const capacityOf = (config: SemaphoreConfig): number =>
  config.pinned.capacity ?? config.limits!().capacity;
const queueSizeOf = (config: SemaphoreConfig): number =>
  config.pinned.queueSize ?? config.limits!().queueSize;

/**
 * Seconds to come back after: mean hold × (depth + 1) ÷ capacity, rounded up, clamped to
 * [1, render timeout]. `depth + 1` counts the caller being told: every waiter is ahead of it.
 */
export function estimateRetryAfterS(table: SlotTable, limits: SemaphoreLimits): number {
  const seconds = Math.ceil(
    (table.averageHoldMs() * (table.waiters.size + 1)) / Math.max(1, limits.capacity) / 1_000,
  );
  return Math.min(Math.max(seconds, 1), limits.renderTimeoutS);
}

/** One telemetry event, with the table's counts as they are now (after the change). */
function telemetry(
  table: SlotTable,
  limits: SemaphoreLimits,
  event: SemaphoreTelemetryName,
  rank: number,
): {
  type: 'telemetry';
  event: SemaphoreTelemetryName;
  measurements: SemaphoreMeasurements;
  metadata: SemaphoreTelemetry['metadata'];
} {
  const depths = table.depths;
  return {
    type: 'telemetry',
    event,
    measurements: {
      held: table.holders.size,
      queued: table.waiters.size,
      queued_interactive: depths[0]!,
      queued_high: depths[1]!,
      queued_normal: depths[2]!,
      queued_low: depths[3]!,
    },
    metadata: {
      capacity: limits.capacity,
      queueSize: limits.queueSize,
      class: ADMISSION_CLASSES[rank]!,
    },
  };
}

type RequestEvent = Extract<SemaphoreEvent, { type: 'request' }>;
type IdEvent = Extract<SemaphoreEvent, { id: string }>;
type TransferEvent = Extract<SemaphoreEvent, { type: 'transfer' }>;
/** What a step hands XState: its emits, in order, and (for a call) one reply. */
export type SemaphoreOutbox = Outbox<SemaphoreEmitted>;

const GRANTED: RequestOutcome = Object.freeze({ type: 'granted' });
const QUEUED: RequestOutcome = Object.freeze({ type: 'queued' });
const ALREADY_HELD: RequestOutcome = Object.freeze({ type: 'already_held' });
const OK = Object.freeze({ type: 'ok' as const });
const GRANT_MESSAGE: WaiterMessage = Object.freeze({ type: 'granted' });
const PREEMPT_MESSAGE: HolderMessage = Object.freeze({ type: 'preempted' });

function rankOf(event: RequestEvent): number {
  if (event.class === undefined) return INTERACTIVE;
  const rank = RANK[event.class];
  // The client throws on an unknown class before sending; one arriving here is a caller's bug.
  if (rank === undefined) throw new TypeError(`unknown admission class ${String(event.class)}`);
  return rank;
}

function newSlot(id: string, rank: number, now: number): Slot {
  return {
    id,
    rank,
    queuedAt: now,
    grantedAt: now,
    yieldable: false,
    preempted: false,
    prev: undefined,
    next: undefined,
  };
}

/**
 * Grant-next: while a slot is free and someone waits, the oldest waiter of the highest class
 * becomes a holder and is told so. Usually one grant; several when capacity was raised.
 */
function grantWaiters(out: SemaphoreOutbox, { table, config }: SemaphoreContext): void {
  for (;;) {
    const limits = limitsOf(config);
    if (table.holders.size >= limits.capacity) return;
    const slot = table.nextWaiter();
    if (slot === undefined) return;
    table.unlink(slot);
    slot.grantedAt = config.now();
    table.holders.set(slot.id, slot);
    out.emit({ type: 'notify', to: slot.id, message: GRANT_MESSAGE });
    if (!config.wants('acquired')) continue;
    const acquired = telemetry(table, limits, 'acquired', slot.rank);
    acquired.measurements.wait = slot.grantedAt - slot.queuedAt;
    out.emit(acquired);
  }
}

function enqueueWaiter(out: SemaphoreOutbox, context: SemaphoreContext, event: RequestEvent) {
  const { table, config } = context;
  const slot = newSlot(event.id, rankOf(event), config.now());
  table.enqueue(slot);
  if (config.wants('queued')) out.emit(telemetry(table, limitsOf(config), 'queued', slot.rank));
  answer(out, event, QUEUED);
  preemptOrphans(out, context);
}

/**
 * Orphans yield: while more waiters queue than free slots and preemptions already sent will
 * serve, the last-granted orphan not yet asked is told `preempted`. O(1) when none is marked.
 */
function preemptOrphans(out: SemaphoreOutbox, { table, config }: SemaphoreContext): void {
  if (table.yieldable === table.preempted) return;
  for (;;) {
    const limits = limitsOf(config);
    const free = Math.max(0, limits.capacity - table.holders.size);
    if (table.waiters.size <= free + table.preempted) return;
    const victim = table.preemptionVictim();
    if (victim === undefined) return;
    victim.preempted = true;
    table.preempted++;
    out.emit({ type: 'notify', to: victim.id, message: PREEMPT_MESSAGE });
    if (!config.wants('preempted')) continue;
    const preempted = telemetry(table, limits, 'preempted', victim.rank);
    preempted.measurements.duration = config.now() - victim.grantedAt;
    out.emit(preempted);
  }
}

/** Removes a holder (release or gone), records its hold, and grants what that frees. */
function releaseHolder(out: SemaphoreOutbox, context: SemaphoreContext, event: IdEvent): void {
  const { table, config } = context;
  const slot = table.holders.get(event.id)!;
  table.removeHolder(slot);
  const duration = config.now() - slot.grantedAt;
  table.recordHold(duration);
  if (config.wants('released')) {
    const released = telemetry(table, limitsOf(config), 'released', slot.rank);
    released.measurements.duration = duration;
    out.emit(released);
  }
  grantWaiters(out, context);
  answer(out, event, OK);
}

/** Removes a waiter from its FIFO (release or gone). Nothing is granted: no slot was freed. */
function dropWaiter(
  out: SemaphoreOutbox,
  { table, config }: SemaphoreContext,
  event: IdEvent,
): void {
  const slot = table.waiters.get(event.id)!;
  table.unlink(slot);
  if (config.wants('abandoned')) {
    out.emit(telemetry(table, limitsOf(config), 'abandoned', slot.rank));
  }
  answer(out, event, OK);
}

export const semaphoreMachine = setup({
  types: {
    context: {} as SemaphoreContext,
    events: {} as SemaphoreEvent,
    input: {} as SemaphoreInput,
    emitted: {} as SemaphoreEmitted,
  },
  guards: {
    isKnown: ({ context, event }) => {
      const { id } = event as IdEvent;
      return context.table.holders.has(id) || context.table.waiters.has(id);
    },
    isHolder: ({ context, event }) => context.table.holders.has((event as IdEvent).id),
    isWaiter: ({ context, event }) => context.table.waiters.has((event as IdEvent).id),
    /** `from` holds or waits, and `to` is nobody yet. */
    transferable: ({ context: { table }, event }) => {
      const { from, to } = event as TransferEvent;
      const known = (id: string) => table.holders.has(id) || table.waiters.has(id);
      return known(from) && !known(to);
    },
    /** A slot is free and nobody is waiting for it. */
    slotFree: ({ context: { table, config } }) =>
      table.waiters.size === 0 && table.holders.size < capacityOf(config),
    /** A slot is free but someone waits: only after a raise of capacity. */
    slotsOwed: ({ context: { table, config } }) => table.holders.size < capacityOf(config),
    queueHasRoom: ({ context: { table, config } }) => table.waiters.size < queueSizeOf(config),
    outranksAWaiter: ({ context, event }) =>
      context.table.victimFor(rankOf(event as RequestEvent)) !== undefined,
  },
  actions: {
    answerAlreadyHeld: enqueueActions(({ event, enqueue }) => answer(enqueue, event, ALREADY_HELD)),
    /** Serves the waiters first, then handles the same request again. */
    grantOwedThenReconsider: enqueueActions(({ context, event, enqueue }) => {
      grantWaiters(enqueue, context);
      enqueue.raise(event);
    }),
    grant: enqueueActions(({ context: { table, config }, event, enqueue }) => {
      const { id } = event as RequestEvent;
      const slot = newSlot(id, rankOf(event as RequestEvent), config.now());
      table.holders.set(id, slot);
      if (config.wants('acquired')) {
        const acquired = telemetry(table, limitsOf(config), 'acquired', slot.rank);
        acquired.measurements.wait = 0;
        enqueue.emit(acquired);
      }
      answer(enqueue, event, GRANTED);
    }),
    enqueue: enqueueActions(({ context, event, enqueue }) =>
      enqueueWaiter(enqueue, context, event as RequestEvent),
    ),
    /** The victim's Retry-After counts the queue after it left, before the arrival joins. */
    displaceAndEnqueue: enqueueActions(({ context, event, enqueue }) => {
      const { table, config } = context;
      const limits = limitsOf(config);
      const victim = table.victimFor(rankOf(event as RequestEvent))!;
      table.unlink(victim);
      const retryAfterS = estimateRetryAfterS(table, limits);
      enqueue.emit({
        type: 'notify',
        to: victim.id,
        message: { type: 'displaced', retryAfterS },
      });
      if (config.wants('displaced')) {
        const displaced = telemetry(table, limits, 'displaced', victim.rank);
        displaced.measurements.retry_after = retryAfterS;
        enqueue.emit(displaced);
      }
      enqueueWaiter(enqueue, context, event as RequestEvent);
    }),
    refuse: enqueueActions(({ context: { table, config }, event, enqueue }) => {
      const limits = limitsOf(config);
      const retryAfterS = estimateRetryAfterS(table, limits);
      if (config.wants('rejected')) {
        const rejected = telemetry(table, limits, 'rejected', rankOf(event as RequestEvent));
        rejected.measurements.retry_after = retryAfterS;
        enqueue.emit(rejected);
      }
      answer(enqueue, event, { type: 'queue_full', retryAfterS });
    }),
    releaseHolder: enqueueActions(({ context, event, enqueue }) =>
      releaseHolder(enqueue, context, event as IdEvent),
    ),
    dropWaiter: enqueueActions(({ context, event, enqueue }) =>
      dropWaiter(enqueue, context, event as IdEvent),
    ),
    answerOk: enqueueActions(({ event, enqueue }) => answer(enqueue, event, OK)),
    transfer: enqueueActions(({ context, event, enqueue }) => {
      const { from, to } = event as TransferEvent;
      const as = context.table.rename(from, to)!;
      answer(enqueue, event, { type: 'transferred', as });
    }),
    /** Marks the holder yieldable, then lets it yield at once if a waiter is owed a slot. */
    markOrphaned: enqueueActions(({ context, event, enqueue }) => {
      const { table } = context;
      table.setYieldable(table.holders.get((event as IdEvent).id)!, true);
      preemptOrphans(enqueue, context);
      answer(enqueue, event, OK);
    }),
    /** Unmarks it; a preemption it had been sent is forgotten, so another orphan is asked. */
    markAdopted: enqueueActions(({ context, event, enqueue }) => {
      const { table } = context;
      table.setYieldable(table.holders.get((event as IdEvent).id)!, false);
      preemptOrphans(enqueue, context);
      answer(enqueue, event, OK);
    }),
    answerUnknown: enqueueActions(({ event, enqueue }) =>
      answer(enqueue, event, { type: 'unknown' }),
    ),
    answerRetryAfter: enqueueActions(({ context, event, enqueue }) =>
      answer(enqueue, event, estimateRetryAfterS(context.table, limitsOf(context.config))),
    ),
    answerStats: enqueueActions(({ context: { table, config }, event, enqueue }) => {
      const limits = limitsOf(config);
      const [interactive, high, normal, low] = table.depths as [number, number, number, number];
      const stats: SemaphoreStats = {
        held: table.holders.size,
        queued: table.waiters.size,
        capacity: limits.capacity,
        queueSize: limits.queueSize,
        queuedByClass: { interactive, high, normal, low },
      };
      answer(enqueue, event, stats);
    }),
  },
}).createMachine({
  id: 'semaphore',
  context: ({ input }) => contextFrom(input),
  initial: 'serving',
  states: {
    // One flat state: nothing here ever waits, so there is nothing else to be in.
    serving: {
      on: {
        request: [
          { guard: 'isKnown', actions: 'answerAlreadyHeld' },
          { guard: 'slotFree', actions: 'grant' },
          { guard: 'slotsOwed', actions: 'grantOwedThenReconsider' },
          { guard: 'queueHasRoom', actions: 'enqueue' },
          { guard: 'outranksAWaiter', actions: 'displaceAndEnqueue' },
          { actions: 'refuse' },
        ],
        release: [
          { guard: 'isHolder', actions: 'releaseHolder' },
          { guard: 'isWaiter', actions: 'dropWaiter' },
          { actions: 'answerOk' },
        ],
        gone: [
          { guard: 'isHolder', actions: 'releaseHolder' },
          { guard: 'isWaiter', actions: 'dropWaiter' },
        ],
        // A reserved slot handed to the request that claims it (the waiting room): 1 → 1.
        transfer: [{ guard: 'transferable', actions: 'transfer' }, { actions: 'answerUnknown' }],
        // A render kept only for the store (and back): see "An orphan never makes a waiter wait".
        orphaned: [{ guard: 'isHolder', actions: 'markOrphaned' }, { actions: 'answerOk' }],
        adopted: [{ guard: 'isHolder', actions: 'markAdopted' }, { actions: 'answerOk' }],
        retryAfter: { actions: 'answerRetryAfter' },
        stats: { actions: 'answerStats' },
      },
    },
  },
});

const ALWAYS = () => true;

function contextFrom(input: SemaphoreInput): SemaphoreContext {
  const { capacity, queueSize, renderTimeoutS, limits } = input;
  if (capacity !== undefined && !(Number.isInteger(capacity) && capacity > 0)) {
    throw new RangeError(`capacity must be a positive integer, got ${capacity}`);
  }
  if (queueSize !== undefined && !(Number.isInteger(queueSize) && queueSize >= 0)) {
    throw new RangeError(`queueSize must be an integer >= 0, got ${queueSize}`);
  }
  if (renderTimeoutS !== undefined && !(Number.isInteger(renderTimeoutS) && renderTimeoutS > 0)) {
    throw new RangeError(`renderTimeoutS must be a positive integer, got ${renderTimeoutS}`);
  }
  if (limits === undefined && (capacity === undefined || queueSize === undefined)) {
    throw new TypeError('semaphoreMachine needs `limits`, or both `capacity` and `queueSize`');
  }
  const pinned: Partial<SemaphoreLimits> = {};
  if (capacity !== undefined) Object.assign(pinned, { capacity });
  if (queueSize !== undefined) Object.assign(pinned, { queueSize });
  if (renderTimeoutS !== undefined) Object.assign(pinned, { renderTimeoutS });
  const fixed =
    limits === undefined
      ? Object.freeze({
          capacity: capacity!,
          queueSize: queueSize!,
          renderTimeoutS: renderTimeoutS ?? DEFAULT_RENDER_TIMEOUT_S,
        })
      : undefined;
  return {
    table: new SlotTable(),
    config: {
      pinned,
      fixed,
      limits,
      now: input.now ?? (() => performance.now()),
      wants: input.telemetry ?? ALWAYS,
    },
  };
}

/** The same snapshot over a deep copy of its table: feed this to `transition()`. */
export function cloneSemaphoreSnapshot<S extends { context: SemaphoreContext }>(snapshot: S): S {
  return {
    ...snapshot,
    context: { ...snapshot.context, table: snapshot.context.table.clone() },
  };
}
