/**
 * GenServer-style messaging between async code and XState actors: `call`, `cast`, and the
 * `notify`/`inbox` pair for unsolicited messages to one participant. The protocol's data (the
 * envelope, the reply, `answer`/`reply` for callees) is `core/protocol.ts`.
 *
 * A call is the request event plus a correlation id (`callId`) and, between machines, a reply
 * address (`replyTo`). The callee answers from an action in the transition that handles the
 * request, so no actor ever waits inside a transition; only the promise caller waits.
 *
 * ## Invariants
 * - **One listener per callee, not one per call.** The first `call()` to an actor attaches one
 *   `reply` listener, one `notify` listener and one completion observer; later calls reuse them.
 * - **A reply reaches only the call that asked.** Ids are process-unique and never reused; a
 *   reply whose id is no longer pending (its caller timed out or aborted) is dropped.
 * - **Giving up never touches the callee.** Timeout and abort settle the caller and forget the
 *   id; the request already handled stays handled. A caller that must undo an effect (a slot
 *   granted after it stopped waiting) sends the undo itself.
 * - **The sync fast path arms nothing.** A callee that answers inside `send` (the usual case)
 *   costs one map-free slot write and one resolved promise: no timer, no listener, no closure.
 *
 * - **A throwing inbox never reaches the callee.** The throw is published on
 *   `audio_proxy.internal_error` (stage `notify`), the inbox is removed, and the owner is sent
 *   `gone(id)` as if the participant had ended, so whatever it held for that id is released.
 *
 * ## Races
 * - *Reply inside `send`, re-entrantly.* A `notify` handler may call the same actor while it is
 *   still processing; that call's event is queued, not run. The sync slot is saved and restored
 *   around every `send`, so a nested call never steals or clobbers the outer call's reply.
 * - *Callee stops while a call is pending.* The completion observer rejects every pending call
 *   with `ERR_CALLEE_STOPPED`; a stop inside `send` is seen right after `send` returns.
 * - *Reply and stop in one transition.* Emitted replies run before the completion observers,
 *   so the reply wins.
 *
 * ## Events
 * | Event    | Fields                     | Direction                                     |
 * |----------|----------------------------|-----------------------------------------------|
 * | request  | `type`, `callId?`, `replyTo?` | caller → callee (no `callId`: a cast)      |
 * | `reply`  | `callId`, `payload`        | callee → `replyTo`, or emitted for `call()`   |
 * | `notify` | `to`, `message`            | emitted by an owner, delivered to `inbox(to)` |
 *
 * Observing an actor here handles its XState `error` (pending calls fail); turning an actor
 * error into a crash is the system's job (`system.ts`), not this module's.
 */
import type { AnyActorRef } from 'xstate';
import type { NotifyEvent, ReplyEvent } from '../core/protocol.js';
import { publishInternalError } from '../telemetry/channels.js';

export type CallErrorCode = 'ERR_CALL_TIMEOUT' | 'ERR_CALL_ABORTED' | 'ERR_CALLEE_STOPPED';

