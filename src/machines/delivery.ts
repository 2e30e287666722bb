/**
 * Delivery: one render request's answer, from the subscribe call to the end of its response.
 * One actor per request on the render path (MISS or COALESCED); a HIT never starts one.
 *
 * ## Ranges while rendering
 * A `Range` is answered from the coordinator's stream, which starts at byte 0 (a joiner gets the
 * backlog first), so a range never starts a render of its own nor holds a slot: it is one more
 * subscriber that skips the bytes before its window and leaves once its last byte is written.
 * The chart keeps the stream's `position`, and decides the response's *window* as soon as the
 * bytes allow, never earlier:
 * - **Known total** (an exact-length render, `totalBytes`; or a completed render's backlog): the
 *   window is RFC 9110's against it, a `206 a-b/total` or a `200` with its length; the head goes
 *   out once the window's first byte has been rendered, later bytes as they are produced.
 * - **Unknown total**, `first-last`: decided when byte `first` exists, `206 first-last/*`;
 *   `first-` (first > 0): `206 first-(what is rendered)/*`, the bytes already rendered, at once;
 *   a suffix, or `-0`: at `done`, when the total is known. No `Range` (or an ignored one, or
 *   `0-`): the `200` of a MISS, streamed.
 * - **Nothing to answer**: `done` before the window's first byte is a `416` naming the total
 *   (`refuseRange`). A window announced with an end the render never reaches (a `first-last/*`
 *   past the end, or an exact length the output fell short of) is torn down, never ended clean.
 *
 * The states below say what was sent: `seeking` is the new one (bytes flow from the coordinator,
 * none of them is the window's yet, nothing is sent).
 *
 * The chart does no I/O. It says what the response is to do through emitted events, which the
 * HTTP adapter (`http/delivery.ts`) performs: `head` (the 200 and its headers), `write`, `end`,
 * `refuse` (an error answer for a render failure), `shuttingDown` (503), `tearDown` (destroy a
 * response whose status is already sent), `leave` (unsubscribe from the coordinator), and two
 * questions the adapter answers with an event: `askRetryAfter` and `handOff` (cluster mode).
 *
 * ## States
 * `waiting` (for a slot, or for the subscribe call's answer) → `rendering` (the slot is granted,
 * no byte yet) → `seeking` (bytes, none of them the window's yet) → `streaming` (the 200 or 206
 * is sent) → `done` | `failed` | `cancelled`. Two detours
 * end in the same finals: `refusing` (no slot before the deadline: asking for a Retry-After) and
 * `handingOff` (the local queue is full: a peer may take the request).
 *
 * ## Invariants
 * - **One answer.** `head` is emitted once, before any `write` and `end`; after it the only
 *   failure is `tearDown` (no terminating chunk: the client sees a torn stream). Before it, a
 *   failure is one `refuse`, `refuseRange` or `shuttingDown`.
 * - **Only the window's bytes are written**, each once, in order; a response that announced a
 *   length ends only when exactly that many were written, and a stream that runs past a total
 *   known before the render (a join whose render was sized otherwise) is refused or torn down.
 * - **The consumer deadline** (`consumerDeadline`: `AP_RENDER_TIMEOUT` + `CONSUMER_SLACK_MS`)
 *   restarts on every coordinator message and on each phase change. It answers 429 (via
 *   `refusing`) before the slot was granted, 504 after, and tears the stream down once the 200 is
 *   sent; each of them also `leave`s the coordinator.
 * - **A streaming deadline is re-armed lazily, to the same instant.** While streaming, a chunk
 *   that carries its arrival time `at` (the adapter's monotonic clock, the timers' clock) only
 *   records it (`heardAt`); the timer armed for `deadlineAt` is left running, and when it fires
 *   with a message heard since, it is re-armed for the rest (`heardAt + deadline − deadlineAt`):
 *   the stream is torn down exactly `deadlineMs` after its last message, as if the timer had
 *   restarted on each one, without cancelling and scheduling a timer per chunk per listener (what
 *   a shared render's fan-out cost most, issue #17). A message without `at` restarts the timer
 *   at once, as before; the chart reads no clock.
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
 * | `subscribed` / `refused` | the subscribe call | record MISS/COALESCED (and a completed render's total), feed its backlog / refuse or hand off |
 * | `rendering` / `chunk` / `done` / `error` | coordinator | restart the deadline; skip, head, write, end (and leave once the window is written) / 416, refuse or tear down |
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

/**
 * What the request's `Range` asks for, before any size is known (`http/range.ts` parses it):
 * `from` (`first-` or `first-last`), `suffix`, `none` (`-0`), or `full`.
 */
