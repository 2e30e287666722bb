/**
 * Render claims: at most one node renders a cache key at a time, decided in Redis. Before a node
 * renders a MISS it claims `ap:render:<key>` (`SET NX PX`, value `<nodeId>|<advertiseUrl>`); a
 * node that finds the key claimed by a peer forwards the request to that peer instead.
 *
 * ## Invariants
 * - **One Redis claim per key per node, however many requests share it.** Local requests for a
 *   key hold a reference on one local entry; the first one claims, the last one out releases.
 * - **Only the owner renews or deletes.** Renewal and release are compare-and-set Lua scripts on
 *   the claim's exact value, so a node never extends or drops a claim a peer took after ours
 *   lapsed.
 * - **Every Redis call has a deadline, and its failure means "act alone"** (`type: 'alone'`):
 *   a duplicate render at worst, never a lost request or an error sent to a client.
 * - **A dead owner's claim lapses within the lease**: only a live renewal loop extends it.
 *
 * ## Races
 * - *Two local requests claim the same key at once*: the entry is created synchronously before
 *   the first await, so the second waits for the first one's answer instead of asking Redis.
 * - *Our claim lapsed (slow loop, Redis blip) and a peer took it*: the renewal finds a foreign
 *   value and stops; the render goes on (a duplicate at worst) and the release deletes nothing.
 * - *A timed-out `SET` that landed after all*: we act alone without renewing, so the stray claim
 *   lapses within one lease; peers forwarding to us meanwhile are served by our render.
 * - *The claim we find is our own* (a release that failed, an entry that just closed): adopted
 *   by a compare-and-set renewal rather than forwarded to ourselves.
 *
 * ## Events
 * | Call | Answers |
 * |---|---|
 * | `acquire(key)` | `owned` (a handle to `release()`), `owner` (a peer's id and URL) or `alone` |
 * | `held` | keys this node holds a claim on now (a gauge) |
 * | `close()` | stops renewals and deletes every claim still held (best-effort) |
 */
import type { Redis } from 'ioredis';

/** Prefix of every render-claim key in Redis. */
export const CLAIM_KEY_PREFIX = 'ap:render:';
/** Renew every third of the lease: two renewals may fail (a GC pause, a blip) before it lapses. */
export const RENEWALS_PER_LEASE = 3;
/** Separator between the node id and its URL in a claim's value (ids cannot contain it). */
const VALUE_SEPARATOR = '|';

/** PEXPIRE only if the value is still ours. */
const RENEW_SCRIPT = `if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0`;
/** DEL only if the value is still ours. */
const RELEASE_SCRIPT = `if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0`;

export interface ClaimHandle {
  /** Drops this request's reference; the last one deletes the claim. Idempotent. */
  release(): void;
}

export type ClaimOutcome =
  | { readonly type: 'owned'; readonly handle: ClaimHandle }
  | { readonly type: 'owner'; readonly nodeId: string; readonly url: string }
  | { readonly type: 'alone'; readonly reason: 'unreachable' | 'malformed' | 'closed' };

export interface RenderClaimsOptions {
  readonly redis: Redis;
  readonly nodeId: string;
  readonly advertiseUrl: string;
  readonly leaseMs: number;
  /** Deadline of every Redis call, in ms. */
  readonly deadlineMs: number;
  /** Every Redis failure, for the up gauge and the log (never thrown to a caller). */
  readonly onRedis?: (ok: boolean, error?: unknown) => void;
}

/** What Redis said, before a handle is attached. */
type Answer = { readonly type: 'owned' } | Exclude<ClaimOutcome, { type: 'owned' }>;

interface Entry {
  refs: number;
  /** Settles once Redis answered for the first reference. */
  readonly ready: Promise<Answer>;
  owned: boolean;
  timer: ReturnType<typeof setInterval> | undefined;
}

