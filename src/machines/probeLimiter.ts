/**
 * The probe-slot budget: at most `capacity` ffprobe runs at once, with no queue. A probe is
 * short and its caller is waiting on an HTTP request, so a refusal now (Retry-After 1) beats a
 * wait behind other probes; the pool is separate from the render semaphore, so a probe never
 * waits behind an encoder.
 *
 * ## Invariants
 * - **held <= capacity**, unless capacity was lowered: then nothing is granted until it drains.
 * - **Nothing waits here**: a refused caller is never granted later; the next asker wins.
 * - **An id holds at most one slot**: asking again is `already_held`.
 * - **held in every telemetry event is the value after that event.**
 *
 * ## Races
 * - *Holder goes away without releasing*: `gone` takes the same branch as `release`, so the
 *   slot comes back either way; a late `gone` or a second release finds nothing and is a no-op.
 * - *Release into a stopped limiter*: the client (`release` in `services/semaphoreClient.ts`)
 *   answers `ok` after 5 s at most; there is nothing left to give back to.
 *
 * ## The table is mutable, and that is safe
 * Holders are a `Map` mutated in place by one `enqueueActions` per step, as in the semaphore:
 * the actor is the only writer. Clone the context (`cloneProbeLimiterSnapshot`) before a pure
 * `transition()` test.
 *
 * ## Events (emitted `telemetry`; published by `telemetry/channels.ts`)
 * | Event | Measurements | When |
 * |---|---|---|
 * | `acquired` | `held` | a slot was taken |
 * | `rejected` | `held`, `retry_after` (always 1 s) | every slot was busy |
 * | `released` | `held`, `duration` (ms held) | a holder gave its slot back or went away |
 * Metadata is `{ capacity }`.
 */
import { enqueueActions, setup } from 'xstate';
import type { CallEnvelope, ReplyEvent } from '../core/protocol.js';
import { answer } from '../core/protocol.js';

/** Retry-After for every refusal: probes are short, so "try again in a second" is honest. */
export const PROBE_RETRY_AFTER_S = 1;

export interface ProbeLimiterInput {
  /** Pins the cap (tests); otherwise `limits().capacity` is read per operation. */
  readonly capacity?: number;
  /** The config provider (`AP_MAX_PROBE_CONCURRENCY`). Required unless `capacity` is pinned. */
  readonly limits?: () => { readonly capacity: number };
  /** Monotonic milliseconds. @default performance.now */
  readonly now?: () => number;
}

export type ProbeSlotOutcome =
  | { readonly type: 'granted' }
  | { readonly type: 'queue_full'; readonly retryAfterS: number }
  | { readonly type: 'already_held' };

export interface ProbeLimiterStats {
  readonly held: number;
  readonly capacity: number;
}

export type ProbeLimiterEvent =
  | ({ type: 'acquire'; id: string } & CallEnvelope)
  | ({ type: 'release'; id: string } & CallEnvelope)
  | { type: 'gone'; id: string; reason?: unknown }
  | ({ type: 'stats' } & CallEnvelope);

export interface ProbeLimiterTelemetry {
  readonly type: 'telemetry';
  readonly event: 'acquired' | 'rejected' | 'released';
  readonly measurements: { held: number; retry_after?: number; duration?: number };
  readonly metadata: { readonly capacity: number };
}

export type ProbeLimiterEmitted = ReplyEvent<unknown> | ProbeLimiterTelemetry;

export interface ProbeLimiterContext {
  /** Holder id → when it took the slot (ms). */
  readonly holders: Map<string, number>;
  readonly config: {
    readonly capacity: number | undefined;
    readonly limits: (() => { readonly capacity: number }) | undefined;
    readonly now: () => number;
  };
}

type IdEvent = Extract<ProbeLimiterEvent, { id: string }>;

const GRANTED: ProbeSlotOutcome = Object.freeze({ type: 'granted' });
const QUEUE_FULL: ProbeSlotOutcome = Object.freeze({
  type: 'queue_full',
  retryAfterS: PROBE_RETRY_AFTER_S,
});
const ALREADY_HELD: ProbeSlotOutcome = Object.freeze({ type: 'already_held' });
const OK = Object.freeze({ type: 'ok' as const });

