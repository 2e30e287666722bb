/**
 * Cluster mode on one node: the glue between the HTTP handler and Redis. It owns this node's
 * membership record, its render claims, its registry client and its peer connections, and
 * answers the handler's two questions: "who renders this key?" and "who takes this request my
 * queue has no room for?".
 *
 * ## Invariants
 * - **Redis trouble is never the client's trouble.** Every Redis call has a deadline; a failure
 *   or a timeout means "act alone", which is exactly single-node behaviour: a duplicate render at
 *   worst, never a lost request, never a 5xx.
 * - **One hop**: a request that carries a *verified* hop header (`verifiedHop`: MAC'd by a node
 *   holding the cluster's `AP_KEY`/`AP_SALT`, for this path and this node, recently) is served
 *   here, never forwarded or handed off again, and only its reservation is adopted. A client's
 *   own hop or reservation header is ignored: its request is routed like any other.
 * - **Every registry slot ends exactly once**: a hand-off's reservation is released by the
 *   forwarder in a `finally` (a no-op once the peer adopted it); an adopted one is released by
 *   the render it was committed to, or when its request ends if it joined an existing render.
 * - **Local renders are counted in the registry** (reserve self, commit at slot grant, release at
 *   the end) so peers choosing a hand-off target see true load. Best-effort: a refusal or an
 *   error leaves the render running, uncounted.
 *
 * ## Races
 * - *Claim owner dies before answering a forward*: `unreachable`, nothing was sent downstream,
 *   so this node renders the key itself (its claim lapses within the lease).
 * - *Hand-off while this node still holds the key's claim*: the request's claim reference is
 *   dropped before forwarding, so the peer can claim the key for its own render.
 * - *A render starts before its `subscribed` accounting runs*: the coordinator's current
 *   snapshot is read first, then its changes, so a grant is never missed.
 *
 * ## Events
 * | Call | Answers |
 * |---|---|
 * | `beforeRender(req, res, key)` | `local` (claimed, alone, or a hop) or `relayed` (owner answered) |
 * | `handOff(req, res, key, s)` | `relayed` (a peer answered) or `refused` with the cluster Retry-After |
 * | `subscribed(request, outcome)` | counts a local render's slot in the registry |
 * | `purge(key)` | the number of other nodes told to purge `key` (`purge.ts`), or undefined |
 * | `sample()` | the metrics' cluster state |
 */

import type { Agent, IncomingMessage, ServerResponse } from 'node:http';
import type { Redis } from 'ioredis';
import type { AnyActorRef } from 'xstate';
import type { Config } from '../config/index.js';
import type { RenderRequest, SubscribeOutcome } from '../core/request.js';
import type { BeforeRenderOutcome, ClusterEndpoints } from '../http/services.js';
import type { WarmClaim } from '../services/warmService.js';
import type { ClusterSample } from '../telemetry/metrics.js';
import { createCapacityRegistry, RESERVATION_LEASE_MS } from './capacityRegistry.js';
import {
  type ForwardOutcome,
  forward,
  hopKey,
  peerAgent,
  type VerifiedHop,
  verifiedHop,
} from './forward.js';
import { createMembership } from './membership.js';
import { PurgeBroadcast } from './purge.js';
import { closeClusterRedis, connectClusterRedis } from './redis.js';
import { type ClaimHandle, RenderClaims, withDeadline } from './renderClaim.js';
import type { CapacityRegistry, Membership, Reservation } from './types.js';

/** Deadline of every Redis call on a request's path: sub-ms normally, so a second is trouble. */
export const CLUSTER_REDIS_DEADLINE_MS = 1_000;
/** Boot waits this long for the first registration; past it the heartbeat keeps trying. */
export const CLUSTER_BOOT_WAIT_MS = 2_000;
/** The registry pool render slots are chosen from. */
export const RENDER_POOL = 'render';
/** Longest accepted reservation id in the header (the registry's ids are UUIDs). */
const MAX_RESERVATION_ID_CHARS = 128;

export interface ClusterOptions {
  readonly config: Config;
  /** Background failures (heartbeat, renewals): logged, never thrown. */
  readonly onError?: (error: unknown) => void;
  /**
   * Deletes a variant on this node (store and hot cache) when another node purges it; given
   * only with a variant store. Absent: purges are neither heard nor told (`purge` answers 0).
   */
  readonly onPurge?: (key: string) => Promise<void>;
}

type Counts<K extends string> = Record<K, number>;