/** Rejects after `ms` (the call itself may still land; callers treat that as "act alone"). */
export function withDeadline<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`redis call exceeded ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(t);
        reject(e);
      },
    );
  });
}

export function parseClaimValue(value: string): { nodeId: string; url: string } | null {
  const at = value.indexOf(VALUE_SEPARATOR);
  if (at <= 0 || at === value.length - 1) return null;
  const url = value.slice(at + 1);
  if (!/^https?:\/\/[^/]+$/.test(url)) return null;
  return { nodeId: value.slice(0, at), url };
}

export class RenderClaims {
  readonly #o: RenderClaimsOptions;
  readonly #value: string;
  readonly #entries = new Map<string, Entry>();
  #closed = false;

  constructor(options: RenderClaimsOptions) {
    if (options.nodeId.includes(VALUE_SEPARATOR) || options.nodeId === '') {
      throw new TypeError(`RenderClaims: nodeId must be non-empty without "${VALUE_SEPARATOR}"`);
    }
    if (!Number.isSafeInteger(options.leaseMs) || options.leaseMs < RENEWALS_PER_LEASE) {
      throw new RangeError(`RenderClaims: leaseMs must be an integer ≥ ${RENEWALS_PER_LEASE}`);
    }
    this.#o = options;
    this.#value = `${options.nodeId}${VALUE_SEPARATOR}${options.advertiseUrl}`;
  }

  /** Keys this node holds a live claim on. */
  get held(): number {
    let n = 0;
    for (const e of this.#entries.values()) if (e.owned) n++;
    return n;
  }

  async acquire(key: string): Promise<ClaimOutcome> {
    if (this.#closed) return { type: 'alone', reason: 'closed' };
    const existing = this.#entries.get(key);
    if (existing) {
      existing.refs++;
      const outcome = await existing.ready;
      if (outcome.type === 'owned') return { type: 'owned', handle: this.#handle(key, existing) };
      this.#unref(key, existing);
      return outcome;
    }
    let settle!: (o: Answer) => void;
    const entry: Entry = {
      refs: 1,
      ready: new Promise<Answer>((r) => {
        settle = r;
      }),
      owned: false,
      timer: undefined,
    };
    this.#entries.set(key, entry);
    const outcome = await this.#claim(key);
    if (outcome.type === 'owned' && entry.refs > 0 && !this.#closed) {
      entry.owned = true;
      entry.timer = setInterval(
        () => void this.#renew(key, entry),
        Math.floor(this.#o.leaseMs / RENEWALS_PER_LEASE),
      );
      entry.timer.unref();
      settle(outcome);
      return { type: 'owned', handle: this.#handle(key, entry) };
    }
    settle(outcome.type === 'owned' ? { type: 'alone', reason: 'closed' } : outcome);
    this.#unref(key, entry);
    return outcome.type === 'owned' ? { type: 'alone', reason: 'closed' } : outcome;
  }

  /** Stops every renewal and deletes the claims still held (a graceful shutdown). */
  async close(): Promise<void> {
    this.#closed = true;
    const owned = [...this.#entries].filter(([, e]) => e.owned);
    for (const [, e] of owned) clearInterval(e.timer);
    this.#entries.clear();
    await Promise.allSettled(owned.map(([k]) => this.#delete(k)));
  }

  /** Drops every entry without touching Redis: what a crash leaves behind (tests, fatal exits). */
  abandon(): void {
    this.#closed = true;
    for (const e of this.#entries.values()) clearInterval(e.timer);
    this.#entries.clear();
  }

  #handle(key: string, entry: Entry): ClaimHandle {
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.#unref(key, entry);
      },
    };
  }

  #unref(key: string, entry: Entry) {
    entry.refs--;
    if (entry.refs > 0) return;
    if (this.#entries.get(key) === entry) this.#entries.delete(key);
    if (!entry.owned) return;
    entry.owned = false;
    clearInterval(entry.timer);
    void this.#delete(key);
  }

  async #claim(key: string): Promise<Answer> {
    const { redis, leaseMs, deadlineMs } = this.#o;
    const redisKey = CLAIM_KEY_PREFIX + key;
    try {
      // Twice at most: a claim released between our SET and GET is claimed on the second turn.
      for (let turn = 0; turn < 2; turn++) {
        const set = await withDeadline(
          redis.set(redisKey, this.#value, 'PX', leaseMs, 'NX'),
          deadlineMs,
        );
        if (set === 'OK') return this.#ok({ type: 'owned' });
        const value = await withDeadline(redis.get(redisKey), deadlineMs);
        if (value === null) continue;
        if (value === this.#value) {
          const renewed = await withDeadline(
            redis.eval(RENEW_SCRIPT, 1, redisKey, this.#value, leaseMs),
            deadlineMs,
          );
          if (renewed === 1) return this.#ok({ type: 'owned' });
          continue;
        }
        const owner = parseClaimValue(value);
        if (owner === null) return this.#ok({ type: 'alone', reason: 'malformed' });
        if (owner.nodeId === this.#o.nodeId) {
          // Our id at another URL: a previous incarnation of this node. Act alone; it lapses.
          return this.#ok({ type: 'alone', reason: 'malformed' });
        }
        return this.#ok({ type: 'owner', ...owner });
      }
      return this.#ok({ type: 'alone', reason: 'unreachable' });
    } catch (error) {
      this.#o.onRedis?.(false, error);
      return { type: 'alone', reason: 'unreachable' };
    }
  }

  #ok(outcome: Answer): Answer {
    this.#o.onRedis?.(true);
    return outcome;
  }

  async #renew(key: string, entry: Entry) {
    try {
      const renewed = await withDeadline(
        this.#o.redis.eval(RENEW_SCRIPT, 1, CLAIM_KEY_PREFIX + key, this.#value, this.#o.leaseMs),
        this.#o.deadlineMs,
      );
      this.#o.onRedis?.(true);
      if (renewed !== 1 && entry.owned) {
        // Lapsed and possibly a peer's now: stop renewing; our render goes on regardless.
        entry.owned = false;
        clearInterval(entry.timer);
      }
    } catch (error) {
      this.#o.onRedis?.(false, error); // the next turn tries again while the lease lasts
    }
  }

  async #delete(key: string) {
    try {
      await withDeadline(
        this.#o.redis.eval(RELEASE_SCRIPT, 1, CLAIM_KEY_PREFIX + key, this.#value),
        this.#o.deadlineMs,
      );
      this.#o.onRedis?.(true);
    } catch (error) {
      this.#o.onRedis?.(false, error); // it lapses within the lease
    }
  }
}
