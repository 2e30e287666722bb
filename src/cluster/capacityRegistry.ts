/**
 * The registry client: claims render slots on this node or a peer through the Redis scripts in
 * `scripts.ts`, holds them as `Reservation`s, renews the committed ones, and reports what the
 * connection and every command did to the `registryLink` chart, whose state is `stats()`.
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
import { createActor } from 'xstate';
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
import { DEFAULT_PREFIX, keys, SCRIPTS, type ScriptName } from './scripts.js';
import {
  type CapacityRegistry,
  type CapacityRegistryOptions,
  type NodeInfo,
  type NodeState,
  RegistryError,
  type Reservation,
  type ReservationStatus,
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

export function createCapacityRegistry(options: CapacityRegistryOptions): CapacityRegistry {
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const reservationLeaseMs = options.reservationLeaseMs ?? RESERVATION_LEASE_MS;
  const holdLeaseMs = options.holdLeaseMs ?? HOLD_LEASE_MS;
  checkLease('reservationLeaseMs', reservationLeaseMs);
  checkLease('holdLeaseMs', holdLeaseMs);
  const clock = options.clock;
  const self = options.self ?? '';
  const owner = randomUUID();
  const k = keys(prefix);
  const now = () => (clock ? String(Math.floor(clock())) : '');

  const chart = createActor(registryLinkMachine).start();
  const report = (error: RegistryError) => {
    chart.send({ type: 'op.failed', code: error.code, worker: error.worker });
    options.onError?.(error);
  };

  const redis = connectClusterRedis(options.url, 'audio-proxy-registry', (cause) =>
    options.onError?.(
      new RegistryError('ERR_REGISTRY_UNREACHABLE', `registry connection: ${cause.message}`, {
        cause,
      }),
    ),
  );
  for (const [name, def] of Object.entries(SCRIPTS)) redis.defineCommand(name, def);
  redis.on('ready', () => chart.send({ type: 'redis.ready' }));
  redis.on('close', () => chart.send({ type: 'redis.down', message: 'connection closed' }));
  const run = redis as unknown as Runner;
  let closed = false;
  // No offline queue: a command before the first connect would fail. So the first connect
  // attempt is waited for (once, bounded); after it, everything fails fast.
  const firstConnect = new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, REDIS_CONNECT_TIMEOUT_MS);
    timer.unref();
    const done = () => {
      clearTimeout(timer);
      resolve();
    };
    redis.once('ready', done);
    redis.once('close', done);
  });

  /** Runs a script; every failure becomes a RegistryError naming `worker`, reported once. */
  async function script(
    name: ScriptName,
    worker: string | null,
    args: (string | number)[],
    subject = worker === null ? '' : ` (worker ${worker})`,
  ): Promise<unknown> {
    if (closed) {
      throw new RegistryError('ERR_REGISTRY_CLOSED', 'the registry is closed', { worker });
    }
    try {
      await firstConnect;
      const answer = await run[name](...args);
      // Evidence of reachability matters only to a registry not yet `ready`; skip the no-op.
      if (chart.getSnapshot().value !== 'ready') chart.send({ type: 'op.ok' });
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
      chart.send({ type: 'op.failed', code, worker });
      throw error;
    }
  }

  function reportBad(bad: unknown): void {
    for (const id of list(bad)) {
      report(
        new RegistryError('ERR_REGISTRY_MALFORMED', `node record of ${id} is malformed`, {
          worker: id,
        }),
      );
    }
  }

  // ---- committed holds and their renewal ----------------------------------------------------

  const holds = new Map<string, ReservationImpl>();
  let renewTimer: ReturnType<typeof setInterval> | undefined;
  let renewing = false;

  async function renewAll(): Promise<void> {
    if (renewing || closed || holds.size === 0) return;
    renewing = true;
    const batch = [...holds.values()];
    const args: string[] = [prefix, now(), owner, String(holdLeaseMs), String(RECORD_GRACE_MS)];
    for (const r of batch) args.push(r.id, r.worker.id);
    try {
      const answer = parseJson(await script('apRenew', null, args), null);
      for (const id of list(answer.lapsed)) {
        const r = holds.get(id);
        if (!r) continue;
        chart.send({ type: 'hold.reasserted' });
        report(
          new RegistryError(
            'ERR_RESERVATION_LOST',
            `hold ${id} on ${r.worker.id} had lapsed; re-asserted for its running render`,
            { worker: r.worker.id },
          ),
        );
      }
      for (const id of list(answer.foreign)) {
        const r = holds.get(id);
        if (!r) continue;
        r.end('lost', true);
        report(
          new RegistryError('ERR_RESERVATION_FOREIGN', `hold ${id} is owned by another node`, {
            worker: r.worker.id,
          }),
        );
      }
    } catch (error) {
      options.onError?.(error as RegistryError);
    } finally {
      renewing = false;
    }
  }

  function track(r: ReservationImpl): void {
    holds.set(r.id, r);
    if (renewTimer === undefined) {
      renewTimer = setInterval(() => void renewAll(), Math.max(1, Math.floor(holdLeaseMs / 3)));
      renewTimer.unref();
    }
  }

  function untrack(r: ReservationImpl): void {
    holds.delete(r.id);
    if (holds.size === 0 && renewTimer !== undefined) {
      clearInterval(renewTimer);
      renewTimer = undefined;
    }
  }

  // ---- reservations -------------------------------------------------------------------------

  class ReservationImpl implements Reservation {
    #status: ReservationStatus = 'reserved';
    #chain: Promise<unknown> = Promise.resolve();
    constructor(
      readonly id: string,
      readonly worker: NodeInfo,
    ) {}

    get status(): ReservationStatus {
      return this.#status;
    }

    /** Leaves the books once: the chart hears where it was and whether it was lost. */
    end(status: 'released' | 'lost' | 'handed_off', lost: boolean): void {
      if (this.#status !== 'reserved' && this.#status !== 'committed') return;
      const from = this.#status;
      this.#status = status;
      untrack(this);
      chart.send({ type: 'reservation.ended', from, lost });
    }

    #serial<T>(step: () => Promise<T>): Promise<T> {
      const next = this.#chain.then(step, step);
      this.#chain = next.catch(() => undefined);
      return next;
    }

    commit(): Promise<void> {
      return this.#serial(async () => {
        if (this.#status === 'committed') return;
        if (this.#status !== 'reserved') {
          const code =
            this.#status === 'handed_off' ? 'ERR_RESERVATION_FOREIGN' : 'ERR_RESERVATION_LOST';
          throw new RegistryError(code, `reservation ${this.id} is ${this.#status}`, {
            worker: this.worker.id,
          });
        }
        const answer = await script('apCommit', this.worker.id, [
          prefix,
          now(),
          this.id,
          owner,
          String(holdLeaseMs),
          String(RECORD_GRACE_MS),
        ]);
        if (answer === 'ok') {
          this.#status = 'committed';
          chart.send({ type: 'reservation.committed' });
          track(this);
          return;
        }
        const foreign = answer === 'foreign';
        this.end(foreign ? 'handed_off' : 'lost', !foreign);
        const code: RegistryErrorCode = foreign
          ? 'ERR_RESERVATION_FOREIGN'
          : answer === 'lost'
            ? 'ERR_RESERVATION_LOST'
            : 'ERR_REGISTRY_MALFORMED';
        const error = new RegistryError(
          code,
          `commit of ${this.id} on ${this.worker.id}: ${String(answer)}`,
          { worker: this.worker.id },
        );
        if (code !== 'ERR_RESERVATION_FOREIGN')
          chart.send({ type: 'op.failed', code, worker: this.worker.id });
        throw error;
      });
    }

    release(): Promise<void> {
      return this.#serial(async () => {
        if (this.#status !== 'reserved' && this.#status !== 'committed') return;
        if (closed) {
          this.end('released', false);
          return;
        }
        untrack(this); // no renewal may race the release
        try {
          const answer = await script('apRelease', this.worker.id, [
            prefix,
            this.id,
            owner,
            this.worker.id,
          ]);
          if (answer === 'foreign') this.end('handed_off', false);
          else this.end('released', answer === 'gone');
        } catch (error) {
          // The slot stays counted until its lease lapses: end it here (nobody renews it now)
          // and tell the caller, with the worker named.
          this.end('released', false);
          throw error;
        }
      });
    }
  }

  function made(id: string, wire: WireNode): ReservationImpl {
    const node = toNode(wire);
    const { held: _held, ...info } = node;
    chart.send({ type: 'reservation.made' });
    return new ReservationImpl(id, Object.freeze(info));
  }

  // ---- waiting for a release ----------------------------------------------------------------

  let subscriber: Redis | undefined;
  const sleepers = new Set<() => void>();

  function wakeAll(): void {
    for (const wake of [...sleepers]) wake();
  }

  let listening: Promise<void> | undefined;

  /** Subscribes once; resolves when subscribed, or after `REDIS_CONNECT_TIMEOUT_MS` (slices cover). */
  function listen(): Promise<void> {
    if (listening) return listening;
    if (closed) return Promise.resolve(); // the selection that follows answers CLOSED
    const sub = connectClusterRedis(options.url, 'audio-proxy-registry-wake');
    subscriber = sub;
    sub.on('message', wakeAll);
    listening = new Promise<void>((resolve) => {
      let subscribed = false;
      const timer = setTimeout(resolve, REDIS_CONNECT_TIMEOUT_MS);
      timer.unref();
      // Subscribed once, ioredis resubscribes by itself after a reconnect; until then (the
      // first connect, or one that failed), every `ready` tries again.
      sub.on('ready', () => {
        wakeAll(); // whatever was published while disconnected is lost: everyone looks again
        if (subscribed) return;
        sub.subscribe(k.wake).then(
          () => {
            subscribed = true;
            clearTimeout(timer);
            resolve();
          },
          () => undefined,
        );
      });
    });
    return listening;
  }

  function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        sleepers.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      sleepers.add(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  // ---- the API ------------------------------------------------------------------------------

  async function selectOnce(
    pool: string,
    opts: SelectOptions,
  ): Promise<{ reservation: ReservationImpl } | { retryMs: number }> {
    const id = randomUUID();
    const args: string[] = [
      k.pool(pool),
      k.cursor(pool),
      prefix,
      now(),
      id,
      owner,
      String(reservationLeaseMs),
      opts.node ?? '',
      opts.order ?? 'rotation',
      pool,
      String(RECORD_GRACE_MS),
      String(CURSOR_IDLE_TTL_MS),
      ...(opts.exclude ?? []),
    ];
    const answer = parseJson(
      await script('apSelectAndReserve', null, args, ` (pool ${pool})`),
      null,
    );
    reportBad(answer.bad);
    if (answer.worker) return { reservation: made(id, answer.worker as WireNode) };
    chart.send({ type: 'selection.refused' });
    const retry = Number(answer.retry);
    return { retryMs: Number.isFinite(retry) && retry >= 0 ? retry : Number.POSITIVE_INFINITY };
  }

  return {
    async selectAndReserve(pool, opts = {}) {
      if (typeof pool !== 'string' || pool === '') {
        throw new TypeError(`pool must be a non-empty string, got ${String(pool)}`);
      }
      const waitMs = opts.waitMs ?? 0;
      checkWait(waitMs);
      const deadline = performance.now() + waitMs;
      for (;;) {
        if (opts.signal?.aborted) return null;
        if (waitMs > 0) await listen();
        const outcome = await selectOnce(pool, opts);
        if ('reservation' in outcome) return outcome.reservation;
        const left = deadline - performance.now();
        if (left <= 0 || opts.signal?.aborted) return null;
        // +1: a lease lapses strictly after its score, so wake just past it.
        await sleep(Math.min(left, outcome.retryMs + 1, MAX_WAIT_SLICE_MS), opts.signal);
      }
    },

    async reserve(workerId) {
      if (typeof workerId !== 'string' || workerId === '') {
        throw new TypeError(`workerId must be a non-empty string, got ${String(workerId)}`);
      }
      const id = randomUUID();
      const answer = parseJson(
        await script('apReserve', workerId, [
          k.nodes,
          prefix,
          now(),
          id,
          owner,
          String(reservationLeaseMs),
          workerId,
          String(RECORD_GRACE_MS),
        ]),
        workerId,
      );
      if (answer.malformed) {
        const error = new RegistryError(
          'ERR_REGISTRY_MALFORMED',
          `node record of ${workerId} is malformed`,
          { worker: workerId },
        );
        chart.send({ type: 'op.failed', code: error.code, worker: workerId });
        throw error;
      }
      if (answer.worker) return made(id, answer.worker as WireNode);
      chart.send({ type: 'selection.refused' });
      return null;
    },

    async adopt(reservationId) {
      if (typeof reservationId !== 'string' || reservationId === '') {
        throw new TypeError(
          `reservationId must be a non-empty string, got ${String(reservationId)}`,
        );
      }
      const answer = parseJson(
        await script('apAdopt', self || null, [
          prefix,
          now(),
          reservationId,
          owner,
          self,
          String(reservationLeaseMs),
          String(RECORD_GRACE_MS),
        ]),
        self || null,
      );
      if (answer.malformed) {
        const worker = typeof answer.worker === 'string' ? answer.worker : null;
        const error = new RegistryError(
          'ERR_REGISTRY_MALFORMED',
          `node record of ${worker} is malformed`,
          {
            worker,
          },
        );
        chart.send({ type: 'op.failed', code: error.code, worker });
        throw error;
      }
      if (!answer.worker) return null;
      return made(reservationId, answer.worker as WireNode);
    },

    async nodes() {
      const answer = parseJson(await script('apNodes', null, [k.nodes, prefix, now()]), null);
      reportBad(answer.bad);
      return (Array.isArray(answer.nodes) ? (answer.nodes as WireNode[]) : []).map(toNode);
    },

    stats(): RegistryStats {
      return linkStatsOf(chart.getSnapshot());
    },

    async close() {
      if (closed) return;
      closed = true;
      if (renewTimer !== undefined) clearInterval(renewTimer);
      renewTimer = undefined;
      wakeAll();
      chart.send({ type: 'close' });
      const closing = [closeClusterRedis(redis)];
      if (subscriber) closing.push(closeClusterRedis(subscriber));
      await Promise.all(closing);
    },
  };
}
