/**
 * Async client helpers for the render semaphore and the probe limiter: the places where a
 * caller's mistake becomes a `TypeError`, where waiting for a grant happens, and where giving
 * up on that wait is made safe. The machines themselves never wait for anything.
 *
 * ## Invariants
 * - **An unknown admission class throws in the caller, before anything is sent.**
 * - **Giving up never leaks a slot**: a timed-out or aborted `acquire` releases its id, which
 *   frees the slot if a grant got there first and drops the waiter otherwise.
 * - **No stray message**: a grant or displacement that lands after the caller gave up is taken
 *   by the same inbox and discarded; the inbox is removed before `acquire` settles.
 * - **One in-flight `acquire` per id per semaphore**: a second one answers `already_held`
 *   without a round trip (the id is waiting or holding, and its inbox belongs to the first).
 *
 * ## Races
 * - *Grant after timeout*: the timer settles the wait, and a grant can still arrive before the
 *   release is sent (any code that runs between the two). `release` is a call, answered in the
 *   transition that handles it, so by the time it resolves every message the semaphore sent
 *   this id before it is already in the inbox, and nothing can follow: the drain is exact.
 * - *Grant in the same step as the `queued` reply* (capacity raised): the inbox is registered
 *   before the request is sent, and keeps a message that arrives before anyone waits on it.
 *
 * ## Outcomes
 * | Helper | Answers |
 * |---|---|
 * | `request` | `granted`, `queued`, `queue_full(retryAfterS)`, `already_held` |
 * | `acquire` | `granted`, `queue_full`, `displaced(retryAfterS)`, `timeout`, `already_held`; abort rejects with `ERR_CALL_ABORTED` |
 * | `release` | `ok`, also when the semaphore is dead or does not answer within 5 s |
 * | `retryAfter` | seconds, or 1 when the semaphore is unreachable |
 * | `stats` | `{ held, queued, capacity, queueSize, queuedByClass }`; rejects on timeout |
 */
import type { AnyActorRef } from 'xstate';
import type { ProbeLimiterStats, ProbeSlotOutcome } from '../machines/probeLimiter.js';
import {
  ADMISSION_CLASSES,
  type AdmissionClass,
  type RequestOutcome,
  type SemaphoreStats,
  type WaiterMessage,
} from '../machines/semaphore.js';
import { CallError, call, cast, inbox } from './call.js';

export { ADMISSION_CLASSES, type AdmissionClass, type ProbeSlotOutcome };

/** How long `release` waits before leaving the slot to the holder's monitor: a bound, not a budget. */
export const RELEASE_TIMEOUT_MS = 5_000;
/** `retryAfter` when the semaphore cannot be asked: the floor the estimate is clamped to anyway. */
export const UNREACHABLE_RETRY_AFTER_S = 1;
/** `stats` default; callers with a budget of their own (readiness, metrics) pass 1 s. */
export const STATS_TIMEOUT_MS = 5_000;

export interface RequestOptions {
  /** One of `ADMISSION_CLASSES`. @default 'interactive' (never displaced, outranked by nothing) */
  readonly class?: AdmissionClass;
}

export interface AcquireOptions extends RequestOptions {
  /** Milliseconds to wait once queued; then the id is released and `timeout` answered. @default Infinity */
  readonly timeout?: number;
  /** Aborting while queued releases the id and rejects with `CallError` `ERR_CALL_ABORTED`. */
  readonly signal?: AbortSignal;
}

export type AcquireOutcome =
  | { readonly type: 'granted' }
  | { readonly type: 'queue_full'; readonly retryAfterS: number }
  | { readonly type: 'displaced'; readonly retryAfterS: number }
  | { readonly type: 'timeout' }
  | { readonly type: 'already_held' };

const OK = Object.freeze({ type: 'ok' as const });
const TIMEOUT: AcquireOutcome = Object.freeze({ type: 'timeout' });
const ALREADY_HELD: AcquireOutcome = Object.freeze({ type: 'already_held' });
const TIMED_OUT = Symbol('timed out');
const ABORTED = Symbol('aborted');

/** Ids with an `acquire` in flight, per semaphore. */
const inFlight = new WeakMap<AnyActorRef, Set<string>>();

/** Validates an admission class at the boundary; `undefined` means the default. */
export function admissionClass(value: unknown): AdmissionClass | undefined {
  if (value === undefined || (ADMISSION_CLASSES as readonly unknown[]).includes(value)) {
    return value as AdmissionClass | undefined;
  }
  throw new TypeError(
    `unknown admission class ${JSON.stringify(value)}, expected one of ${ADMISSION_CLASSES.join(', ')}`,
  );
}

function requestEvent(id: string, cls: AdmissionClass | undefined) {
  return cls === undefined
    ? { type: 'request' as const, id }
    : { type: 'request' as const, id, class: cls };
}

/**
 * Asks for a slot and answers at once. A `queued` caller later receives `{ type: 'granted' }`
 * or `{ type: 'displaced', retryAfterS }` through `inbox(sem, id, …)`, which it must register
 * before calling; once granted it holds the slot and must release it.
 */
export function request(
  sem: AnyActorRef,
  id: string,
  options: RequestOptions = {},
): Promise<RequestOutcome> {
  const cls = admissionClass(options.class);
  return call<RequestOutcome>(sem, requestEvent(id, cls));
}

/**
 * Takes a slot for `id`, waiting for one if the queue has room. Waiters are served oldest
 * first within a class, higher classes first.
 */
