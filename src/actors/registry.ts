/**
 * A unique registry: key → the one actor serving it, with start-or-join as a single operation.
 * The render and probe coordinators are created through it, so a key never has two.
 *
 * `startOrJoin(key)`, per attempt:
 * 1. No entry: put a *starting* placeholder under the key and run `start` (which may await an
 *    admission and be refused). Started: register the actor, return `started`. Refused or
 *    thrown: remove the placeholder, return `failed` (or rethrow). Nothing stays registered.
 * 2. A placeholder: wait for that start to settle, then look again (this is still step 1: a
 *    refused start leaves the key empty and the waiter runs its own start).
 * 3. A registered actor: `join` it. If the join fails because the actor is stopping, go back to
 *    step 1 as a new attempt; after `attempts` attempts the answer is `unavailable`.
 *
 * ## Invariants
 * - **At most one actor per key** is registered or starting at any moment.
 * - **An entry never outlives its actor.** It is removed when the actor completes, errors or
 *   stops, or when `unregister(key, actor)` names that same actor; a stale `unregister` from an
 *   old actor never removes its successor.
 * - **`size` counts registered actors only** (placeholders are in `starting`): it is the
 *   `renders_running` gauge, which counts coordinators that exist, queued or lingering.
 *
 * ## Races
 * - *Two starts of one key in one tick.* The placeholder is set before the first `await`, so the
 *   second caller finds it and waits.
 * - *Join against a stopping actor.* The join's call fails with `ERR_CALLEE_STOPPED` (or the actor
 *   is seen inactive); the entry is already gone (its completion observer ran first), so the
 *   retry starts afresh. Coordinators `unregister` before broadcasting a failure, which closes
 *   the window where a joiner would join an actor that is failing.
 * - *A stuck start or join.* Waiting for a placeholder and the join share one deadline per
 *   attempt (`joinTimeoutMs`); on expiry the join's signal aborts and the answer is
 *   `unavailable`. A join that expired may still have been handled: the joiner's own monitor
 *   is what cleans it up on the actor's side.
 *
 * ## Outcomes
 * `started` | `joined` | `failed` (start refused: client-caused, e.g. queue full) |
 * `unavailable` (`attempts_exhausted` or `join_timeout`). Invalid options throw `RangeError`;
 * a malformed `start` answer or a join error that is not about stopping rejects.
 */
import type { AnyActorRef, Subscription } from 'xstate';
import { CallError } from './call.js';

/** How long a joiner waits for a starting placeholder plus its join; GenServer's call default. */
export const DEFAULT_JOIN_TIMEOUT_MS = 5_000;
/** Start-or-join attempts before `unavailable`; a stopping actor is replaced within one or two. */
export const DEFAULT_START_ATTEMPTS = 5;

/** What `start` answers. `failed` leaves nothing registered under the key. */
export type StartResult<A, S = undefined, F = unknown> =
  | { readonly type: 'started'; readonly actor: A; readonly value: S }
  | { readonly type: 'failed'; readonly failure: F };

export type StartOrJoinOutcome<A, S = undefined, J = unknown, F = unknown> =
  | { readonly type: 'started'; readonly actor: A; readonly value: S; readonly attempts: number }
  | { readonly type: 'joined'; readonly actor: A; readonly value: J; readonly attempts: number }
  | { readonly type: 'failed'; readonly failure: F; readonly attempts: number }
  | {
      readonly type: 'unavailable';
      readonly reason: 'attempts_exhausted' | 'join_timeout';
      readonly attempts: number;
    };

export interface StartOrJoinOptions<K, A, S, J, F> {
  /** Creates the actor for `key`, or refuses. Runs only while the key is empty. */
  start(key: K): StartResult<A, S, F> | Promise<StartResult<A, S, F>>;
  /** Joins a running actor (typically a `call` with `signal`); rejects if it is stopping. */
  join(actor: A, key: K, signal: AbortSignal): J | Promise<J>;
  /** Deadline per attempt for waiting on a start plus the join. @default 5000 */
  readonly joinTimeoutMs?: number;
  /** Attempts before `unavailable`. @default 5 */
  readonly attempts?: number;
}

