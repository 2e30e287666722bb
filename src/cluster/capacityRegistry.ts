/**
 * The registry client (`CapacityRegistryClient`, made by `createCapacityRegistry`): claims render
 * slots on this node or a peer through the Redis scripts in `scripts.ts`, holds them as
 * `SlotReservation`s (`reservation.ts`), renews the committed ones, and reports what the
 * connection and every command did to the `registryLink` chart, whose state is `stats()`. Its
 * state is private; a reservation reaches it only through the ledger it is handed.
 *
 * ## Invariants
 * - **`null` means no room; a throw means "could not ask"** (`RegistryError`, with the worker
 *   named when one is involved). The caller falls back to acting alone on a throw.
 * - **Every reservation ends exactly once** here (released, lost, or handed off) and the chart
 *   hears it once, so `reserved`/`committed` are the slots this process still owes.
 * - **Committed holds are renewed in one script call** per `holdLeaseMs / 3`, never one each.
 *   A hold found lapsed is re-asserted (its render is still running) and reported as `lost`.
 * - **Malformed records never stop a selection**: the worker is skipped and reported through
 *   `onError` naming it; `reserve` on a malformed worker throws naming it.
 *
 * ## Races
 * - *A slot frees while a selection waits* (`waitMs`): the wait listens on the wake channel and
 *   also sleeps no longer than the refusal's `retry` (the soonest held slot's expiry) and
 *   `MAX_WAIT_SLICE_MS`, so a missed message or a silently lapsing lease costs at most one slice.
 *   Nothing polls: a waiter retries only when woken or when a lease can have lapsed.
 * - *`release()` while `commit()` is in flight*: operations on one reservation are chained, so
 *   the release sees the commit's outcome and renewal stops before the slot is freed.
 * - *`close()` with holds outstanding*: renewal stops and Redis drops the holds within a lease;
 *   a reservation released after close answers without I/O.
 *
 * ## Events (reported to the chart)
 * | What happened | Event |
 * |---|---|
 * | connection ready / closed | `redis.ready` / `redis.down` |
 * | a script answered / failed | `op.ok` / `op.failed` (`code`, `worker`) |
 * | a selection was refused / a slot claimed | `selection.refused` / `reservation.made` |
 * | commit / release, lapse, hand-off | `reservation.committed` / `reservation.ended` |
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { type Actor, createActor } from 'xstate';
import {
  linkStatsOf,
  type RegistryErrorCode,
  type RegistryStats,
  registryLinkMachine,
} from '../machines/registryLink.js';
import {
  closeClusterRedis,
  connectClusterRedis,
  isUnreachable,
  REDIS_CONNECT_TIMEOUT_MS,
} from './redis.js';
import { type ReservationLedger, SlotReservation } from './reservation.js';
import { DEFAULT_PREFIX, keys, SCRIPTS, type ScriptName } from './scripts.js';
import {
  type CapacityRegistry,
  type CapacityRegistryOptions,
  type NodeState,
  RegistryError,
  type Reservation,
  type SelectOptions,
} from './types.js';

/** Uncommitted lease: covers forwarding a request to a peer and its `adopt` on a slow loopback. */
export const RESERVATION_LEASE_MS = 5_000;
/** Committed lease: a crashed holder's slot frees within this; renewed at a third of it. */
export const HOLD_LEASE_MS = 10_000;
/** Key TTL past the last score: garbage collection only, scores decide liveness. */
export const RECORD_GRACE_MS = 60_000;
/** Idle pool cursor lifetime: an unused pool's cursor goes, rotation restarts at the lowest id. */
export const CURSOR_IDLE_TTL_MS = 3_600_000;
/** Longest single sleep of a waiting selection: bounds the cost of a missed wake message. */
export const MAX_WAIT_SLICE_MS = 1_000;
/** Longest `waitMs` accepted: a selection is not a queue. */
export const MAX_SELECT_WAIT_MS = 600_000;

type Runner = Record<ScriptName, (...args: (string | number)[]) => Promise<unknown>>;

interface WireNode {
  id: string;
  url: string;
  capacity: number;
  label: string;
  draining: boolean;
  held: number;
}