const capacityOf = ({ config }: ProbeLimiterContext): number =>
  config.capacity ?? config.limits!().capacity;

function telemetry(
  context: ProbeLimiterContext,
  event: ProbeLimiterTelemetry['event'],
): ProbeLimiterTelemetry & { measurements: ProbeLimiterTelemetry['measurements'] } {
  return {
    type: 'telemetry',
    event,
    measurements: { held: context.holders.size },
    metadata: { capacity: capacityOf(context) },
  };
}

export const probeLimiterMachine = setup({
  types: {
    context: {} as ProbeLimiterContext,
    events: {} as ProbeLimiterEvent,
    input: {} as ProbeLimiterInput,
    emitted: {} as ProbeLimiterEmitted,
  },
  guards: {
    isHolder: ({ context, event }) => context.holders.has((event as IdEvent).id),
    slotFree: ({ context }) => context.holders.size < capacityOf(context),
  },
  actions: {
    answerAlreadyHeld: enqueueActions(({ event, enqueue }) => answer(enqueue, event, ALREADY_HELD)),
    grant: enqueueActions(({ context, event, enqueue }) => {
      context.holders.set((event as IdEvent).id, context.config.now());
      enqueue.emit(telemetry(context, 'acquired'));
      answer(enqueue, event, GRANTED);
    }),
    refuse: enqueueActions(({ context, event, enqueue }) => {
      const rejected = telemetry(context, 'rejected');
      rejected.measurements.retry_after = PROBE_RETRY_AFTER_S;
      enqueue.emit(rejected);
      answer(enqueue, event, QUEUE_FULL);
    }),
    releaseHolder: enqueueActions(({ context, event, enqueue }) => {
      const { id } = event as IdEvent;
      const since = context.holders.get(id)!;
      context.holders.delete(id);
      const released = telemetry(context, 'released');
      released.measurements.duration = context.config.now() - since;
      enqueue.emit(released);
      answer(enqueue, event, OK);
    }),
    answerOk: enqueueActions(({ event, enqueue }) => answer(enqueue, event, OK)),
    answerStats: enqueueActions(({ context, event, enqueue }) => {
      const stats: ProbeLimiterStats = {
        held: context.holders.size,
        capacity: capacityOf(context),
      };
      answer(enqueue, event, stats);
    }),
  },
}).createMachine({
  id: 'probeLimiter',
  context: ({ input }) => contextFrom(input),
  initial: 'serving',
  states: {
    // One flat state: there is no queue, so nothing is ever pending.
    serving: {
      on: {
        acquire: [
          { guard: 'isHolder', actions: 'answerAlreadyHeld' },
          { guard: 'slotFree', actions: 'grant' },
          { actions: 'refuse' },
        ],
        release: [{ guard: 'isHolder', actions: 'releaseHolder' }, { actions: 'answerOk' }],
        gone: { guard: 'isHolder', actions: 'releaseHolder' },
        stats: { actions: 'answerStats' },
      },
    },
  },
});

function contextFrom(input: ProbeLimiterInput): ProbeLimiterContext {
  const { capacity, limits } = input;
  if (capacity !== undefined && !(Number.isInteger(capacity) && capacity > 0)) {
    throw new RangeError(`capacity must be a positive integer, got ${capacity}`);
  }
  if (capacity === undefined && limits === undefined) {
    throw new TypeError('probeLimiterMachine needs `limits` or a pinned `capacity`');
  }
  return {
    holders: new Map(),
    config: { capacity, limits, now: input.now ?? (() => performance.now()) },
  };
}

/** The same snapshot over a copy of its holder map: feed this to `transition()`. */
export function cloneProbeLimiterSnapshot<S extends { context: ProbeLimiterContext }>(
  snapshot: S,
): S {
  return {
    ...snapshot,
    context: { ...snapshot.context, holders: new Map(snapshot.context.holders) },
  };
}