export interface RegistryOptions<K, A> {
  /** Called when a registered actor ends in XState `error` (after its entry is removed). */
  readonly onActorError?: (error: unknown, key: K, actor: A) => void;
  /** Default for every `startOrJoin`. @default 5000 */
  readonly joinTimeoutMs?: number;
  /** Default for every `startOrJoin`. @default 5 */
  readonly attempts?: number;
}

interface Starting {
  readonly state: 'starting';
  readonly settled: Promise<void>;
}

interface Running<A> {
  readonly state: 'running';
  readonly actor: A;
  subscription: Subscription | undefined;
}

const EXPIRED: unique symbol = Symbol('expired');

/** One attempt's deadline: a timer, the signal handed to `join`, and a promise to race. */
class Deadline {
  readonly #controller = new AbortController();
  readonly #timer: ReturnType<typeof setTimeout>;
  readonly expired: Promise<typeof EXPIRED>;
  constructor(ms: number) {
    let wake!: (value: typeof EXPIRED) => void;
    this.expired = new Promise((resolve) => {
      wake = resolve;
    });
    this.#timer = setTimeout(() => {
      this.#controller.abort(new CallError('ERR_CALL_TIMEOUT', `join not answered in ${ms} ms`));
      wake(EXPIRED);
    }, ms);
  }
  get signal(): AbortSignal {
    return this.#controller.signal;
  }
  race<T>(work: Promise<T>): Promise<T | typeof EXPIRED> {
    return Promise.race([work, this.expired]);
  }
  clear(): void {
    clearTimeout(this.#timer);
  }
}

function isStopping(error: unknown, actor: AnyActorRef): boolean {
  if (error instanceof CallError && error.code === 'ERR_CALLEE_STOPPED') return true;
  return actor.getSnapshot().status !== 'active';
}

function checkPositiveInt(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1) {
    throw new RangeError(`${name} must be a positive integer, got ${value}`);
  }
  return value;
}

function checkTimeoutMs(value: number): number {
  if (!(typeof value === 'number' && value >= 0 && value <= 2_147_483_647)) {
    throw new RangeError(`joinTimeoutMs must be 0..2147483647, got ${value}`);
  }
  return value;
}

export class Registry<K, A extends AnyActorRef> {
  readonly #entries = new Map<K, Starting | Running<A>>();
  readonly #onActorError: ((error: unknown, key: K, actor: A) => void) | undefined;
  readonly #joinTimeoutMs: number;
  readonly #attempts: number;
  #registered = 0;

  constructor(options: RegistryOptions<K, A> = {}) {
    this.#onActorError = options.onActorError;
    this.#joinTimeoutMs = checkTimeoutMs(options.joinTimeoutMs ?? DEFAULT_JOIN_TIMEOUT_MS);
    this.#attempts = checkPositiveInt('attempts', options.attempts ?? DEFAULT_START_ATTEMPTS);
  }

  /** Registered actors (placeholders excluded). */
  get size(): number {
    return this.#registered;
  }

  /** Starts in progress (placeholders). */
  get starting(): number {
    return this.#entries.size - this.#registered;
  }

  /** The registered actor for `key`, if any (a starting key has none yet). */
  get(key: K): A | undefined {
    const entry = this.#entries.get(key);
    return entry?.state === 'running' ? entry.actor : undefined;
  }

