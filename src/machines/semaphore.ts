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
 * ## One reading of the world per step
 * Time and the limits enter a step once. An event may carry them as its `step` (`at`, `limits`,
 * and which telemetry it builds): then nothing else is read, and `transition()` on that event is
 * a function of its arguments (`purity.test.ts` changes the clock, the provider and the filter
 * between two calls and gets the same table and actions). An unstamped event reads the clock
 * and the provider at most once, when its step first needs them; the reading is kept in one
 * reused record (`config.reading`) for that step's guards and action, so it allocates nothing,
 * and the action that ends the step clears it.
 *
 * ## A mutable table, safely
 * Holders and waiters live in a `SlotTable` (`slotTable.ts`: private maps, one doubly linked
 * FIFO per class, verbs that refuse what would break its invariants): every operation is O(1)
 * and no event copies the queue. Each step is one `enqueueActions` that calls the table's verbs
 * and queues that step's emits; the actor is the only writer and handles one event at a time.
 * So: clone before a pure `transition()` test (`cloneSemaphoreSnapshot`), as the input
 * snapshot's table is mutated; the snapshot object is reused and not persistable.
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
import { SlotTable } from './slotTable.js';

export { DEFAULT_HOLD_MS, HOLD_SAMPLES, SlotTable, type SlotView } from './slotTable.js';

/** Admission classes, highest first. The order is the ranking. */
export const ADMISSION_CLASSES = ['interactive', 'high', 'normal', 'low'] as const;
export type AdmissionClass = (typeof ADMISSION_CLASSES)[number];

/** What the config provider answers. Read once per unstamped step, never across steps. */
export interface SemaphoreLimits {
  readonly capacity: number;
  readonly queueSize: number;
  readonly renderTimeoutS: number;
}

