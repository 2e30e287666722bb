/**
 * Delivery: one render request's answer, from the subscribe call to the end of its response.
 * One actor per request on the render path (MISS or COALESCED); a HIT never starts one.
 *
 * The chart does no I/O. It says what the response is to do through emitted events, which the
 * HTTP adapter (`http/delivery.ts`) performs: `head` (the 200 and its headers), `write`, `end`,
 * `refuse` (an error answer for a render failure), `shuttingDown` (503), `tearDown` (destroy a
 * response whose status is already sent), `leave` (unsubscribe from the coordinator), and two
 * questions the adapter answers with an event: `askRetryAfter` and `handOff` (cluster mode).
 *
 * ## States
 * `waiting` (for a slot, or for the subscribe call's answer) → `rendering` (the slot is granted,
 * no byte yet) → `streaming` (the 200 is sent) → `done` | `failed` | `cancelled`. Two detours
 * end in the same finals: `refusing` (no slot before the deadline: asking for a Retry-After) and
 * `handingOff` (the local queue is full: a peer may take the request).
 *
 * ## Invariants
 * - **One answer.** `head` is emitted once, before any `write` and `end`; after it the only
 *   failure is `tearDown` (no terminating chunk: the client sees a torn stream). Before it, a
 *   failure is one `refuse` or `shuttingDown`.
 * - **The consumer deadline** (`consumerDeadline`: `AP_RENDER_TIMEOUT` + `CONSUMER_SLACK_MS`)
 *   restarts on every coordinator message and on each phase change. It answers 429 (via
 *   `refusing`) before the slot was granted, 504 after, and tears the stream down once the 200 is
 *   sent; each of them also `leave`s the coordinator.
 * - **Exactly one final state**, with the outcome, cache status, bytes written and (failed) the
 *   failure as the actor's output: the adapter's telemetry reads nothing else of the chart. `done`
 *   means the response was *ended*; whether it was delivered (finished before the client left)
 *   is the response's to say, and the adapter waits for it.
 * - **A client that leaves** (`client.gone`) ends the delivery as `cancelled` from any state,
 *   leaving the coordinator when one was subscribed.
 *
 * ## Races
 * - *Messages before the subscribe answer*: the adapter holds them and sends them after
 *   `subscribed` (backlog first), so the chart sees the coordinator's order without a gap.
 * - *The deadline passes while the subscribe call is still out*: the chart leaves at once and
 *   refuses; the adapter unsubscribes the coordinator when the call answers.
 * - *The node is stopping*: a render cancelled by `close()` reaches the chart as `shutdown` (the
 *   adapter reads the flag), a 503 before the 200 and a torn stream after it.
 * - *A message after a final state*: the actor has stopped; the adapter drops it.
 *
 * ## Events
 * | Event | From | Effect |
 * |---|---|---|
 * | `subscribed` / `refused` | the subscribe call | record MISS/COALESCED, write its backlog / refuse or hand off |
 * | `rendering` / `chunk` / `done` / `error` | coordinator | restart the deadline; head, write, end / refuse or tear down |
 * | `shutdown` | coordinator (`error: cancelled` while the node stops) | 503, or tear down |
 * | `client.gone` | the response's `close` | `leave` → `cancelled` |
 * | `retryAfter` / `handOff.relayed` / `handOff.refused` | the adapter's answers | 429 / `done` / 429 |
 * | `fault` | the adapter (its own I/O threw: a bug) | → `failed`, nothing emitted; the router answers 500 |
 */
import { assign, emit, enqueueActions, setup } from 'xstate';
import type { RenderFailure } from '../core/failure.js';
import type { SubscriberMessage } from './renderCoordinator.js';

/** Slack past `AP_RENDER_TIMEOUT` before a silent subscription is given up on. */
export const CONSUMER_SLACK_MS = 1_000; // lets the Render's own timeout report first

/** The `x-audio-proxy` value of a rendered answer. */
export type DeliveryCache = 'MISS' | 'COALESCED';

export type DeliveryOutcome = 'ok' | 'cancelled' | 'failed';

export interface DeliveryInput {
  /** The variant key (shown in the live view). */
  readonly key: string;
  /** Silence limit in ms, restarted on every message: `AP_RENDER_TIMEOUT` + `CONSUMER_SLACK_MS`. */
  readonly deadlineMs: number;
  /** Cluster mode: a full local queue is offered to a peer before any 429. @default false */
  readonly canHandOff?: boolean;
}

export interface DeliveryContext {
  readonly key: string;
  readonly deadlineMs: number;
  readonly canHandOff: boolean;
  cache: DeliveryCache;
  /** Body bytes handed to the response. */
  bytes: number;
  failure: RenderFailure | null;
  outcome: DeliveryOutcome | null;
}