export class Cluster implements ClusterEndpoints {
  readonly nodeId: string;
  readonly url: string;
  readonly #config: Config;
  readonly #redis: Redis;
  readonly #claims: RenderClaims;
  readonly #registry: CapacityRegistry;
  readonly #membership: Membership;
  readonly #agent: Agent;
  readonly #purges: PurgeBroadcast | undefined;
  /** Signs this node's hops: derived from the first `AP_KEY`/`AP_SALT` pair. */
  readonly #hopKey: Buffer;
  /** Verify a peer's hops: `#hopKey`, then the rotated pairs' (a peer may still sign with one). */
  readonly #hopKeys: readonly Buffer[];
  /** Each request's hop verdict, computed once (its time check must not flip between uses). */
  readonly #hops = new WeakMap<IncomingMessage, VerifiedHop | null>();
  /** Claim references by response, so a hand-off can drop its own before forwarding. */
  readonly #claimOf = new WeakMap<ServerResponse, ClaimHandle>();
  /** Reservations adopted from a hand-off, until a render or the request's end takes them. */
  readonly #adopted = new Map<string, Reservation>();
  readonly #onError: (error: unknown) => void;
  readonly forwards: Counts<'relayed' | 'torn' | 'unreachable' | 'client_gone'> = {
    relayed: 0,
    torn: 0,
    unreachable: 0,
    client_gone: 0,
  };
  readonly handOffs: Counts<'relayed' | 'torn' | 'unreachable' | 'client_gone' | 'refused'> = {
    relayed: 0,
    torn: 0,
    unreachable: 0,
    client_gone: 0,
    refused: 0,
  };
  #closed = false;

