/**
 * GenServer-style messaging between async code and XState actors.
 *
 * A *call* is an event that carries a reply address (`replyTo`) and a correlation id
 * (`callId`). The callee answers from an action in the same transition that handles the
 * request, so a call never waits inside an actor: the callee's scheduler is never blocked, and
 * a caller that awaits is the only thing that waits.
 *
 * ## Invariants
 * - **One listener per callee, not one per call.** The first `call()` to an actor attaches a
 *   single `actor.on('reply')` listener and a `Map<callId, pending>`; every later call reuses it.
 * - **A reply reaches only the call that asked.** Ids are process-unique and never reused; a
 *   reply whose id is no longer pending (the caller timed out or aborted) is dropped.
 * - **Giving up never touches the callee.** A timeout or abort settles the caller's promise and
 *   forgets the id; the request the callee already handled stays handled. Callers that must undo
 *   an effect (a slot granted after they stopped waiting) send the undo themselves.
 *
 * ## Reply addresses
 * - `replyTo` absent: the callee `emit`s `{ type: 'reply', callId, payload }` and the listener
 *   routes it. This is how promise callers (`call()`) are answered.
 * - `replyTo` an actor: the callee `sendTo`s it `{ type: 'reply', callId, payload }`. This is how
 *   one machine calls another without either awaiting.
 *
 * Unsolicited messages to a participant (a semaphore grant to a waiter) use the same idea with
 * the participant id as the address: see `notify()` and `inbox()`.
 */
import { type AnyActorRef, emit, enqueueActions, sendTo } from 'xstate';

/** What every call event carries besides its own fields. */
export interface CallEnvelope {
  /** Correlation id; unique for the life of the process. */
  readonly callId?: number;
  /** Where the reply goes. Absent: emitted to the callee's `reply` listeners. */
  readonly replyTo?: AnyActorRef;
}

/** The reply event as emitted by a callee or delivered to a calling actor. */
export interface ReplyEvent<P = unknown> {
  readonly type: 'reply';
  readonly callId: number;
  readonly payload: P;
}

/** An unsolicited message to one participant, emitted by the actor that owns the participant. */
export interface NotifyEvent<M = unknown> {
  readonly type: 'notify';
  readonly to: string;
  readonly message: M;
}

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
  /** Milliseconds before the call settles with `ERR_CALL_TIMEOUT`. @default 5000 */
  readonly timeout?: number;
  /** Aborting settles the call with `ERR_CALL_ABORTED`. */
  readonly signal?: AbortSignal;
}

/** The default call timeout; GenServer's own default, and far above any O(queue) handler. */
export const DEFAULT_CALL_TIMEOUT_MS = 5_000;

type Pending = { resolve: (payload: unknown) => void; reject: (error: unknown) => void };

interface Mailbox {
  readonly pending: Map<number, Pending>;
  readonly inboxes: Map<string, (message: unknown) => void>;
  stopped: boolean;
}

let nextCallId = 1;
const mailboxes = new WeakMap<AnyActorRef, Mailbox>();

/** A fresh, process-unique correlation id. */
export function newCallId(): number {
  return nextCallId++;
}

function mailboxOf(actor: AnyActorRef): Mailbox {
  let box = mailboxes.get(actor);
  if (box) return box;
  const created: Mailbox = { pending: new Map(), inboxes: new Map(), stopped: false };
  box = created;
  mailboxes.set(actor, created);
  actor.on('reply', (event: ReplyEvent) => {
    const waiting = created.pending.get(event.callId);
    if (waiting === undefined) return; // late reply to a caller that gave up: dropped
    created.pending.delete(event.callId);
    waiting.resolve(event.payload);
  });
  actor.on('notify', (event: NotifyEvent) => {
    created.inboxes.get(event.to)?.(event.message);
  });
  const failAll = () => {
    created.stopped = true;
    for (const [id, waiting] of created.pending) {
      created.pending.delete(id);
      waiting.reject(new CallError('ERR_CALLEE_STOPPED', 'the actor stopped before replying'));
    }
  };
  actor.subscribe({ complete: failAll, error: failAll });
  if (actor.getSnapshot().status !== 'active') created.stopped = true;
  return created;
}