  /** Keys with a registered actor, in registration order. */
  *keys(): IterableIterator<K> {
    for (const [key, entry] of this.#entries) if (entry.state === 'running') yield key;
  }

  /** Removes `key` only if it still maps to `actor`. Returns whether it did. */
  unregister(key: K, actor: A): boolean {
    const entry = this.#entries.get(key);
    if (entry?.state !== 'running' || entry.actor !== actor) return false;
    this.#entries.delete(key);
    this.#registered -= 1;
    entry.subscription?.unsubscribe();
    entry.subscription = undefined;
    return true;
  }

  /**
   * Start-or-join as one step; see the module note for the algorithm. Throws `RangeError`
   * synchronously for invalid `attempts` or `joinTimeoutMs`.
   */
  startOrJoin<S, J, F>(
    key: K,
    options: StartOrJoinOptions<K, A, S, J, F>,
  ): Promise<StartOrJoinOutcome<A, S, J, F>> {
    const attempts = checkPositiveInt('attempts', options.attempts ?? this.#attempts);
    const timeoutMs = checkTimeoutMs(options.joinTimeoutMs ?? this.#joinTimeoutMs);
    return this.#startOrJoin(key, options, attempts, timeoutMs);
  }

  async #startOrJoin<S, J, F>(
    key: K,
    options: StartOrJoinOptions<K, A, S, J, F>,
    attempts: number,
    timeoutMs: number,
  ): Promise<StartOrJoinOutcome<A, S, J, F>> {
    for (let attempt = 1; attempt <= attempts; attempt++) {
      let entry = this.#entries.get(key);
      if (entry === undefined) return this.#start(key, options, attempt);
      const deadline = new Deadline(timeoutMs);
      try {
        while (entry?.state === 'starting') {
          if ((await deadline.race(entry.settled)) === EXPIRED) {
            return { type: 'unavailable', reason: 'join_timeout', attempts: attempt };
          }
          entry = this.#entries.get(key);
        }
        if (entry === undefined) return await this.#start(key, options, attempt);
        const { actor } = entry;
        if (actor.getSnapshot().status !== 'active') {
          this.unregister(key, actor);
          continue;
        }
        let value: J | typeof EXPIRED;
        try {
          value = await deadline.race((async () => options.join(actor, key, deadline.signal))());
        } catch (error) {
          if (deadline.signal.aborted) {
            return { type: 'unavailable', reason: 'join_timeout', attempts: attempt };
          }
          if (isStopping(error, actor)) {
            // Its completion observer has normally removed it already; a still-active actor
            // that refuses joins while stopping is left to unregister itself.
            if (actor.getSnapshot().status !== 'active') this.unregister(key, actor);
            continue;
          }
          throw error;
        }
        if (value === EXPIRED) {
          return { type: 'unavailable', reason: 'join_timeout', attempts: attempt };
        }
        return { type: 'joined', actor, value, attempts: attempt };
      } finally {
        deadline.clear();
      }
    }
    return { type: 'unavailable', reason: 'attempts_exhausted', attempts };
  }

  async #start<S, J, F>(
    key: K,
    options: StartOrJoinOptions<K, A, S, J, F>,
    attempt: number,
  ): Promise<StartOrJoinOutcome<A, S, J, F>> {
    let settle!: () => void;
    const placeholder: Starting = {
      state: 'starting',
      settled: new Promise<void>((resolve) => {
        settle = resolve;
      }),
    };
    this.#entries.set(key, placeholder);
    try {
      const result = await options.start(key);
      if (result?.type === 'started') {
        if (result.actor.getSnapshot().status === 'active') this.#register(key, result.actor);
        return { type: 'started', actor: result.actor, value: result.value, attempts: attempt };
      }
      if (result?.type === 'failed') {
        return { type: 'failed', failure: result.failure, attempts: attempt };
      }
      throw new TypeError(`start() must answer { type: 'started' | 'failed' }`);
    } finally {
      if (this.#entries.get(key) === placeholder) this.#entries.delete(key);
      settle();
    }
  }

  #register(key: K, actor: A): void {
    const entry: Running<A> = { state: 'running', actor, subscription: undefined };
    this.#entries.set(key, entry);
    this.#registered += 1;
    entry.subscription = actor.subscribe({
      complete: () => {
        this.unregister(key, actor);
      },
      error: (error: unknown) => {
        this.unregister(key, actor);
        this.#onActorError?.(error, key, actor);
      },
    });
  }
}