  constructor(options: ClusterOptions) {
    const c = options.config;
    if (c.clusterRedisUrl === undefined || c.clusterAdvertiseUrl === undefined) {
      throw new TypeError('Cluster: clusterRedisUrl and clusterAdvertiseUrl must both be set');
    }
    if (c.key === undefined || c.salt === undefined) {
      throw new TypeError('Cluster: key and salt must be set (they authenticate hop headers)');
    }
    this.#config = c;
    this.#hopKey = hopKey(c.key, c.salt);
    this.#hopKeys = [this.#hopKey, ...c.rotatedKeys.map((p) => hopKey(p.key, p.salt))];
    this.nodeId = c.clusterNodeId;
    this.url = c.clusterAdvertiseUrl;
    this.#onError = options.onError ?? (() => {});
    this.#redis = connectClusterRedis(c.clusterRedisUrl, `audio-proxy-claims-${c.clusterNodeId}`);
    this.#claims = new RenderClaims({
      redis: this.#redis,
      nodeId: this.nodeId,
      advertiseUrl: this.url,
      leaseMs: c.clusterLeaseMs,
      deadlineMs: CLUSTER_REDIS_DEADLINE_MS,
    });
    this.#registry = createCapacityRegistry({
      url: c.clusterRedisUrl,
      self: this.nodeId,
      holdLeaseMs: c.clusterLeaseMs,
      // Never shorter than the registry's own: it must outlast a forward and the peer's adopt.
      reservationLeaseMs: Math.max(c.clusterLeaseMs, RESERVATION_LEASE_MS),
      onError: (e) => this.#onError(e),
    });
    this.#membership = createMembership({
      url: c.clusterRedisUrl,
      node: {
        id: this.nodeId,
        url: this.url,
        capacity: c.maxConcurrency,
        label: c.clusterNodeLabel ?? null,
      },
      pools: [RENDER_POOL],
      leaseMs: c.clusterLeaseMs,
      onError: (e) => this.#onError(e),
    });
    this.#agent = peerAgent();
    this.#purges = options.onPurge
      ? new PurgeBroadcast({
          url: c.clusterRedisUrl,
          nodeId: this.nodeId,
          onPurge: options.onPurge,
          onError: (e) => this.#onError(e),
        })
      : undefined;
  }

  /**
   * Tells every other node to purge `key` (this node has already): the number of nodes that
   * heard it, or undefined when Redis did not answer. Never rejects.
   */
  async purge(key: string): Promise<number | undefined> {
    if (this.#purges === undefined || this.#closed) return this.#purges ? undefined : 0;
    return this.#purges.publish(this.#redis, key, CLUSTER_REDIS_DEADLINE_MS);
  }

  /** Registers this node; waits at most `CLUSTER_BOOT_WAIT_MS` (the heartbeat keeps trying). */
  async start(): Promise<void> {
    const registered = this.#membership.start();
    registered.catch((e: unknown) => this.#onError(e));
    await withDeadline(registered, CLUSTER_BOOT_WAIT_MS).catch(() => undefined);
  }

  /** Marks this node draining: peers stop handing requests to it. Best-effort, bounded. */
  async drain(): Promise<void> {
    await withDeadline(this.#membership.setDraining(true), CLUSTER_REDIS_DEADLINE_MS).catch(
      (e: unknown) => this.#onError(e),
    );
  }

  /** Leaves the cluster: membership, claims, registry, connections. Never rejects. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const r of this.#adopted.values()) void r.release().catch(() => undefined);
    this.#adopted.clear();
    await Promise.allSettled([
      this.#membership.stop(),
      this.#claims.close(),
      this.#registry.close(),
      this.#purges?.close(),
    ]);
    await closeClusterRedis(this.#redis).catch(() => undefined);
    this.#agent.destroy();
  }

  async beforeRender(
    req: IncomingMessage,
    res: ServerResponse,
    key: string,
  ): Promise<BeforeRenderOutcome> {
    const hop = this.#hop(req);
    const reservation = hop?.reservationId ? await this.#adopt(hop.reservationId) : undefined;
    const claim = await this.#claims.acquire(key);
    if (claim.type === 'owner' && !hop && !this.#closed) {
      const outcome = await forward(
        req,
        res,
        { url: claim.url, fromNodeId: this.nodeId, hopKey: this.#hopKey },
        this.#agent,
      );
      this.#count(this.forwards, outcome);
      // Owner unreachable: nothing went downstream, so render here, alone.
      if (outcome.type !== 'unreachable') return { type: 'relayed' };
    }
    const handle = claim.type === 'owned' ? claim.handle : undefined;
    if (handle) this.#claimOf.set(res, handle);
    return {
      type: 'local',
      ...(reservation ? { reservation } : {}),
      done: () => {
        handle?.release();
        if (reservation) this.#releaseAdopted(reservation);
      },
    };
  }

  /**
   * Warming (issue #19): claims `key` for this node like a MISS would, without relaying
   * anything. `peer` when another node holds the claim (it renders the key); `local` otherwise
   * (Redis trouble included: acting alone), released when the warm job settles.
   */
  async claimForWarm(key: string): Promise<WarmClaim> {
    const claim = await this.#claims.acquire(key);
    if (claim.type === 'owner' && !this.#closed) return { type: 'peer', nodeId: claim.nodeId };
    const handle = claim.type === 'owned' ? claim.handle : undefined;
    return { type: 'local', release: () => handle?.release() };
  }

  async handOff(
    req: IncomingMessage,
    res: ServerResponse,
    _key: string,
    localRetryAfterS: number,
  ): Promise<
    { readonly type: 'relayed' } | { readonly type: 'refused'; readonly retryAfterS: number }
  > {
    const refuse = async () => {
      this.handOffs.refused++;
      return { type: 'refused' as const, retryAfterS: await this.#retryAfter(localRetryAfterS) };
    };
    if (this.#hop(req) || this.#closed) return refuse();
    let reservation: Reservation | null = null;
    try {
      reservation = await withDeadline(
        this.#registry.selectAndReserve(RENDER_POOL, {
          exclude: [this.nodeId],
          order: 'least_loaded',
        }),
        CLUSTER_REDIS_DEADLINE_MS,
      );
    } catch (error) {
      this.#onError(error);
    }
    if (!reservation) return refuse();
    // The peer renders it now: let it claim the key rather than forward back to us.
    this.#claimOf.get(res)?.release();
    let outcome: ForwardOutcome;
    try {
      outcome = await forward(
        req,
        res,
        {
          url: reservation.worker.url,
          fromNodeId: this.nodeId,
          hopKey: this.#hopKey,
          reservationId: reservation.id,
        },
        this.#agent,
      );
    } finally {
      // A no-op once the peer adopted it; frees the slot if it never did.
      void reservation.release().catch(() => undefined);
    }
    this.#count(this.handOffs, outcome);
    if (outcome.type === 'unreachable') {
      return { type: 'refused', retryAfterS: await this.#retryAfter(localRetryAfterS) };
    }
    return { type: 'relayed' };
  }

  /** Counts a local render's slot in the registry, from its slot grant to its end. */
  subscribed(request: RenderRequest, outcome: SubscribeOutcome): void {
    if (outcome.type !== 'miss' || this.#closed) return;
    let held: Reservation | undefined;
    const id = request.clusterReservation;
    if (id !== undefined) {
      held = this.#adopted.get(id);
      this.#adopted.delete(id); // the render's now, released at its end
    }
    const coordinator: AnyActorRef = outcome.coordinator;
    let phase: 'waiting' | 'counted' | 'ended' = 'waiting';
    const end = () => {
      if (phase === 'ended') return;
      phase = 'ended';
      sub?.unsubscribe();
      if (held) void held.release().catch(() => undefined);
    };
    const onSnapshot = (snapshot: { status?: string; matches?: (s: string) => boolean }) => {
      if (phase === 'ended') return;
      if (snapshot.status !== 'active' || snapshot.matches?.('completed')) {
        end();
        return;
      }
      if (phase === 'waiting' && snapshot.matches?.('rendering')) {
        phase = 'counted';
        if (!held)
          void this.#countSelf().then((r) => {
            if (!r) return;
            if (phase === 'ended') void r.release().catch(() => undefined);
            else held = r;
          });
      }
    };
    let sub: { unsubscribe(): void } | undefined;
    sub = coordinator.subscribe({ next: onSnapshot, complete: end, error: end });
    onSnapshot(coordinator.getSnapshot());
  }

  async sample(): Promise<ClusterSample> {
    const stats = this.#registry.stats();
    let nodes: number | undefined;
    try {
      nodes = (await withDeadline(this.#registry.nodes(), CLUSTER_REDIS_DEADLINE_MS)).length;
    } catch {
      nodes = undefined;
    }
    return {
      redisUp: this.#redis.status === 'ready',
      claimsHeld: this.#claims.held,
      nodes,
      reserved: stats.reserved,
      committed: stats.committed,
      forwards: { ...this.forwards },
      handOffs: { ...this.handOffs },
    };
  }

  /** The registry client, for inspection (tests, metrics). */
  get registry(): CapacityRegistry {
    return this.#registry;
  }

  async #countSelf(): Promise<Reservation | null> {
    try {
      const r = await withDeadline(this.#registry.reserve(this.nodeId), CLUSTER_REDIS_DEADLINE_MS);
      if (!r) return null;
      try {
        await withDeadline(r.commit(), CLUSTER_REDIS_DEADLINE_MS);
      } catch (error) {
        void r.release().catch(() => undefined);
        throw error;
      }
      return r;
    } catch (error) {
      this.#onError(error);
      return null;
    }
  }

  /** The request's verified hop, or null: a client's own header counts for nothing. */
  #hop(req: IncomingMessage): VerifiedHop | null {
    let hop = this.#hops.get(req);
    if (hop === undefined) {
      hop = verifiedHop(req, this.#hopKeys, this.url) ?? null;
      this.#hops.set(req, hop);
    }
    return hop;
  }

  async #adopt(id: string): Promise<string | undefined> {
    if (id.length > MAX_RESERVATION_ID_CHARS) return;
    try {
      const r = await withDeadline(this.#registry.adopt(id), CLUSTER_REDIS_DEADLINE_MS);
      if (!r) return;
      await withDeadline(r.commit(), CLUSTER_REDIS_DEADLINE_MS).catch((e: unknown) =>
        this.#onError(e),
      );
      this.#adopted.set(id, r);
      return id;
    } catch (error) {
      this.#onError(error);
      return;
    }
  }

  #releaseAdopted(id: string) {
    const r = this.#adopted.get(id);
    if (!r) return;
    this.#adopted.delete(id);
    void r.release().catch(() => undefined);
  }

  /**
   * The local Retry-After scaled by this node's share of the cluster's live capacity: with three
   * equal nodes full, a slot frees somewhere about three times as often as here.
   */
  async #retryAfter(localS: number): Promise<number> {
    try {
      const nodes = await withDeadline(this.#registry.nodes(), CLUSTER_REDIS_DEADLINE_MS);
      const total = nodes
        .filter((n) => !n.draining && n.capacity !== null)
        .reduce((sum, n) => sum + (n.capacity ?? 0), 0);
      const mine = this.#config.maxConcurrency;
      if (total <= mine) return Math.max(1, localS);
      return Math.max(1, Math.ceil((localS * mine) / total));
    } catch {
      return Math.max(1, localS);
    }
  }

  #count(counts: Counts<'relayed' | 'torn' | 'unreachable' | 'client_gone'>, o: ForwardOutcome) {
    if (o.type === 'relayed') counts[o.complete ? 'relayed' : 'torn']++;
    else counts[o.type]++;
  }
}