const list = (value: unknown): string[] => (Array.isArray(value) ? (value as string[]) : []);

function toNode(wire: WireNode): NodeState {
  if (
    typeof wire?.id !== 'string' ||
    typeof wire.url !== 'string' ||
    typeof wire.capacity !== 'number' ||
    typeof wire.held !== 'number'
  ) {
    throw new RegistryError('ERR_REGISTRY_MALFORMED', 'a script answered a malformed node', {
      worker: typeof wire?.id === 'string' ? wire.id : null,
    });
  }
  return Object.freeze({
    id: wire.id,
    url: wire.url,
    capacity: wire.capacity < 0 ? null : wire.capacity,
    label: wire.label === '' ? null : wire.label,
    draining: wire.draining === true,
    held: wire.held,
  });
}

function parseJson(raw: unknown, worker: string | null): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(String(raw));
    if (value && typeof value === 'object') return value as Record<string, unknown>;
  } catch {
    // fall through
  }
  throw new RegistryError('ERR_REGISTRY_MALFORMED', `unexpected script answer ${String(raw)}`, {
    worker,
  });
}

function checkWait(waitMs: number): void {
  if (!(Number.isFinite(waitMs) && waitMs >= 0 && waitMs <= MAX_SELECT_WAIT_MS)) {
    throw new RangeError(`waitMs must be 0..${MAX_SELECT_WAIT_MS}, got ${waitMs}`);
  }
}

function checkLease(name: string, ms: number): void {
  if (!(Number.isInteger(ms) && ms >= 10)) {
    throw new RangeError(`${name} must be an integer >= 10 ms, got ${ms}`);
  }
}

/**
 * The registry client: one per process, with its own Redis connection, the chart of its link,
 * the committed holds it renews, and the selections asleep until a slot frees. Everything but
 * the `CapacityRegistry` methods is private; its reservations reach it through the ledger it
 * hands each of them.
 */
export class CapacityRegistryClient implements CapacityRegistry {
  readonly #options: CapacityRegistryOptions;
  readonly #prefix: string;
  readonly #reservationLeaseMs: number;
  readonly #holdLeaseMs: number;
  /** This node's id: `adopt` accepts only reservations made for it ('' when unnamed). */
  readonly #self: string;
  /** Names this client as the owner of its reservations and holds in Redis. */
  readonly #owner = randomUUID();
  readonly #keys: ReturnType<typeof keys>;
  readonly #chart: Actor<typeof registryLinkMachine>;
  readonly #redis: Redis;
  readonly #run: Runner;
  /** The first connect attempt (bounded): commands wait for it once, then fail fast. */
  readonly #firstConnect: Promise<void>;
  #closed = false;
  /** The reservations' way into this client. */
  readonly #ledger: ReservationLedger;

  // Committed holds and their renewal.
  readonly #holds = new Map<string, SlotReservation>();
  #renewTimer: ReturnType<typeof setInterval> | undefined;
  #renewing = false;

  // Selections waiting for a release.
  #subscriber: Redis | undefined;
  #listening: Promise<void> | undefined;
  readonly #sleepers = new Set<() => void>();