export type DeliveryRange =
  | { readonly type: 'full' }
  | { readonly type: 'from'; readonly first: number; readonly last?: number }
  | { readonly type: 'suffix'; readonly length: number }
  | { readonly type: 'none' };

/** The bytes the response carries: `[start, end]` of the stream (`end` Infinity: to its end). */
export interface DeliveryWindow {
  readonly start: number;
  readonly end: number;
  /** A 206 (else a 200). */
  readonly partial: boolean;
}

export interface DeliveryInput {
  /** The variant key (shown in the live view). */
  readonly key: string;
  /** The request's `Range`. @default full */
  readonly range?: DeliveryRange;
  /** The output's exact length, when it is known before the render (an exact WAV). */
  readonly totalBytes?: number;
  /** Silence limit in ms, restarted on every message: `AP_RENDER_TIMEOUT` + `CONSUMER_SLACK_MS`. */
  readonly deadlineMs: number;
  /** Cluster mode: a full local queue is offered to a peer before any 429. @default false */
  readonly canHandOff?: boolean;
}

export interface DeliveryContext {
  readonly key: string;
  readonly deadlineMs: number;
  readonly canHandOff: boolean;
  readonly range: DeliveryRange;
  cache: DeliveryCache;
  /** Body bytes handed to the response. */
  bytes: number;
  /** Bytes of the render's stream seen so far (from byte 0: backlog, then chunks). */
  position: number;
  /** The stream's length, once known: given, a completed render's backlog, or at `done`. */
  total: number | null;
  /** The response's bytes, once decided (see the essay); null before. */
  window: DeliveryWindow | null;
  /** A suffix range's candidates: the stream's last bytes, at most the suffix plus one chunk. */
  readonly tail: Buffer[];
  failure: RenderFailure | null;
  outcome: DeliveryOutcome | null;
  /** When the streaming deadline's timer fires (the stamps' clock); null: armed unstamped. */
  deadlineAt: number | null;
  /** The last stamped chunk's arrival while streaming; null before one. */
  heardAt: number | null;
  /** A lazy re-arm's delay (the rest of the deadline); null: the whole `deadlineMs`. */
  rearmMs: number | null;
}

export type DeliveryEvent =
  /** The subscribe call answered with a render; `backlog` is what it had broadcast (may be empty). */
  | {
      readonly type: 'subscribed';
      readonly cache: DeliveryCache;
      /** The slot is granted (the coordinator is rendering or completed). */
      readonly started: boolean;
      readonly backlog: Buffer;
      /** The render has completed: `backlog` is the whole output. @default false */
      readonly complete?: boolean;
    }
  /** The subscribe call answered with a failure (a full queue, a coordinator that failed). */
  | { readonly type: 'refused'; readonly failure: RenderFailure }
  | SubscriberMessage
  /**
   * A chunk stamped with its arrival time (ms, on the clock the chart's timers run on): in
   * `streaming` it leaves the deadline's timer running (see the essay). A chunk without `at`
   * restarts the timer, as every other message does.
   */
  | { readonly type: 'chunk'; readonly data: Buffer; readonly at: number }
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
  /** The status line and headers: 200, or 206 with `range`; `length` when it is known. */
  | {
      readonly type: 'head';
      readonly cache: DeliveryCache;
      readonly range?: {
        readonly start: number;
        readonly end: number;
        readonly total: number | null;
      };
      readonly length?: number;
    }
  /** 416: the range lies past the stream's end, which is `size` bytes. */
  | { readonly type: 'refuseRange'; readonly size: number }
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
const SHORT = 'the render ended before the announced end of the response';
const OVERRUN = 'the render ran past its announced length';