export interface SemaphoreInput {
  /** Pins the slot count (tests); otherwise `limits().capacity` is read once per step. */
  readonly capacity?: number;
  /** Pins the queue bound (tests); otherwise `limits().queueSize` is read once per step. */
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

export type SemaphoreEvent = Stamped<
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
  | ({ type: 'adopted'; id: string } & CallEnvelope)
>;

/** Every event may carry its `step`: see `SemaphoreStep`. */
type Stamped<E> = E & { readonly step?: SemaphoreStep };

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

/**
 * What one step reads of the world. A sender may stamp it on any event (`step`); then the step
 * reads nothing else, and `transition()` on that event is a function of its arguments.
 */
export interface SemaphoreStep {
  /** Monotonic ms: when the step happens. Every time the step records is this one. */
  readonly at: number;
  /** The limits in force for the whole step. */
  readonly limits: SemaphoreLimits;
  /** Which telemetry events the step builds (`observedMask`). @default all of them */
  readonly observed?: number;
}

const TELEMETRY_BIT: Readonly<Record<SemaphoreTelemetryName, number>> = {
  acquired: 1,
  queued: 2,
  rejected: 4,
  released: 8,
  abandoned: 16,
  displaced: 32,
  preempted: 64,
};
const ALL_OBSERVED = 127;

/** The `observed` mask of a step from a filter: what a stamping sender writes. */
export function observedMask(wants: (event: SemaphoreTelemetryName) => boolean): number {
  let mask = 0;
  for (const [name, bit] of Object.entries(TELEMETRY_BIT)) {
    if (wants(name as SemaphoreTelemetryName)) mask |= bit;
  }
  return mask;
}

/**
 * The step being handled: its event and what it read. One per machine, reused: reading the
 * world allocates nothing, and every guard and action of a step sees the same values.
 */
interface Reading {
  /** The event this reading belongs to; `undefined` between steps. */
  event: SemaphoreEvent | undefined;
  at: number;
  limits: SemaphoreLimits;
  /** The stamped mask, or -1: ask the filter per event built (an unstamped step). */
  observed: number;
}

/** Where limits and time come from: fixed at start; the provider inside is read once per step. */
export interface SemaphoreConfig {
  readonly pinned: Partial<SemaphoreLimits>;
  /** The limits when there is no provider: one frozen object instead of one per step. */
  readonly fixed: SemaphoreLimits | undefined;
  readonly limits: (() => SemaphoreLimits) | undefined;
  readonly now: () => number;
  /** Whether anyone wants this telemetry event now; see `SemaphoreInput.telemetry`. */
  readonly wants: (event: SemaphoreTelemetryName) => boolean;
  /** The current step's reading (see `readingOf`); a cache, never a decision. */
  readonly reading: Reading;
}

export interface SemaphoreContext {
  readonly table: SlotTable;
  readonly config: SemaphoreConfig;
}

/** The limits in force now: pinned values win over the provider's. Reads the provider. */
export function limitsOf({ pinned, fixed, limits }: SemaphoreConfig): SemaphoreLimits {
  if (fixed !== undefined) return fixed;
  const read = limits!();
  return {
    capacity: pinned.capacity ?? read.capacity,
    queueSize: pinned.queueSize ?? read.queueSize,
    renderTimeoutS: pinned.renderTimeoutS ?? read.renderTimeoutS,
  };
}

/**
 * The step's reading: the event's own `step` if stamped, else the clock and the provider read
 * once, when the step first needs them; every later guard and action of the step gets the
 * same object. The action that ends the step calls `endStep`, so a sender that reuses an event
 * object later reads the world afresh.
 */
function readingOf(config: SemaphoreConfig, event: SemaphoreEvent): Reading {
  const reading = config.reading;
  if (reading.event === event) return reading;
  reading.event = event;
  const { step } = event;
  if (step !== undefined) {
    reading.at = step.at;
    reading.limits = step.limits;
    reading.observed = step.observed ?? ALL_OBSERVED;
  } else {
    reading.at = config.now();
    reading.limits = limitsOf(config);
    reading.observed = -1;
  }
  return reading;
}

function endStep(config: SemaphoreConfig): void {
  config.reading.event = undefined;
}

/** Whether the step builds this telemetry event: the stamped mask, else the filter now. */
function observes(config: SemaphoreConfig, name: SemaphoreTelemetryName): boolean {
  const { observed } = config.reading;
  return observed === -1 ? config.wants(name) : (observed & TELEMETRY_BIT[name]) !== 0;
}

/**
 * Seconds to come back after: mean hold × (depth + 1) ÷ capacity, rounded up, clamped to
 * [1, render timeout]. `depth + 1` counts the caller being told: every waiter is ahead of it.
 */
export function estimateRetryAfterS(table: SlotTable, limits: SemaphoreLimits): number {
  const seconds = Math.ceil(
    (table.averageHoldMs() * (table.queued + 1)) / Math.max(1, limits.capacity) / 1_000,
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
  return {
    type: 'telemetry',
    event,
    measurements: {
      held: table.held,
      queued: table.queued,
      queued_interactive: table.depth(0),
      queued_high: table.depth(1),
      queued_normal: table.depth(2),
      queued_low: table.depth(3),
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

/**
 * Grant-next: while a slot is free and someone waits, the oldest waiter of the highest class
 * becomes a holder and is told so. Usually one grant; several when capacity was raised.
 */
function grantWaiters(out: SemaphoreOutbox, { table, config }: SemaphoreContext): void {
  const { at, limits } = config.reading;
  for (;;) {
    const slot = table.grantNext(at, limits.capacity);
    if (slot === undefined) return;
    out.emit({ type: 'notify', to: slot.id, message: GRANT_MESSAGE });
    if (!observes(config, 'acquired')) continue;
    const acquired = telemetry(table, limits, 'acquired', slot.rank);
    acquired.measurements.wait = slot.grantedAt - slot.queuedAt;
    out.emit(acquired);
  }
}

/** After `id` joined the queue: its telemetry and reply, then any preemption it calls for. */
function queuedReply(
  out: SemaphoreOutbox,
  context: SemaphoreContext,
  event: RequestEvent,
  rank: number,
): void {
  const { table, config } = context;
  if (observes(config, 'queued')) {
    out.emit(telemetry(table, config.reading.limits, 'queued', rank));
  }
  answer(out, event, QUEUED);
  preemptOrphans(out, context);
}

/**
 * Orphans yield: while more waiters queue than free slots and preemptions already sent will
 * serve, the last-granted orphan not yet asked is told `preempted`. O(1) when none is marked.
 */
function preemptOrphans(out: SemaphoreOutbox, { table, config }: SemaphoreContext): void {
  const { at, limits } = config.reading;
  for (;;) {
    const victim = table.preemptNext(limits.capacity);
    if (victim === undefined) return;
    out.emit({ type: 'notify', to: victim.id, message: PREEMPT_MESSAGE });
    if (!observes(config, 'preempted')) continue;
    const preempted = telemetry(table, limits, 'preempted', victim.rank);
    preempted.measurements.duration = at - victim.grantedAt;
    out.emit(preempted);
  }
}

/** Removes a holder (release or gone), records its hold, and grants what that frees. */
function releaseHolder(out: SemaphoreOutbox, context: SemaphoreContext, event: IdEvent): void {
  const { table, config } = context;
  const { at, limits } = readingOf(config, event);
  const slot = table.release(event.id, at)!;
  if (observes(config, 'released')) {
    const released = telemetry(table, limits, 'released', slot.rank);
    released.measurements.duration = at - slot.grantedAt;
    out.emit(released);
  }
  grantWaiters(out, context);
  answer(out, event, OK);
  endStep(config);
}

/** Removes a waiter from its FIFO (release or gone). Nothing is granted: no slot was freed. */
function dropWaiter(
  out: SemaphoreOutbox,
  { table, config }: SemaphoreContext,
  event: IdEvent,
): void {
  const { limits } = readingOf(config, event);
  const slot = table.drop(event.id)!;
  if (observes(config, 'abandoned')) out.emit(telemetry(table, limits, 'abandoned', slot.rank));
  answer(out, event, OK);
  endStep(config);
}

export const semaphoreMachine = setup({
  types: {
    context: {} as SemaphoreContext,
    events: {} as SemaphoreEvent,
    input: {} as SemaphoreInput,
    emitted: {} as SemaphoreEmitted,
  },
  guards: {
    isKnown: ({ context, event }) => context.table.knows((event as IdEvent).id),
    isHolder: ({ context, event }) => context.table.holds((event as IdEvent).id),
    isWaiter: ({ context, event }) => context.table.waits((event as IdEvent).id),
    /** `from` holds or waits, and `to` is nobody yet. */
    transferable: ({ context: { table }, event }) => {
      const { from, to } = event as TransferEvent;
      return table.knows(from) && !table.knows(to);
    },
    /** A slot is free and nobody is waiting for it. */
    slotFree: ({ context: { table, config }, event }) =>
      table.queued === 0 && table.held < readingOf(config, event).limits.capacity,
    /** A slot is free but someone waits: only after a raise of capacity. */
    slotsOwed: ({ context: { table, config }, event }) =>
      table.held < readingOf(config, event).limits.capacity,
    queueHasRoom: ({ context: { table, config }, event }) =>
      table.queued < readingOf(config, event).limits.queueSize,
    outranksAWaiter: ({ context, event }) =>
      context.table.canDisplaceFor(rankOf(event as RequestEvent)),
  },
  actions: {
    answerAlreadyHeld: enqueueActions(({ event, enqueue }) => answer(enqueue, event, ALREADY_HELD)),
    /**
     * Serves the waiters first, then handles the same request again, in the same step: the
     * reading stays, so the reconsidered request sees the limits the grants saw.
     */
    grantOwedThenReconsider: enqueueActions(({ context, event, enqueue }) => {
      readingOf(context.config, event);
      grantWaiters(enqueue, context);
      enqueue.raise(event);
    }),
    grant: enqueueActions(({ context: { table, config }, event, enqueue }) => {
      const { at, limits } = readingOf(config, event);
      const slot = table.grant(
        (event as RequestEvent).id,
        rankOf(event as RequestEvent),
        at,
        limits.capacity,
      );
      if (observes(config, 'acquired')) {
        const acquired = telemetry(table, limits, 'acquired', slot.rank);
        acquired.measurements.wait = 0;
        enqueue.emit(acquired);
      }
      answer(enqueue, event, GRANTED);
      endStep(config);
    }),
    enqueue: enqueueActions(({ context, event, enqueue }) => {
      const { table, config } = context;
      const request = event as RequestEvent;
      const { at, limits } = readingOf(config, event);
      const rank = rankOf(request);
      table.enqueue(request.id, rank, at, limits);
      queuedReply(enqueue, context, request, rank);
      endStep(config);
    }),
    /** The victim's Retry-After counts the queue after it left, before the arrival joins. */
    displaceAndEnqueue: enqueueActions(({ context, event, enqueue }) => {
      const { table, config } = context;
      const request = event as RequestEvent;
      const { at, limits } = readingOf(config, event);
      const rank = rankOf(request);
      table.displace(request.id, rank, at, limits.capacity, (victim) => {
        const retryAfterS = estimateRetryAfterS(table, limits);
        enqueue.emit({
          type: 'notify',
          to: victim.id,
          message: { type: 'displaced', retryAfterS },
        });
        if (!observes(config, 'displaced')) return;
        const displaced = telemetry(table, limits, 'displaced', victim.rank);
        displaced.measurements.retry_after = retryAfterS;
        enqueue.emit(displaced);
      });
      queuedReply(enqueue, context, request, rank);
      endStep(config);
    }),
    refuse: enqueueActions(({ context: { table, config }, event, enqueue }) => {
      const { limits } = readingOf(config, event);
      const retryAfterS = estimateRetryAfterS(table, limits);
      if (observes(config, 'rejected')) {
        const rejected = telemetry(table, limits, 'rejected', rankOf(event as RequestEvent));
        rejected.measurements.retry_after = retryAfterS;
        enqueue.emit(rejected);
      }
      answer(enqueue, event, { type: 'queue_full', retryAfterS });
      endStep(config);
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
      const as = context.table.transfer(from, to)!;
      answer(enqueue, event, { type: 'transferred', as });
    }),
    /** Marks the holder yieldable, then lets it yield at once if a waiter is owed a slot. */
    markOrphaned: enqueueActions(({ context, event, enqueue }) => {
      const { table, config } = context;
      readingOf(config, event);
      table.orphan((event as IdEvent).id);
      preemptOrphans(enqueue, context);
      answer(enqueue, event, OK);
      endStep(config);
    }),
    /** Unmarks it; a preemption it had been sent is forgotten, so another orphan is asked. */
    markAdopted: enqueueActions(({ context, event, enqueue }) => {
      const { table, config } = context;
      readingOf(config, event);
      table.adopt((event as IdEvent).id);
      preemptOrphans(enqueue, context);
      answer(enqueue, event, OK);
      endStep(config);
    }),
    answerUnknown: enqueueActions(({ event, enqueue }) =>
      answer(enqueue, event, { type: 'unknown' }),
    ),
    answerRetryAfter: enqueueActions(({ context: { table, config }, event, enqueue }) => {
      answer(enqueue, event, estimateRetryAfterS(table, readingOf(config, event).limits));
      endStep(config);
    }),
    answerStats: enqueueActions(({ context: { table, config }, event, enqueue }) => {
      const { limits } = readingOf(config, event);
      const stats: SemaphoreStats = {
        held: table.held,
        queued: table.queued,
        capacity: limits.capacity,
        queueSize: limits.queueSize,
        queuedByClass: {
          interactive: table.depth(0),
          high: table.depth(1),
          normal: table.depth(2),
          low: table.depth(3),
        },
      };
      answer(enqueue, event, stats);
      endStep(config);
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
      reading: { event: undefined, at: 0, limits: fixed ?? EMPTY_LIMITS, observed: -1 },
    },
  };
}

const EMPTY_LIMITS: SemaphoreLimits = Object.freeze({
  capacity: 0,
  queueSize: 0,
  renderTimeoutS: DEFAULT_RENDER_TIMEOUT_S,
});

/**
 * The same snapshot over a deep copy of its table (and a reading of its own): feed this to
 * `transition()`, which mutates the table it is given.
 */
export function cloneSemaphoreSnapshot<S extends { context: SemaphoreContext }>(snapshot: S): S {
  const { table, config } = snapshot.context;
  return {
    ...snapshot,
    context: {
      table: table.clone(),
      config: { ...config, reading: { ...config.reading, event: undefined } },
    },
  };
}