  constructor(options: CapacityRegistryOptions) {
    this.#options = options;
    this.#prefix = options.prefix ?? DEFAULT_PREFIX;
    this.#reservationLeaseMs = options.reservationLeaseMs ?? RESERVATION_LEASE_MS;
    this.#holdLeaseMs = options.holdLeaseMs ?? HOLD_LEASE_MS;
    checkLease('reservationLeaseMs', this.#reservationLeaseMs);
    checkLease('holdLeaseMs', this.#holdLeaseMs);
    this.#self = options.self ?? '';
    this.#keys = keys(this.#prefix);
    this.#chart = createActor(registryLinkMachine).start();

    const redis = connectClusterRedis(options.url, 'audio-proxy-registry', (cause) =>
      options.onError?.(
        new RegistryError('ERR_REGISTRY_UNREACHABLE', `registry connection: ${cause.message}`, {
          cause,
        }),
      ),
    );
    for (const [name, def] of Object.entries(SCRIPTS)) redis.defineCommand(name, def);
    redis.on('ready', () => this.#chart.send({ type: 'redis.ready' }));
    redis.on('close', () => this.#chart.send({ type: 'redis.down', message: 'connection closed' }));
    this.#redis = redis;
    this.#run = redis as unknown as Runner;
    // No offline queue: a command before the first connect would fail. So the first connect
    // attempt is waited for (once, bounded); after it, everything fails fast.
    this.#firstConnect = new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, REDIS_CONNECT_TIMEOUT_MS);
      timer.unref();
      const done = () => {
        clearTimeout(timer);
        resolve();
      };
      redis.once('ready', done);
      redis.once('close', done);
    });

    this.#ledger = {
      isClosed: () => this.#closed,
      commit: (r) =>
        this.#script('apCommit', r.worker.id, [
          this.#prefix,
          this.#now(),
          r.id,
          this.#owner,
          String(this.#holdLeaseMs),
          String(RECORD_GRACE_MS),
        ]),
      release: (r) =>
        this.#script('apRelease', r.worker.id, [this.#prefix, r.id, this.#owner, r.worker.id]),
      committed: (r) => {
        this.#chart.send({ type: 'reservation.committed' });
        this.#track(r);
      },
      failed: (code, worker) => this.#chart.send({ type: 'op.failed', code, worker }),
      forget: (r) => this.#untrack(r),
      ended: (r, from, lost) => {
        this.#untrack(r);
        this.#chart.send({ type: 'reservation.ended', from, lost });
      },
    };
  }

  // ---- the API ------------------------------------------------------------------------------

  async selectAndReserve(pool: string, opts: SelectOptions = {}): Promise<Reservation | null> {
    if (typeof pool !== 'string' || pool === '') {
      throw new TypeError(`pool must be a non-empty string, got ${String(pool)}`);
    }
    const waitMs = opts.waitMs ?? 0;
    checkWait(waitMs);
    const deadline = performance.now() + waitMs;
    for (;;) {
      if (opts.signal?.aborted) return null;
      if (waitMs > 0) await this.#listen();
      const outcome = await this.#selectOnce(pool, opts);
      if ('reservation' in outcome) return outcome.reservation;
      const left = deadline - performance.now();
      if (left <= 0 || opts.signal?.aborted) return null;
      // +1: a lease lapses strictly after its score, so wake just past it.
      await this.#sleep(Math.min(left, outcome.retryMs + 1, MAX_WAIT_SLICE_MS), opts.signal);
    }
  }