/**
 * Sends `request` to `actor` with a fresh `callId` and resolves with the payload the actor
 * replies. Rejects with a `CallError` on timeout, abort, or the actor stopping first.
 */
export function call<R = unknown>(
  actor: AnyActorRef,
  request: { readonly type: string } & Record<string, unknown>,
  options: CallOptions = {},
): Promise<R> {
  const box = mailboxOf(actor);
  if (box.stopped) {
    return Promise.reject(new CallError('ERR_CALLEE_STOPPED', 'the actor is not running'));
  }
  const { signal } = options;
  if (signal?.aborted) {
    return Promise.reject(
      new CallError('ERR_CALL_ABORTED', 'call aborted before it was sent', {
        cause: signal.reason,
      }),
    );
  }
  const callId = nextCallId++;
  let settledSync = false;
  let syncPayload: unknown;
  // Fast path: most callees answer inside `send`, before we would ever arm a timer.
  box.pending.set(callId, {
    resolve: (payload) => {
      settledSync = true;
      syncPayload = payload;
    },
    reject: () => {},
  });
  // Stamped onto the caller's object rather than spread into a copy: a copy per call costs
  // more than the whole transition on a hot callee. Callers pass a fresh literal.
  (request as { callId?: number }).callId = callId;
  actor.send(request);
  if (settledSync) return Promise.resolve(syncPayload as R);
  if (box.stopped) {
    box.pending.delete(callId);
    return Promise.reject(new CallError('ERR_CALLEE_STOPPED', 'the actor stopped before replying'));
  }
  return new Promise<R>((resolve, reject) => {
    const timeoutMs = options.timeout ?? DEFAULT_CALL_TIMEOUT_MS;
    const cleanup = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    const onAbort = () => {
      if (!box.pending.delete(callId)) return;
      cleanup();
      reject(new CallError('ERR_CALL_ABORTED', 'call aborted', { cause: signal?.reason }));
    };
    const timer = setTimeout(() => {
      if (!box.pending.delete(callId)) return;
      signal?.removeEventListener('abort', onAbort);
      reject(new CallError('ERR_CALL_TIMEOUT', `no reply within ${timeoutMs} ms`));
    }, timeoutMs);
    signal?.addEventListener('abort', onAbort, { once: true });
    box.pending.set(callId, {
      resolve: (payload) => {
        cleanup();
        resolve(payload as R);
      },
      reject: (error) => {
        cleanup();
        reject(error);
      },
    });
  });
}

/** Fire and forget: sends `event` and returns nothing. A stopped actor drops it. */
export function cast(actor: AnyActorRef, event: { readonly type: string }): void {
  actor.send(event);
}

/**
 * Registers `handler` as the mailbox of participant `id` on `actor`: every `notify` the actor
 * emits to `id` is delivered to it. Returns the function that removes it. One inbox per id.
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

/**
 * The action that answers a call: `reply(({ event, context }) => payload)`. Sends to `replyTo`
 * when the request named an actor, otherwise emits for the callee's `reply` listener. A request
 * with no `callId` was a cast, and gets no reply.
 */
export function reply<TContext, TEvent extends { type: string } & CallEnvelope, P>(
  payload: (args: { context: TContext; event: TEvent }) => P,
) {
  return enqueueActions(({ context, event, enqueue }: { context: TContext; event: TEvent; enqueue: any }) => {
    if (event.callId === undefined) return;
    const answer: ReplyEvent<P> = {
      type: 'reply',
      callId: event.callId,
      payload: payload({ context, event }),
    };
    if (event.replyTo) enqueue(sendTo(event.replyTo, answer));
    else enqueue(emit(answer as any));
  });
}