const EMPTY = Buffer.alloc(0);

/** Keeps at least the last `length` bytes of the stream in `tail` (whole chunks, oldest first). */
function keepTail(tail: Buffer[], data: Buffer, length: number): void {
  tail.push(data);
  let kept = tail.reduce((n, b) => n + b.length, 0);
  while (tail.length > 1 && kept - tail[0]!.length >= length) kept -= tail.shift()!.length;
}

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

/** The bytes of the event that carries stream data (a chunk, or the subscribe's backlog). */
function dataOf(event: DeliveryEvent): Buffer | null {
  return event.type === 'chunk' ? event.data : event.type === 'subscribed' ? event.backlog : null;
}

/** RFC 9110's window for `range` against a known `total`; null when it is unsatisfiable. */
export function windowAgainst(range: DeliveryRange, total: number): DeliveryWindow | null {
  const last = total - 1;
  switch (range.type) {
    case 'full':
      return { start: 0, end: last, partial: false };
    case 'none':
      return null;
    case 'suffix':
      return total === 0
        ? null
        : { start: Math.max(total - range.length, 0), end: last, partial: true };
    case 'from':
      return range.first >= total
        ? null
        : { start: range.first, end: Math.min(range.last ?? last, last), partial: true };
  }
}

/**
 * The window once `arrived` bytes of the stream exist (and `total`, if known), or undefined while
 * the bytes cannot decide it yet; null: unsatisfiable (only with a total).
 */
function decide(
  context: DeliveryContext,
  arrived: number,
  total: number | null,
): DeliveryWindow | null | undefined {
  if (context.window) return context.window;
  if (total !== null) return windowAgainst(context.range, total);
  const { range } = context;
  if (range.type === 'full') return { start: 0, end: Number.POSITIVE_INFINITY, partial: false };
  if (range.type !== 'from' || arrived <= range.first) return undefined;
  // `0-` with no total is the whole stream: a 200, as if there were no Range.
  if (range.first === 0 && range.last === undefined) {
    return { start: 0, end: Number.POSITIVE_INFINITY, partial: false };
  }
  return { start: range.first, end: range.last ?? arrived - 1, partial: true };
}