  async reserve(workerId: string): Promise<Reservation | null> {
    if (typeof workerId !== 'string' || workerId === '') {
      throw new TypeError(`workerId must be a non-empty string, got ${String(workerId)}`);
    }
    const id = randomUUID();
    const answer = parseJson(
      await this.#script('apReserve', workerId, [
        this.#keys.nodes,
        this.#prefix,
        this.#now(),
        id,
        this.#owner,
        String(this.#reservationLeaseMs),
        workerId,
        String(RECORD_GRACE_MS),
      ]),
      workerId,
    );
    if (answer.malformed) this.#malformed(workerId);
    if (answer.worker) return this.#made(id, answer.worker as WireNode);
    this.#chart.send({ type: 'selection.refused' });
    return null;
  }

  async adopt(reservationId: string): Promise<Reservation | null> {
    if (typeof reservationId !== 'string' || reservationId === '') {
      throw new TypeError(`reservationId must be a non-empty string, got ${String(reservationId)}`);
    }
    const self = this.#self || null;
    const answer = parseJson(
      await this.#script('apAdopt', self, [
        this.#prefix,
        this.#now(),
        reservationId,
        this.#owner,
        this.#self,
        String(this.#reservationLeaseMs),
        String(RECORD_GRACE_MS),
      ]),
      self,
    );
    if (answer.malformed) {
      this.#malformed(typeof answer.worker === 'string' ? answer.worker : null);
    }
    if (!answer.worker) return null;
    return this.#made(reservationId, answer.worker as WireNode);
  }

  async nodes(): Promise<NodeState[]> {
    const answer = parseJson(
      await this.#script('apNodes', null, [this.#keys.nodes, this.#prefix, this.#now()]),
      null,
    );
    this.#reportBad(answer.bad);
    return (Array.isArray(answer.nodes) ? (answer.nodes as WireNode[]) : []).map(toNode);
  }

  stats(): RegistryStats {
    return linkStatsOf(this.#chart.getSnapshot());
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#renewTimer !== undefined) clearInterval(this.#renewTimer);
    this.#renewTimer = undefined;
    this.#wakeAll();
    this.#chart.send({ type: 'close' });
    const closing = [closeClusterRedis(this.#redis)];
    if (this.#subscriber) closing.push(closeClusterRedis(this.#subscriber));
    await Promise.all(closing);
  }

  // ---- scripts and their failures -----------------------------------------------------------

  /** The scripts' `now`: the test clock's milliseconds, or '' (Redis `TIME`). */
  #now(): string {
    const { clock } = this.#options;
    return clock ? String(Math.floor(clock())) : '';
  }

  /** Runs a script; every failure becomes a RegistryError naming `worker`, reported once. */
  async #script(
    name: ScriptName,
    worker: string | null,
    args: (string | number)[],
    subject = worker === null ? '' : ` (worker ${worker})`,
  ): Promise<unknown> {
    if (this.#closed) {
      throw new RegistryError('ERR_REGISTRY_CLOSED', 'the registry is closed', { worker });
    }
    try {
      await this.#firstConnect;
      const answer = await this.#run[name](...args);
      // Evidence of reachability matters only to a registry not yet `ready`; skip the no-op.
      if (this.#chart.getSnapshot().value !== 'ready') this.#chart.send({ type: 'op.ok' });
      return answer;
    } catch (cause) {
      const code: RegistryErrorCode = isUnreachable(cause)
        ? 'ERR_REGISTRY_UNREACHABLE'
        : 'ERR_REGISTRY_SCRIPT';
      const error = new RegistryError(
        code,
        `registry ${name} failed${subject}: ${(cause as Error).message}`,
        { worker, cause },
      );
      this.#chart.send({ type: 'op.failed', code, worker });
      throw error;
    }
  }

  /** Counts a failure and hands it to `onError`. */
  #report(error: RegistryError): void {
    this.#chart.send({ type: 'op.failed', code: error.code, worker: error.worker });
    this.#options.onError?.(error);
  }

  #reportBad(bad: unknown): void {
    for (const id of list(bad)) {
      this.#report(
        new RegistryError('ERR_REGISTRY_MALFORMED', `node record of ${id} is malformed`, {
          worker: id,
        }),
      );
    }
  }

  /** A script found `worker`'s record malformed: counted, and thrown naming it. */
  #malformed(worker: string | null): never {
    const error = new RegistryError(
      'ERR_REGISTRY_MALFORMED',
      `node record of ${worker} is malformed`,
      { worker },
    );
    this.#chart.send({ type: 'op.failed', code: error.code, worker });
    throw error;
  }

  // ---- reservations and the renewal of committed holds --------------------------------------

  #made(id: string, wire: WireNode): SlotReservation {
    const node = toNode(wire);
    const { held: _held, ...info } = node;
    this.#chart.send({ type: 'reservation.made' });
    return new SlotReservation(id, Object.freeze(info), this.#ledger);
  }

  #track(r: SlotReservation): void {
    this.#holds.set(r.id, r);
    if (this.#renewTimer === undefined) {
      this.#renewTimer = setInterval(
        () => void this.#renewAll(),
        Math.max(1, Math.floor(this.#holdLeaseMs / 3)),
      );
      this.#renewTimer.unref();
    }
  }

  #untrack(r: SlotReservation): void {
    this.#holds.delete(r.id);
    if (this.#holds.size === 0 && this.#renewTimer !== undefined) {
      clearInterval(this.#renewTimer);
      this.#renewTimer = undefined;
    }
  }

  /** Renews every committed hold in one script call: lapsed ones re-asserted, foreign ones end. */
  async #renewAll(): Promise<void> {
    if (this.#renewing || this.#closed || this.#holds.size === 0) return;
    this.#renewing = true;
    const batch = [...this.#holds.values()];
    const args: string[] = [
      this.#prefix,
      this.#now(),
      this.#owner,
      String(this.#holdLeaseMs),
      String(RECORD_GRACE_MS),
    ];
    for (const r of batch) args.push(r.id, r.worker.id);
    try {
      const answer = parseJson(await this.#script('apRenew', null, args), null);
      for (const id of list(answer.lapsed)) {
        const r = this.#holds.get(id);
        if (!r) continue;
        this.#chart.send({ type: 'hold.reasserted' });
        this.#report(
          new RegistryError(
            'ERR_RESERVATION_LOST',
            `hold ${id} on ${r.worker.id} had lapsed; re-asserted for its running render`,
            { worker: r.worker.id },
          ),
        );
      }
      for (const id of list(answer.foreign)) {
        const r = this.#holds.get(id);
        if (!r) continue;
        r.end('lost', true);
        this.#report(
          new RegistryError('ERR_RESERVATION_FOREIGN', `hold ${id} is owned by another node`, {
            worker: r.worker.id,
          }),
        );
      }
    } catch (error) {
      this.#options.onError?.(error as RegistryError);
    } finally {
      this.#renewing = false;
    }
  }

  // ---- selecting, and waiting for a release -------------------------------------------------

  async #selectOnce(
    pool: string,
    opts: SelectOptions,
  ): Promise<{ reservation: SlotReservation } | { retryMs: number }> {
    const id = randomUUID();
    const args: string[] = [
      this.#keys.pool(pool),
      this.#keys.cursor(pool),
      this.#prefix,
      this.#now(),
      id,
      this.#owner,
      String(this.#reservationLeaseMs),
      opts.node ?? '',
      opts.order ?? 'rotation',
      pool,
      String(RECORD_GRACE_MS),
      String(CURSOR_IDLE_TTL_MS),
      ...(opts.exclude ?? []),
    ];
    const answer = parseJson(
      await this.#script('apSelectAndReserve', null, args, ` (pool ${pool})`),
      null,
    );
    this.#reportBad(answer.bad);
    if (answer.worker) return { reservation: this.#made(id, answer.worker as WireNode) };
    this.#chart.send({ type: 'selection.refused' });
    const retry = Number(answer.retry);
    return { retryMs: Number.isFinite(retry) && retry >= 0 ? retry : Number.POSITIVE_INFINITY };
  }

  #wakeAll(): void {
    for (const wake of [...this.#sleepers]) wake();
  }

  /** Subscribes once; settles once subscribed or after `REDIS_CONNECT_TIMEOUT_MS` (slices cover) */
  #listen(): Promise<void> {
    if (this.#listening) return this.#listening;
    if (this.#closed) return Promise.resolve(); // the selection that follows answers CLOSED
    const sub = connectClusterRedis(this.#options.url, 'audio-proxy-registry-wake');
    this.#subscriber = sub;
    sub.on('message', () => this.#wakeAll());
    this.#listening = new Promise<void>((resolve) => {
      let subscribed = false;
      const timer = setTimeout(resolve, REDIS_CONNECT_TIMEOUT_MS);
      timer.unref();
      // Subscribed once, ioredis resubscribes by itself after a reconnect; until then (the
      // first connect, or one that failed), every `ready` tries again.
      sub.on('ready', () => {
        this.#wakeAll(); // whatever was published while disconnected is lost: everyone looks again
        if (subscribed) return;
        sub.subscribe(this.#keys.wake).then(
          () => {
            subscribed = true;
            clearTimeout(timer);
            resolve();
          },
          () => undefined,
        );
      });
    });
    return this.#listening;
  }

  #sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#sleepers.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#sleepers.add(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }
}

/** A registry client for `options`: `new CapacityRegistryClient(options)`. */
export function createCapacityRegistry(options: CapacityRegistryOptions): CapacityRegistry {
  return new CapacityRegistryClient(options);
}