export type DeliveryEvent =
  /** The subscribe call answered with a render; `backlog` is what it had broadcast (may be empty). */
  | {
      readonly type: 'subscribed';
      readonly cache: DeliveryCache;
      /** The slot is granted (the coordinator is rendering or completed). */
      readonly started: boolean;
      readonly backlog: Buffer;
    }
  /** The subscribe call answered with a failure (a full queue, a coordinator that failed). */
  | { readonly type: 'refused'; readonly failure: RenderFailure }
  | SubscriberMessage
  /** The render was cancelled because the node is stopping. */
  | { readonly type: 'shutdown'; readonly failure: RenderFailure }
  | { readonly type: 'client.gone' }
  /** The answer to `askRetryAfter`. */
  | { readonly type: 'retryAfter'; readonly retryAfterS: number }
  /** The answers to `handOff`: a peer answered the client, or the cluster refused too. */
  | { readonly type: 'handOff.relayed' }
  | { readonly type: 'handOff.refused'; readonly retryAfterS: number }
  /** The adapter's own I/O threw (a bug): the delivery ends and the router answers. */
  | { readonly type: 'fault' };

export type DeliveryEmitted =
  | { readonly type: 'head'; readonly cache: DeliveryCache }
  | { readonly type: 'write'; readonly data: Buffer }
  | { readonly type: 'end' }
  | { readonly type: 'refuse'; readonly failure: RenderFailure }
  | { readonly type: 'shuttingDown' }
  | { readonly type: 'tearDown' }
  | { readonly type: 'leave' }
  | { readonly type: 'askRetryAfter' }
  | { readonly type: 'handOff'; readonly retryAfterS: number };

export interface DeliveryOutput {
  readonly outcome: DeliveryOutcome;
  readonly cache: DeliveryCache;
  readonly bytes: number;
  readonly failure?: RenderFailure;
}

/** What a delivery that ended on the adapter's own bug records (the router answers 500). */
export const DELIVERY_FAULT: RenderFailure = Object.freeze({
  class: 'render_failed',
  detail: 'internal error',
});
const NO_OUTPUT = 'no output before the consumer deadline';
const SILENT = 'stream went silent';

/** The failure an event reports (those that carry one). */
function failureOf(event: DeliveryEvent, context: DeliveryContext): RenderFailure {
  switch (event.type) {
    case 'refused':
    case 'error':
    case 'shutdown':
      return event.failure;
    case 'retryAfter':
      return { class: 'queue_full', retryAfterS: event.retryAfterS };
    case 'handOff.refused':
      return { ...(context.failure ?? { class: 'queue_full' }), retryAfterS: event.retryAfterS };
    default:
      return DELIVERY_FAULT;
  }
}

