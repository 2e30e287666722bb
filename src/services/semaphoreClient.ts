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
 * - **A waiter is small**: one object, one inbox closure and the caller's promise (~0.75 KB
 *   with the semaphore's entry), so deep queues cost memory in proportion, not in frames.
 * - **One in-flight `acquire` per id per semaphore**: a second one answers `already_held`
 *   without a round trip (the id is waiting or holding, and its inbox belongs to the first).
 * - **`acquire` never sees `preempted`**: the semaphore sends it only to a holder that declared
 *   itself `orphaned` (a render kept only for the store), and an `acquire`'s inbox is gone once
 *   it holds. A caller that marks itself registers its own inbox (`renderService` does).
 *
 * ## Races
 * - *Grant after giving up*: a timeout or abort releases at once, but if it fires while the
 *   semaphore is mid-step (from a listener, say) that release queues behind a grant already on
 *   its way. The inbox keeps and ignores it; the release then frees the slot. `release` is a
 *   call answered by the step that handles it, so once it resolves nothing more can come for
 *   the id, and only then is the id free for another `acquire`: the drain is exact.
 * - *Grant before the caller reads `queued`*: another caller's release can run between the
 *   reply and its reading. The inbox is registered before the request and keeps the grant.
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
import { CallError, call, cast, inbox } from '../actors/call.js';
import type { ProbeLimiterStats, ProbeSlotOutcome } from '../machines/probeLimiter.js';
import {
  ADMISSION_CLASSES,
  type AdmissionClass,
  type RequestOutcome,
  type SemaphoreStats,
  type WaiterMessage,
} from '../machines/semaphore.js';

export { ADMISSION_CLASSES, type AdmissionClass, type ProbeSlotOutcome };

/** How long `release` waits before leaving the slot to the holder's monitor: a bound, not a budget. */
export const RELEASE_TIMEOUT_MS = 5_000;
/** `retryAfter` when the semaphore cannot be asked: the floor the estimate is clamped to anyway. */
export const UNREACHABLE_RETRY_AFTER_S = 1;
/** `stats` default; callers with a budget of their own (readiness, metrics) pass 1 s. */
export const STATS_TIMEOUT_MS = 5_000;

export interface SlotRequestOptions {
  /** One of `ADMISSION_CLASSES`. @default 'interactive' (never displaced, outranked by nothing) */
  readonly class?: AdmissionClass;
}

export interface AcquireOptions extends SlotRequestOptions {
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
const RELEASE_CALL = Object.freeze({ timeout: RELEASE_TIMEOUT_MS });
const TIMEOUT: AcquireOutcome = Object.freeze({ type: 'timeout' });
const ALREADY_HELD: AcquireOutcome = Object.freeze({ type: 'already_held' });

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
  options: SlotRequestOptions = {},
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
  const inFlightIds = ids;
  return new Promise<AcquireOutcome>((resolve, reject) => {
    new Acquisition(sem, id, timeoutMs, signal, inFlightIds, resolve, reject).send(cls);
  });
}

/**
 * One `acquire` in flight. A plain object with prototype methods rather than a suspended async
 * function or per-instance arrow fields: a queued waiter lives as long as it waits, and this
 * keeps it to one object, one inbox closure and the caller's promise.
 */
class Acquisition {
  /** A message that arrived while nobody waited for one: before `queued`, or after giving up. */
  private early: WaiterMessage | undefined = undefined;
  /** True only while queued and waiting for `granted`/`displaced`. */
  private waiting = false;
  private timer: ReturnType<typeof setTimeout> | undefined = undefined;
  private onAbort: (() => void) | undefined = undefined;
  private readonly stopInbox: () => void;

  constructor(
    private readonly sem: AnyActorRef,
    private readonly id: string,
    private readonly timeoutMs: number,
    private readonly signal: AbortSignal | undefined,
    private readonly ids: Set<string>,
    private readonly resolve: (outcome: AcquireOutcome) => void,
    private readonly reject: (error: unknown) => void,
  ) {
    // Registered before the request: between the `queued` reply and this object reading it,
    // another caller's release can already have granted us.
    this.stopInbox = inbox<WaiterMessage>(sem, id, (message) => this.deliver(message));
  }

  send(cls: AdmissionClass | undefined): void {
    call<RequestOutcome>(this.sem, requestEvent(this.id, cls)).then(
      (outcome) => this.answered(outcome),
      (error) => this.failed(error),
    );
  }

  private deliver(message: WaiterMessage): void {
    if (!this.waiting) {
      this.early ??= message; // kept until `answered`, or drained after giving up
      return;
    }
    this.waiting = false;
    this.disarm();
    this.finish(message);
  }

  private answered(outcome: RequestOutcome): void {
    if (outcome.type !== 'queued') {
      this.finish(outcome);
      return;
    }
    if (this.early !== undefined) {
      this.finish(this.early);
      return;
    }
    this.waiting = true;
    if (this.timeoutMs !== Number.POSITIVE_INFINITY) {
      this.timer = setTimeout(() => this.giveUp(TIMEOUT), this.timeoutMs);
    }
    if (this.signal !== undefined) {
      this.onAbort = () => this.giveUp(undefined);
      this.signal.addEventListener('abort', this.onAbort, { once: true });
    }
  }

  private failed(error: unknown): void {
    // A wedged semaphore may still handle the request later; leave nothing behind for it.
    if (error instanceof CallError && error.code === 'ERR_CALL_TIMEOUT') {
      cast(this.sem, { type: 'release', id: this.id });
    }
    this.cleanUp();
    this.reject(error);
  }

  /**
   * Releases the id, then drains. The release frees the slot if a grant got there first; a
   * grant or displacement the semaphore sent before handling the release lands in `deliver`
   * (kept, ignored); once the release is answered nothing more can come for this id. Only
   * then is the id free for another `acquire`. `outcome` undefined means aborted.
   */
  private giveUp(outcome: AcquireOutcome | undefined): void {
    if (!this.waiting) return;
    this.waiting = false;
    this.disarm();
    void release(this.sem, this.id).then(() => {
      this.cleanUp();
      if (outcome !== undefined) this.resolve(outcome);
      else {
        this.reject(
          new CallError('ERR_CALL_ABORTED', 'acquire aborted while queued', {
            cause: this.signal?.reason,
          }),
        );
      }
    });
  }

  private finish(outcome: AcquireOutcome): void {
    this.cleanUp();
    this.resolve(outcome);
  }

  private disarm(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.onAbort !== undefined) this.signal?.removeEventListener('abort', this.onAbort);
    this.onAbort = undefined;
  }

  private cleanUp(): void {
    this.stopInbox();
    this.ids.delete(this.id);
  }
}

/**
 * Gives back `id`'s slot, or takes it out of the queue. Idempotent. Answers `ok` even when the
 * semaphore is stopped or silent for `RELEASE_TIMEOUT_MS`: the holder's monitor is the backstop.
 */
export async function release(sem: AnyActorRef, id: string): Promise<{ readonly type: 'ok' }> {
  try {
    await call(sem, { type: 'release', id }, RELEASE_CALL);
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