export function acquire(
  sem: AnyActorRef,
  id: string,
  options: AcquireOptions = {},
): Promise<AcquireOutcome> {
  const cls = admissionClass(options.class);
  const timeoutMs = options.timeout ?? Number.POSITIVE_INFINITY;
  if (!(timeoutMs >= 0)) throw new RangeError(`timeout must be >= 0 ms, got ${options.timeout}`);
  const { signal } = options;
  if (signal?.aborted) {
    return Promise.reject(
      new CallError('ERR_CALL_ABORTED', 'acquire aborted before it was sent', {
        cause: signal.reason,
      }),
    );
  }
  let ids = inFlight.get(sem);
  if (ids === undefined) inFlight.set(sem, (ids = new Set()));
  if (ids.has(id)) return Promise.resolve(ALREADY_HELD);
  ids.add(id);
  return acquireFor(sem, id, cls, timeoutMs, signal, ids);
}

async function acquireFor(
  sem: AnyActorRef,
  id: string,
  cls: AdmissionClass | undefined,
  timeoutMs: number,
  signal: AbortSignal | undefined,
  ids: Set<string>,
): Promise<AcquireOutcome> {
  let early: WaiterMessage | undefined;
  let settle: ((value: WaiterMessage | typeof TIMED_OUT | typeof ABORTED) => void) | undefined;
  // Registered before the request: a grant may arrive in the very step that answers `queued`.
  // After the wait is settled this same handler is the drain: it keeps and ignores.
  const stopInbox = inbox<WaiterMessage>(sem, id, (message) => {
    const waiting = settle;
    if (waiting === undefined) early ??= message;
    else {
      settle = undefined;
      waiting(message);
    }
  });
  try {
    let outcome: RequestOutcome;
    try {
      outcome = await call<RequestOutcome>(sem, requestEvent(id, cls));
    } catch (error) {
      // A wedged semaphore may still handle the request later; leave nothing behind for it.
      if (error instanceof CallError && error.code === 'ERR_CALL_TIMEOUT') {
        cast(sem, { type: 'release', id });
      }
      throw error;
    }
    if (outcome.type !== 'queued') return outcome;
    const waited =
      early ??
      (await new Promise<WaiterMessage | typeof TIMED_OUT | typeof ABORTED>((resolve) => {
        let timer: ReturnType<typeof setTimeout> | undefined;
        const onAbort = () => giveUp(ABORTED);
        const giveUp = (why: typeof TIMED_OUT | typeof ABORTED) => {
          if (settle !== finish) return;
          settle = undefined;
          finish(why);
        };
        const finish = (value: WaiterMessage | typeof TIMED_OUT | typeof ABORTED) => {
          if (timer !== undefined) clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          resolve(value);
        };
        settle = finish;
        if (timeoutMs !== Number.POSITIVE_INFINITY) {
          timer = setTimeout(() => giveUp(TIMED_OUT), timeoutMs);
        }
        signal?.addEventListener('abort', onAbort, { once: true });
      }));
    if (typeof waited === 'object') return waited;
    // Gave up. Whatever landed since the wait settled is drained by the handler above, and
    // the release frees the slot if that was a grant.
    await release(sem, id);
    if (waited === ABORTED) {
      throw new CallError('ERR_CALL_ABORTED', 'acquire aborted while queued', {
        cause: signal?.reason,
      });
    }
    return TIMEOUT;
  } finally {
    stopInbox();
    ids.delete(id);
  }
}

/**
 * Gives back `id`'s slot, or takes it out of the queue. Idempotent. Answers `ok` even when the
 * semaphore is stopped or silent for `RELEASE_TIMEOUT_MS`: the holder's monitor is the backstop.
 */
export async function release(sem: AnyActorRef, id: string): Promise<{ readonly type: 'ok' }> {
  try {
    await call(sem, { type: 'release', id }, { timeout: RELEASE_TIMEOUT_MS });
  } catch (error) {
    if (!(error instanceof CallError)) throw error;
  }
  return OK;
}

/** The Retry-After (s) a rejection would carry now; 1 when the semaphore cannot be asked. */
export async function retryAfter(sem: AnyActorRef): Promise<number> {
  try {
    return await call<number>(sem, { type: 'retryAfter' });
  } catch (error) {
    if (!(error instanceof CallError)) throw error;
    return UNREACHABLE_RETRY_AFTER_S;
  }
}

/** Occupancy and limits. Rejects with `CallError` if no answer comes within `timeoutMs`. */
export function stats(sem: AnyActorRef, timeoutMs = STATS_TIMEOUT_MS): Promise<SemaphoreStats> {
  return call<SemaphoreStats>(sem, { type: 'stats' }, { timeout: timeoutMs });
}

/** Asks the probe limiter for a slot: granted, or refused at once with Retry-After 1. */
export function acquireProbeSlot(limiter: AnyActorRef, id: string): Promise<ProbeSlotOutcome> {
  return call<ProbeSlotOutcome>(limiter, { type: 'acquire', id });
}

/** The probe limiter's occupancy. `release(limiter, id)` gives a probe slot back. */
export function probeStats(
  limiter: AnyActorRef,
  timeoutMs = STATS_TIMEOUT_MS,
): Promise<ProbeLimiterStats> {
  return call<ProbeLimiterStats>(limiter, { type: 'stats' }, { timeout: timeoutMs });
}
