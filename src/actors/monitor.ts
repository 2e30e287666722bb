/**
 * Monitors: Node's stand-in for Erlang's `monitor/2`. One helper turns every way a participant
 * can go away into exactly one `gone` notification to whoever watches it.
 *
 * Watchable targets and what counts as gone:
 * - an XState actor reaching `done`, `error` or `stopped`;
 * - an `AbortSignal` aborting;
 * - an HTTP `ServerResponse`/`IncomingMessage` or any Node stream emitting `close` (prefer the
 *   response: a request also closes once its body has been read, with the client still there);
 * - a `worker_threads` `Worker` or a `ChildProcess` exiting (a child that never spawned counts).
 *
 * ## Invariants
 * - **Exactly once.** Whatever fires, and however many things fire (close, then abort, then
 *   exit), `onGone` runs at most once per watch.
 * - **Unwatch is final.** After `Unwatch` returns, nothing is delivered; calling it again does
 *   nothing. Every listener the watch attached is detached by it or by the delivery.
 * - **Already gone is still gone.** A target that is gone when watched is reported on a
 *   microtask, never synchronously, so a caller can finish its own bookkeeping (store the
 *   `Unwatch`, register the participant) before the callback re-enters it.
 *
 * ## Races
 * - *Gone between check and listen.* Cannot happen: the liveness check and the listener
 *   registration run in one synchronous step, and every source reports through an event or
 *   observer that fires later than that step.
 * - *Gone while the watcher is stopping.* `watchInto` drops the event if the watcher is no
 *   longer active (XState would only warn); the watcher's own exit path must release the rest.
 *
 * ## Events
 * | Event  | Fields                       | When                                         |
 * |--------|------------------------------|----------------------------------------------|
 * | `gone` | `id`, `reason: GoneReason`   | sent by `watchInto` to the watcher, once     |
 *
 * Live signals are delivered synchronously from the emitter's own turn (an abort reaches the
 * watcher inside `controller.abort()`); only the already-gone case is deferred. Watching an
 * actor handles its XState `error`; making that fatal is `system.ts`'s job.
 */
import { ChildProcess } from 'node:child_process';
import { Stream } from 'node:stream';
import { Worker } from 'node:worker_threads';
import type { AnyActorRef } from 'xstate';

/** Why a watched participant went away. */
export type GoneReason =
  | { readonly type: 'closed' }
  | { readonly type: 'aborted'; readonly reason: unknown }
  | { readonly type: 'done'; readonly output: unknown }
  | { readonly type: 'error'; readonly error: unknown }
  | { readonly type: 'stopped' }
  | {
      readonly type: 'exit';
      readonly code: number | null;
      readonly signal: NodeJS.Signals | null;
    };

/** The event `watchInto` sends to the watching actor. */
export interface GoneEvent<Id extends string = string> {
  readonly type: 'gone';
  readonly id: Id;
  readonly reason: GoneReason;
}

/** Anything `watch` understands. HTTP requests and responses are streams. */
export type Watchable = AnyActorRef | AbortSignal | Stream | Worker | ChildProcess;

/** Stops a watch. Idempotent; after it returns no `gone` is delivered for that watch. */
export type Unwatch = () => void;

const CLOSED: GoneReason = Object.freeze({ type: 'closed' });
const STOPPED: GoneReason = Object.freeze({ type: 'stopped' });

/**
 * Calls `onGone` exactly once when `target` goes away, or on a microtask if it already has. A
 * participant given as several targets (its response and its AbortSignal) is gone when the
 * first of them goes. Throws `TypeError` for a target it cannot watch, before attaching anything.
 */