/** What the event would make of the stream: where it would reach, its total, its window. */
function prospect(context: DeliveryContext, event: DeliveryEvent) {
  const data = dataOf(event);
  const arrived = context.position + (data?.length ?? 0);
  const total =
    context.total ??
    (event.type === 'done' || (event.type === 'subscribed' && event.complete === true)
      ? arrived
      : null);
  return { arrived, total, window: decide(context, arrived, total) };
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
    /** With this event's bytes the window is decided and its first byte is here. */
    opensWindow: ({ context, event }) => {
      const { arrived, window } = prospect(context, event);
      return window != null && arrived > window.start;
    },
    /**
     * ... and its last byte too, for a range (or a completed render): the response is written
     * whole and ended now, and the coordinator left. A whole body waits for `done` instead, so a
     * MISS never leaves (and so cancels) a render whose last bytes it holds.
     */
    completesWindow: ({ context, event }) => {
      const { arrived, window } = prospect(context, event);
      const complete = event.type === 'subscribed' && event.complete === true;
      return (
        window != null &&
        arrived > window.start &&
        arrived > window.end &&
        (window.partial || complete)
      );
    },
    /** In `streaming`: this chunk reaches a range's last byte. */
    reachesEnd: ({ context, event }) =>
      context.window?.partial === true && prospect(context, event).arrived > context.window.end,
    /** The stream runs past a total known before the render: it is not what was announced. */
    overrunsTotal: ({ context, event }) =>
      context.total !== null && prospect(context, event).arrived > context.total,
    /** `done` before the head, short of a length known before the render: a failed render. */
    shortOfTotal: ({ context }) => context.total !== null && context.position < context.total,
    /** `done` with no head sent, and the range lies past the stream's end: 416. */
    unsatisfiable: ({ context, event }) => prospect(context, event).window === null,
    /** `done` short of an end the head announced (a `first-last/*`, an exact length). */
    endsShort: ({ context }) =>
      context.window !== null &&
      Number.isFinite(context.window.end) &&
      context.position <= context.window.end,
    /** A stamped chunk while the timer is armed against a stamp: the timer runs on. */
    heardLazily: ({ context, event }) =>
      event.type === 'chunk' && 'at' in event && context.deadlineAt !== null,
    /** The streaming deadline fired, but a message came after it was armed: re-arm. */
    heardSinceArmed: ({ context }) =>
      context.deadlineAt !== null &&
      context.heardAt !== null &&
      context.heardAt + context.deadlineMs > context.deadlineAt,
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
    /** The render ended short of what the head announced: a render failure, not a timeout. */
    recordShort: assign({
      failure: () => ({ class: 'render_failed' as const, detail: SHORT }),
    }),
    recordOverrun: assign({
      failure: () => ({ class: 'render_failed' as const, detail: OVERRUN }),
    }),
    recordTimeout: assign({
      failure: (_, params: { detail: string }) => ({ class: 'timeout', detail: params.detail }),
    }),
    /** Fixes the window (and the total, once known) this event decides. */
    decide: assign(({ context, event }) => {
      const { total, window } = prospect(context, event);
      return { total, window: window ?? context.window };
    }),
    startStreaming: emit(({ context }) => {
      const window = context.window;
      const total = context.total;
      const length =
        window === null || !Number.isFinite(window.end)
          ? undefined
          : Math.max(window.end - window.start + 1, 0);
      return {
        type: 'head' as const,
        cache: context.cache,
        ...(window?.partial ? { range: { start: window.start, end: window.end, total } } : {}),
        ...(length !== undefined ? { length } : {}),
      };
    }),
    /**
     * A chunk, or the subscribe answer's backlog: the stream advances, and the part inside the
     * window (if decided) is written; a suffix range keeps the stream's last bytes meanwhile.
     */
    write: enqueueActions(({ context, event, enqueue }) => {
      const data = dataOf(event);
      if (data === null || data.length === 0) return;
      const from = context.position;
      const to = from + data.length; // exclusive
      enqueue.assign({ position: to });
      const { window } = context;
      if (window === null) {
        if (context.range.type === 'suffix') keepTail(context.tail, data, context.range.length);
        return;
      }
      const start = Math.max(window.start, from);
      const end = Math.min(window.end + 1, to);
      if (end <= start) return;
      const slice = start === from && end === to ? data : data.subarray(start - from, end - from);
      enqueue.assign({ bytes: context.bytes + slice.length });
      enqueue.emit({ type: 'write', data: slice });
    }),
    /** At `done` with a suffix window: the kept tail's part inside it. */
    writeTail: enqueueActions(({ context, enqueue }) => {
      const { window } = context;
      if (window === null || context.tail.length === 0) return;
      const kept = Buffer.concat(context.tail);
      context.tail.length = 0;
      const keptFrom = context.position - kept.length;
      const slice = kept.subarray(Math.max(window.start - keptFrom, 0));
      if (slice.length === 0) return;
      enqueue.assign({ bytes: context.bytes + slice.length });
      enqueue.emit({ type: 'write', data: slice });
    }),
    refuseRange: emit(({ context }) => ({
      type: 'refuseRange' as const,
      size: context.total ?? context.position,
    })),
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
    /** The deadline's timer (re)starts now: due `deadlineMs` after the event's stamp, if any. */
    arm: assign(({ context, event }) => ({
      deadlineAt:
        'at' in event && typeof event.at === 'number' ? event.at + context.deadlineMs : null,
      rearmMs: null,
    })),
    /**
     * A stamped chunk inside the window while streaming (it does not reach a range's end, so it
     * is the window's whole): counted and its arrival remembered, the timer left as it is; one
     * context update, where `write` would compute a slice and update twice.
     */
    hear: assign(({ context, event }) => {
      const length = event.type === 'chunk' ? event.data.length : 0;
      return {
        position: context.position + length,
        bytes: context.bytes + length,
        heardAt: 'at' in event ? event.at : context.heardAt,
      };
    }),
    /** The stamped chunk `hear` counted, written whole. */
    pass: emit(({ event }) => ({
      type: 'write' as const,
      data: event.type === 'chunk' ? event.data : EMPTY,
    })),
    /** The timer fired for `deadlineAt`; the stream spoke at `heardAt`: wait out the rest. */
    rearm: assign(({ context }) => {
      const due = (context.heardAt ?? 0) + context.deadlineMs;
      return { rearmMs: due - (context.deadlineAt ?? due), deadlineAt: due };
    }),
    settle: assign({ outcome: (_, params: { outcome: DeliveryOutcome }) => params.outcome }),
  },
  delays: {
    consumerDeadline: ({ context }) => context.rearmMs ?? context.deadlineMs,
  },
}).createMachine({
  id: 'delivery',
  context: ({ input }) => {
    if (!Number.isSafeInteger(input.deadlineMs) || input.deadlineMs < 1) {
      throw new RangeError(
        `delivery deadlineMs must be a positive integer, got ${input.deadlineMs}`,
      );
    }
    const range = input.range ?? { type: 'full' };
    const total = input.totalBytes ?? null;
    if (total !== null && (!Number.isSafeInteger(total) || total < 0)) {
      throw new RangeError(`delivery totalBytes must be a byte count, got ${total}`);
    }
    const window = total === null ? null : windowAgainst(range, total);
    if (total !== null && window === null) {
      // Known before the render: the adapter answers the 416 without subscribing.
      throw new RangeError('delivery range is unsatisfiable against totalBytes');
    }
    return {
      key: input.key,
      deadlineMs: input.deadlineMs,
      canHandOff: input.canHandOff ?? false,
      range,
      cache: 'MISS',
      bytes: 0,
      position: 0,
      total,
      window,
      tail: [],
      failure: null,
      outcome: null,
      deadlineAt: null,
      heardAt: null,
      rearmMs: null,
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
            guard: 'overrunsTotal',
            target: 'failed',
            actions: ['recordCache', 'leave', 'recordOverrun', 'refuse'],
          },
          {
            guard: 'completesWindow',
            target: 'done',
            actions: ['recordCache', 'decide', 'startStreaming', 'write', 'end', 'leave'],
          },
          {
            guard: 'opensWindow',
            target: 'streaming',
            actions: ['recordCache', 'decide', 'startStreaming', 'write', 'arm'],
          },
          { guard: 'hasBacklog', target: 'seeking', actions: ['recordCache', 'decide', 'write'] },
          { guard: 'slotGranted', target: 'rendering', actions: ['recordCache', 'decide'] },
          { actions: ['recordCache', 'decide'] },
        ],
        refused: [
          { guard: 'mayHandOff', target: 'handingOff', actions: 'recordFailure' },
          { target: 'failed', actions: ['recordFailure', 'refuse'] },
        ],
        rendering: { target: 'rendering' },
        chunk: [
          { guard: 'emptyChunk', target: 'waiting', reenter: true },
          {
            guard: 'overrunsTotal',
            target: 'failed',
            actions: ['leave', 'recordOverrun', 'refuse'],
          },
          {
            guard: 'completesWindow',
            target: 'done',
            actions: ['decide', 'startStreaming', 'write', 'end', 'leave'],
          },
          {
            guard: 'opensWindow',
            target: 'streaming',
            actions: ['decide', 'startStreaming', 'write', 'arm'],
          },
          { target: 'seeking', actions: ['decide', 'write'] },
        ],
        done: [
          { guard: 'shortOfTotal', target: 'failed', actions: ['recordShort', 'refuse'] },
          { guard: 'unsatisfiable', target: 'failed', actions: ['decide', 'refuseRange'] },
          { target: 'done', actions: ['decide', 'startStreaming', 'writeTail', 'end'] },
        ],
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
          {
            guard: 'overrunsTotal',
            target: 'failed',
            actions: ['leave', 'recordOverrun', 'refuse'],
          },
          {
            guard: 'completesWindow',
            target: 'done',
            actions: ['decide', 'startStreaming', 'write', 'end', 'leave'],
          },
          {
            guard: 'opensWindow',
            target: 'streaming',
            actions: ['decide', 'startStreaming', 'write', 'arm'],
          },
          { target: 'seeking', actions: ['decide', 'write'] },
        ],
        done: [
          { guard: 'shortOfTotal', target: 'failed', actions: ['recordShort', 'refuse'] },
          { guard: 'unsatisfiable', target: 'failed', actions: ['decide', 'refuseRange'] },
          { target: 'done', actions: ['decide', 'startStreaming', 'writeTail', 'end'] },
        ],
        error: { target: 'failed', actions: ['recordFailure', 'refuse'] },
        shutdown: { target: 'failed', actions: ['recordFailure', 'refuseShuttingDown'] },
        'client.gone': { target: 'cancelled', actions: 'leave' },
      },
    },
    /**
     * A range's window has not begun (or cannot be decided yet): bytes flow from the coordinator
     * and are counted (a suffix keeps its tail), nothing is sent; a failure is still an answer.
     */
    seeking: {
      after: {
        consumerDeadline: {
          target: 'failed',
          actions: ['leave', { type: 'recordTimeout', params: { detail: NO_OUTPUT } }, 'refuse'],
        },
      },
      on: {
        rendering: { target: 'seeking', reenter: true },
        chunk: [
          { guard: 'emptyChunk', target: 'seeking', reenter: true },
          {
            guard: 'overrunsTotal',
            target: 'failed',
            actions: ['leave', 'recordOverrun', 'refuse'],
          },
          {
            guard: 'completesWindow',
            target: 'done',
            actions: ['decide', 'startStreaming', 'write', 'end', 'leave'],
          },
          {
            guard: 'opensWindow',
            target: 'streaming',
            actions: ['decide', 'startStreaming', 'write', 'arm'],
          },
          { target: 'seeking', reenter: true, actions: ['decide', 'write'] },
        ],
        done: [
          { guard: 'shortOfTotal', target: 'failed', actions: ['recordShort', 'refuse'] },
          { guard: 'unsatisfiable', target: 'failed', actions: ['decide', 'refuseRange'] },
          { target: 'done', actions: ['decide', 'startStreaming', 'writeTail', 'end'] },
        ],
        error: { target: 'failed', actions: ['recordFailure', 'refuse'] },
        shutdown: { target: 'failed', actions: ['recordFailure', 'refuseShuttingDown'] },
        'client.gone': { target: 'cancelled', actions: 'leave' },
      },
    },
    /** The head is sent: the window's bytes flow until its end or `done`; a failure tears down. */
    streaming: {
      after: {
        consumerDeadline: [
          { guard: 'heardSinceArmed', target: 'streaming', reenter: true, actions: 'rearm' },
          {
            target: 'failed',
            actions: ['leave', { type: 'recordTimeout', params: { detail: SILENT } }, 'tearDown'],
          },
        ],
      },
      on: {
        rendering: { target: 'streaming', reenter: true, actions: 'arm' },
        chunk: [
          { guard: 'emptyChunk', target: 'streaming', reenter: true, actions: 'arm' },
          {
            guard: 'overrunsTotal',
            target: 'failed',
            actions: ['leave', 'recordOverrun', 'tearDown'],
          },
          { guard: 'reachesEnd', target: 'done', actions: ['write', 'end', 'leave'] },
          { guard: 'heardLazily', actions: ['hear', 'pass'] },
          { target: 'streaming', reenter: true, actions: ['write', 'arm'] },
        ],
        done: [
          {
            guard: 'endsShort',
            target: 'failed',
            actions: ['recordShort', 'tearDown'],
          },
          { target: 'done', actions: 'end' },
        ],
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