export const deliveryMachine = setup({
  types: {
    input: {} as DeliveryInput,
    context: {} as DeliveryContext,
    events: {} as DeliveryEvent,
    emitted: {} as DeliveryEmitted,
    output: {} as DeliveryOutput,
  },
  guards: {
    hasBacklog: ({ event }) => event.type === 'subscribed' && event.backlog.length > 0,
    slotGranted: ({ event }) => event.type === 'subscribed' && event.started,
    emptyChunk: ({ event }) => event.type === 'chunk' && event.data.length === 0,
    /** A full queue in cluster mode: a peer may have a free slot. */
    mayHandOff: ({ context, event }) =>
      context.canHandOff && event.type === 'refused' && event.failure.class === 'queue_full',
  },
  actions: {
    recordCache: assign({
      cache: ({ context, event }) => (event.type === 'subscribed' ? event.cache : context.cache),
    }),
    recordFailure: assign({ failure: ({ context, event }) => failureOf(event, context) }),
    recordTimeout: assign({
      failure: (_, params: { detail: string }) => ({ class: 'timeout', detail: params.detail }),
    }),
    startStreaming: emit(({ context }) => ({ type: 'head' as const, cache: context.cache })),
    /** A chunk, or the subscribe answer's backlog. */
    write: enqueueActions(({ context, event, enqueue }) => {
      const data =
        event.type === 'chunk' ? event.data : event.type === 'subscribed' ? event.backlog : null;
      if (data === null || data.length === 0) return;
      enqueue.assign({ bytes: context.bytes + data.length });
      enqueue.emit({ type: 'write', data });
    }),
    end: emit({ type: 'end' as const }),
    refuse: emit(({ context }) => ({
      type: 'refuse' as const,
      failure: context.failure ?? DELIVERY_FAULT,
    })),
    refuseShuttingDown: emit({ type: 'shuttingDown' as const }),
    tearDown: emit({ type: 'tearDown' as const }),
    leave: emit({ type: 'leave' as const }),
    askRetryAfter: emit({ type: 'askRetryAfter' as const }),
    askHandOff: emit(({ context }) => ({
      type: 'handOff' as const,
      retryAfterS: context.failure?.retryAfterS ?? 1,
    })),
    settle: assign({ outcome: (_, params: { outcome: DeliveryOutcome }) => params.outcome }),
  },
  delays: {
    consumerDeadline: ({ context }) => context.deadlineMs,
  },
}).createMachine({
  id: 'delivery',
  context: ({ input }) => {
    if (!Number.isSafeInteger(input.deadlineMs) || input.deadlineMs < 1) {
      throw new RangeError(
        `delivery deadlineMs must be a positive integer, got ${input.deadlineMs}`,
      );
    }
    return {
      key: input.key,
      deadlineMs: input.deadlineMs,
      canHandOff: input.canHandOff ?? false,
      cache: 'MISS',
      bytes: 0,
      failure: null,
      outcome: null,
    };
  },
  initial: 'waiting',
  on: {
    fault: { target: '.failed', actions: 'recordFailure' },
  },
  states: {
    /** For a slot, or for the subscribe call's answer; nothing is sent yet. */
    waiting: {
      after: { consumerDeadline: { target: 'refusing', actions: 'leave' } },
      on: {
        subscribed: [
          {
            guard: 'hasBacklog',
            target: 'streaming',
            actions: ['recordCache', 'startStreaming', 'write'],
          },
          { guard: 'slotGranted', target: 'rendering', actions: 'recordCache' },
          { actions: 'recordCache' },
        ],
        refused: [
          { guard: 'mayHandOff', target: 'handingOff', actions: 'recordFailure' },
          { target: 'failed', actions: ['recordFailure', 'refuse'] },
        ],
        rendering: { target: 'rendering' },
        chunk: [
          { guard: 'emptyChunk', target: 'waiting', reenter: true },
          { target: 'streaming', actions: ['startStreaming', 'write'] },
        ],
        done: { target: 'done', actions: ['startStreaming', 'end'] },
        error: { target: 'failed', actions: ['recordFailure', 'refuse'] },
        shutdown: { target: 'failed', actions: ['recordFailure', 'refuseShuttingDown'] },
        'client.gone': { target: 'cancelled', actions: 'leave' },
      },
    },
    /** The slot is granted and ffmpeg runs; no byte has come yet. */
    rendering: {
      after: {
        consumerDeadline: {
          target: 'failed',
          actions: ['leave', { type: 'recordTimeout', params: { detail: NO_OUTPUT } }, 'refuse'],
        },
      },
      on: {
        rendering: { target: 'rendering', reenter: true },
        chunk: [
          { guard: 'emptyChunk', target: 'rendering', reenter: true },
          { target: 'streaming', actions: ['startStreaming', 'write'] },
        ],
        done: { target: 'done', actions: ['startStreaming', 'end'] },
        error: { target: 'failed', actions: ['recordFailure', 'refuse'] },
        shutdown: { target: 'failed', actions: ['recordFailure', 'refuseShuttingDown'] },
        'client.gone': { target: 'cancelled', actions: 'leave' },
      },
    },
    /** The 200 is sent: bytes flow until `done`; any failure now tears the stream down. */
    streaming: {
      after: {
        consumerDeadline: {
          target: 'failed',
          actions: ['leave', { type: 'recordTimeout', params: { detail: SILENT } }, 'tearDown'],
        },
      },
      on: {
        rendering: { target: 'streaming', reenter: true },
        chunk: [
          { guard: 'emptyChunk', target: 'streaming', reenter: true },
          { target: 'streaming', reenter: true, actions: 'write' },
        ],
        done: { target: 'done', actions: 'end' },
        error: { target: 'failed', actions: ['recordFailure', 'tearDown'] },
        shutdown: { target: 'failed', actions: ['recordFailure', 'tearDown'] },
        'client.gone': { target: 'cancelled', actions: 'leave' },
      },
    },
    /** No slot before the deadline: the coordinator is left, the 429 waits for a Retry-After. */
    refusing: {
      entry: 'askRetryAfter',
      on: {
        retryAfter: { target: 'failed', actions: ['recordFailure', 'refuse'] },
        'client.gone': { target: 'cancelled' },
      },
    },
    /** The local queue is full and a peer may have a slot: the cluster answers or refuses. */
    handingOff: {
      entry: 'askHandOff',
      on: {
        'handOff.relayed': { target: 'done' },
        'handOff.refused': { target: 'failed', actions: ['recordFailure', 'refuse'] },
        'client.gone': { target: 'cancelled' },
      },
    },
    done: { type: 'final', entry: { type: 'settle', params: { outcome: 'ok' } } },
    cancelled: { type: 'final', entry: { type: 'settle', params: { outcome: 'cancelled' } } },
    failed: { type: 'final', entry: { type: 'settle', params: { outcome: 'failed' } } },
  },
  output: ({ context }) => ({
    outcome: context.outcome ?? 'cancelled',
    cache: context.cache,
    bytes: context.bytes,
    ...(context.outcome === 'failed' && context.failure ? { failure: context.failure } : {}),
  }),
});