export function watch(
  target: Watchable | readonly Watchable[],
  onGone: (reason: GoneReason) => void,
): Unwatch {
  const targets: readonly Watchable[] = Array.isArray(target) ? target : [target as Watchable];
  let already: GoneReason | undefined;
  for (const each of targets) {
    const reason = goneAlready(each); // also rejects what it cannot watch, before any attach
    if (already === undefined) already = reason;
  }
  const detachers: Array<() => void> = [];
  let live = true;
  const end = () => {
    live = false;
    for (const detach of detachers) detach();
    detachers.length = 0;
  };
  const fire = (reason: GoneReason) => {
    if (!live) return;
    end();
    onGone(reason);
  };
  const unwatch: Unwatch = () => {
    if (live) end();
  };
  if (already !== undefined) {
    const reason = already;
    queueMicrotask(() => fire(reason));
    return unwatch;
  }
  for (const each of targets) detachers.push(attach(each, fire));
  return unwatch;
}

/**
 * Sends `{ type: 'gone', id, reason }` to `watcher` exactly once when `target` goes away. A
 * watcher that has stopped by then gets nothing. Returns the `Unwatch`.
 */
export function watchInto(
  watcher: AnyActorRef,
  id: string,
  target: Watchable | readonly Watchable[],
): Unwatch {
  return watch(target, (reason) => {
    if (watcher.getSnapshot().status !== 'active') return;
    const event: GoneEvent = { type: 'gone', id, reason };
    watcher.send(event);
  });
}

function isActor(target: Watchable): target is AnyActorRef {
  return (
    typeof (target as AnyActorRef).getSnapshot === 'function' &&
    typeof (target as AnyActorRef).subscribe === 'function' &&
    typeof (target as AnyActorRef).send === 'function'
  );
}

function actorGone(actor: AnyActorRef): GoneReason | undefined {
  const snapshot = actor.getSnapshot();
  switch (snapshot.status) {
    case 'active':
      return undefined;
    case 'done':
      return { type: 'done', output: snapshot.output };
    case 'error':
      return { type: 'error', error: snapshot.error };
    default:
      return STOPPED;
  }
}

function goneAlready(target: Watchable): GoneReason | undefined {
  if (target instanceof AbortSignal) {
    return target.aborted ? { type: 'aborted', reason: target.reason } : undefined;
  }
  if (target instanceof Worker) {
    // Node sets threadId to -1 once the thread has exited; the exit code is no longer known.
    return target.threadId === -1 ? { type: 'exit', code: null, signal: null } : undefined;
  }
  if (target instanceof ChildProcess) {
    const { exitCode, signalCode } = target;
    return exitCode !== null || signalCode !== null
      ? { type: 'exit', code: exitCode, signal: signalCode }
      : undefined;
  }
  if (target instanceof Stream) {
    const stream = target as Stream & { closed?: boolean; destroyed?: boolean };
    return stream.closed === true || stream.destroyed === true ? CLOSED : undefined;
  }
  if (isActor(target)) return actorGone(target);
  throw new TypeError(
    'watch() takes an XState actor, AbortSignal, stream/HTTP message, Worker or ChildProcess',
  );
}

function attach(target: Watchable, fire: (reason: GoneReason) => void): () => void {
  if (target instanceof AbortSignal) {
    const onAbort = () => fire({ type: 'aborted', reason: target.reason });
    target.addEventListener('abort', onAbort, { once: true });
    return () => target.removeEventListener('abort', onAbort);
  }
  if (target instanceof Worker) {
    const onExit = (code: number) => fire({ type: 'exit', code, signal: null });
    target.once('exit', onExit);
    return () => target.off('exit', onExit);
  }
  if (target instanceof ChildProcess) {
    // `exit` is the process ending; a child that failed to spawn emits only `error` + `close`.
    const onExit = (code: number | null, signal: NodeJS.Signals | null) =>
      fire({ type: 'exit', code, signal });
    target.once('exit', onExit);
    target.once('close', onExit);
    return () => {
      target.off('exit', onExit);
      target.off('close', onExit);
    };
  }
  if (target instanceof Stream) {
    const onClose = () => fire(CLOSED);
    target.once('close', onClose);
    return () => target.off('close', onClose);
  }
  const actor = target as AnyActorRef;
  const onEnd = () => fire(actorGone(actor) ?? STOPPED);
  const subscription = actor.subscribe({ complete: onEnd, error: onEnd });
  return () => subscription.unsubscribe();
}