/** Why a call settled without a reply. Match on `code`. */
export class CallError extends Error {
  override readonly name = 'CallError';
  readonly code: CallErrorCode;
  constructor(code: CallErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

export interface CallOptions {
  /**
   * Milliseconds before the call settles with `ERR_CALL_TIMEOUT`; `Infinity` waits forever.
   * @default 5000
   */
  readonly timeout?: number;
  /** Aborting settles the call with `ERR_CALL_ABORTED`; the callee is not told. */
  readonly signal?: AbortSignal;
}

/** The default call timeout; GenServer's own default, and far above any O(queue) handler. */
export const DEFAULT_CALL_TIMEOUT_MS = 5_000;

/** setTimeout's ceiling; above it Node fires after 1 ms, which would turn a long wait into none. */
const MAX_TIMER_MS = 2_147_483_647;

const ONCE = { once: true } as const;

interface Mailbox {
  readonly pending: Map<number, PendingCall>;
  readonly inboxes: Map<string, (message: unknown) => void>;
  stopped: boolean;
  /** The call whose `send` is on the stack and may be answered inline; 0 when none. */
  syncId: number;
  syncDone: boolean;
  syncPayload: unknown;
}

/** A call that was not answered inside `send`: owns its timer and abort listener. */
class PendingCall {
  timer: ReturnType<typeof setTimeout> | undefined = undefined;
  constructor(
    readonly box: Mailbox,
    readonly callId: number,
    readonly signal: AbortSignal | undefined,
    readonly resolve: (payload: unknown) => void,
    readonly reject: (error: unknown) => void,
  ) {}

  settle(payload: unknown): void {
    this.dispose();
    this.resolve(payload);
  }

  fail(error: unknown): void {
    this.dispose();
    this.reject(error);
  }

  /** The abort listener (an EventListener object, so no closure per call). */
  handleEvent(): void {
    if (!this.box.pending.delete(this.callId)) return;
    this.fail(new CallError('ERR_CALL_ABORTED', 'call aborted', { cause: this.signal?.reason }));
  }

  dispose(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.signal?.removeEventListener('abort', this);
  }
}

function expire(waiting: PendingCall, timeoutMs: number): void {
  if (!waiting.box.pending.delete(waiting.callId)) return;
  waiting.timer = undefined;
  waiting.fail(new CallError('ERR_CALL_TIMEOUT', `no reply within ${timeoutMs} ms`));
}

let nextCallId = 1;
const mailboxes = new WeakMap<AnyActorRef, Mailbox>();

/** A fresh, process-unique correlation id (for machines that call other machines). */
export function newCallId(): number {
  return nextCallId++;
}

function mailboxOf(actor: AnyActorRef): Mailbox {
  const known = mailboxes.get(actor);
  if (known !== undefined) return known;
  const box: Mailbox = {
    pending: new Map(),
    inboxes: new Map(),
    stopped: false,
    syncId: 0,
    syncDone: false,
    syncPayload: undefined,
  };
  mailboxes.set(actor, box);
  actor.on('reply', (event: ReplyEvent) => {
    if (event.callId === box.syncId) {
      box.syncDone = true;
      box.syncPayload = event.payload;
      return;
    }
    const waiting = box.pending.get(event.callId);
    if (waiting === undefined) return; // late reply to a caller that gave up: dropped
    box.pending.delete(event.callId);
    waiting.settle(event.payload);
  });
  actor.on('notify', (event: NotifyEvent) => {
    const handler = box.inboxes.get(event.to);
    if (handler === undefined) return;
    try {
      handler(event.message);
    } catch (error) {
      // A participant that throws is a bug: reported, cut off, and gone for its owner (which
      // then releases whatever it held for it). XState would rethrow it on a timer: a crash.
      publishInternalError('notify', error);
      if (box.inboxes.get(event.to) === handler) box.inboxes.delete(event.to);
      cast(actor, { type: 'gone', id: event.to, reason: { type: 'error', error } });
    }
  });
  const failAll = () => {
    box.stopped = true;
    for (const [id, waiting] of box.pending) {
      box.pending.delete(id);
      waiting.fail(new CallError('ERR_CALLEE_STOPPED', 'the actor stopped before replying'));
    }
  };
  // A stopped or failed actor would answer this synchronously; check first, subscribe after.
  if (actor.getSnapshot().status !== 'active') box.stopped = true;
  else actor.subscribe({ complete: failAll, error: failAll });
  return box;
}

function checkTimeout(timeout: number): void {
  const valid =
    typeof timeout === 'number' &&
    timeout >= 0 &&
    (timeout <= MAX_TIMER_MS || timeout === Number.POSITIVE_INFINITY);
  if (!valid) {
    throw new RangeError(`call timeout must be 0..${MAX_TIMER_MS} ms or Infinity, got ${timeout}`);
  }
}

/**
 * Sends `request` to `actor` with a fresh `callId` (stamped onto `request` itself: pass a
 * fresh object) and resolves with the payload the actor replies. Rejects with a `CallError`
 * on timeout, abort, or the actor stopping first. Throws `TypeError`/`RangeError` for a
 * request that names its own `replyTo` or an invalid timeout.
 */
export function call<R = unknown>(
  actor: AnyActorRef,
  request: { readonly type: string } & Record<string, unknown>,
  options?: CallOptions,
): Promise<R> {
  if (request.replyTo !== undefined) {
    throw new TypeError('call() answers through emit; a request with replyTo is a machine call');
  }
  const timeoutMs = options?.timeout ?? DEFAULT_CALL_TIMEOUT_MS;
  if (options?.timeout !== undefined) checkTimeout(timeoutMs);
  const box = mailboxOf(actor);
  if (box.stopped) {
    return Promise.reject(new CallError('ERR_CALLEE_STOPPED', 'the actor is not running'));
  }
  const signal = options?.signal;
  if (signal?.aborted) {
    return Promise.reject(
      new CallError('ERR_CALL_ABORTED', 'call aborted before it was sent', {
        cause: signal.reason,
      }),
    );
  }
  const callId = nextCallId++;
  // Fast path: most callees answer inside `send`. Save the slot (a nested call from a notify
  // handler may be running this very code one frame up) and restore it whatever happens.
  const outerId = box.syncId;
  const outerDone = box.syncDone;
  const outerPayload = box.syncPayload;
  box.syncId = callId;
  box.syncDone = false;
  box.syncPayload = undefined;
  let done: boolean;
  let payload: unknown;
  // Stamped onto the caller's object rather than spread into a copy: a copy per call costs
  // more than the whole transition on a hot callee. Callers pass a fresh literal.
  (request as { callId?: number }).callId = callId;
  try {
    actor.send(request);
  } finally {
    done = box.syncDone;
    payload = box.syncPayload;
    box.syncId = outerId;
    box.syncDone = outerDone;
    box.syncPayload = outerPayload;
  }
  if (done) return Promise.resolve(payload as R);
  if (box.stopped) {
    return Promise.reject(new CallError('ERR_CALLEE_STOPPED', 'the actor stopped before replying'));
  }
  if (signal?.aborted) {
    // Aborted from inside `send` (a notify handler gave up): an abort listener would never fire.
    return Promise.reject(
      new CallError('ERR_CALL_ABORTED', 'call aborted', { cause: signal.reason }),
    );
  }
  return new Promise<R>((resolve, reject) => {
    const waiting = new PendingCall(
      box,
      callId,
      signal,
      resolve as (payload: unknown) => void,
      reject,
    );
    box.pending.set(callId, waiting);
    if (timeoutMs !== Number.POSITIVE_INFINITY) {
      waiting.timer = setTimeout(expire, timeoutMs, waiting, timeoutMs);
    }
    signal?.addEventListener('abort', waiting, ONCE);
  });
}

/** Fire and forget: sends `event` and returns nothing. A stopped actor drops it silently. */
export function cast<E extends { readonly type: string }>(actor: AnyActorRef, event: E): void {
  const status = actor.getSnapshot().status;
  if (status !== 'active') return; // XState would log a warning per dropped event
  actor.send(event);
}

/**
 * Registers `handler` as the mailbox of participant `id` on `actor`: every `notify` the actor
 * emits to `id` is delivered to it, synchronously, in the transition that emits it. Returns the
 * function that removes it. One inbox per id: registering the id again replaces the handler,
 * and the old remover then does nothing.
 */
export function inbox<M = unknown>(
  actor: AnyActorRef,
  id: string,
  handler: (message: M) => void,
): () => void {
  const box = mailboxOf(actor);
  box.inboxes.set(id, handler as (message: unknown) => void);
  return () => {
    if (box.inboxes.get(id) === handler) box.inboxes.delete(id);
  };
}

/** How many calls to `actor` are waiting for a reply (for tests and leak checks). */
export function pendingCalls(actor: AnyActorRef): number {
  return mailboxes.get(actor)?.pending.size ?? 0;
}
