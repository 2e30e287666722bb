/**
 * The call/reply protocol as data: what a request carries, what a reply and a notify look like,
 * and the one place a reply is built. The runtime half (waiting for a reply, timeouts, inboxes)
 * is `actors/call.ts`; every chart answers through `answer` or `reply` below.
 *
 * ## Contract
 * - A request is an ordinary event plus an envelope: `callId` (absent: a cast, never answered)
 *   and `replyTo` (absent: the reply is emitted for the callee's `reply` listener, which is how
 *   `call()` from async code hears it; present: the reply is sent to that actor).
 * - A reply is `{ type: 'reply', callId, payload }`, built only here, so the shape cannot drift
 *   between charts.
 * - A callee answers in the transition that handles the request, or later from its context
 *   (a queued waiter granted by a release): either way through `answer`, which needs only the
 *   envelope it kept.
 *
 * Imports nothing of the project: this file is on the ground floor.
 */
import {
  type ActionFunction,
  type AnyActorRef,
  type EventObject,
  enqueueActions,
  type MachineContext,
} from 'xstate';

/** What every call event carries besides its own fields. */
export interface CallEnvelope {
  /** Correlation id; unique for the life of the process. */
  readonly callId?: number;
  /** Where the reply goes. Absent: emitted to the callee's `reply` listeners. */
  readonly replyTo?: AnyActorRef;
}

/** A caller kept in context to be answered later: an envelope whose call id is known. */
export interface Caller {
  readonly callId: number;
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

/** Where a step puts its messages: XState's `enqueue` inside `enqueueActions` fits it. */
export interface Outbox<E = never> {
  emit(event: E | ReplyEvent<unknown>): void;
  sendTo(target: AnyActorRef, event: ReplyEvent<unknown>): void;
}

/** The caller an event names, or `undefined` for a cast (kept to answer it later). */
export function callerOf(request: object): Caller | undefined {
  const { callId, replyTo } = request as CallEnvelope;
  if (callId === undefined) return undefined;
  return replyTo ? { callId, replyTo } : { callId };
}

/**
 * Answers a call: `sendTo(replyTo)` when the caller is an actor, an emitted `reply` otherwise,
 * nothing for a cast (an event without a `callId`). A step queues its reply in the same `enqueueActions` as its other
 * messages, so the reply keeps its place among them.
 */
export function answer<E>(out: Outbox<E>, request: object, payload: unknown): void {
  // Any event may be handed in (a chart's event union mixes calls and casts); only the
  // envelope is read.
  const { callId, replyTo } = request as CallEnvelope;
  if (callId === undefined) return;
  const message: ReplyEvent<unknown> = { type: 'reply', callId, payload };
  if (replyTo) out.sendTo(replyTo, message);
  else out.emit(message);
}

/**
 * The action that answers the call being handled: `reply(({ event, context }) => payload)`.
 * A cast gets no reply, and `payload` is not even evaluated. The returned action is loose on
 * context on purpose (XState types `self` invariantly, which would reject a partial annotation).
 */
export function reply<
  TContext extends MachineContext,
  TEvent extends EventObject & CallEnvelope,
  P = unknown,
>(
  payload: (args: { context: TContext; event: TEvent }) => P,
): ActionFunction<any, TEvent, any, any, any, any, any, any, any> {
  return enqueueActions(({ context, event, enqueue }: any) => {
    const request = event as TEvent;
    if (request.callId === undefined) return;
    answer(
      enqueue as Outbox<unknown>,
      request,
      payload({ context: context as TContext, event: request }),
    );
  }) as ActionFunction<any, TEvent, any, any, any, any, any, any, any>;
}
