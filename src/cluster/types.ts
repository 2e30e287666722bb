/**
 * The cluster capacity registry's public surface: what a node announces about itself
 * (`Membership`), and how a node claims one render slot on itself or a peer (`CapacityRegistry`)
 * and holds it in a `Reservation` until the render it was taken for ends.
 *
 * ## Invariants
 * - **A slot is claimed in the step that chooses it.** Choosing a worker and counting the claim
 *   are one Redis script, so the next chooser already sees the claim.
 * - **A reservation gives itself back unless committed.** Uncommitted, it lapses after a short
 *   lease; committed, its holder renews it until `release()`; a crashed holder's slot lapses.
 * - **Commit is a hand-over, not a second claim**: the count goes 1 → 1.
 * - **Unknown capacity is never a free slot**; a draining or silent node is never chosen.
 * - **A refusal (`null`) records nothing**: no key is created or touched by asking.
 * - **Failures are thrown as `RegistryError`** with a stable `code` and, when one is involved, the
 *   worker named. `null` always means "no room", never "could not ask".
 *
 * ## Races
 * - *Reservation forwarded to a peer* (hand-off): the peer `adopt`s it by id, which moves the
 *   ownership; the forwarder's later `release()` then changes nothing, so it can always release
 *   in a `finally` without freeing the slot the peer now renders in.
 * - *Commit after the lease lapsed*: the slot may already be someone else's, so `commit()`
 *   rejects with `ERR_RESERVATION_LOST` instead of counting it twice.
 *
 * ## Events
 * | Method | Answers |
 * |---|---|
 * | `selectAndReserve(pool, opts)` | a `Reservation` on the next eligible worker in rotation, or `null` |
 * | `reserve(workerId)` | a `Reservation` on that worker, or `null` (gone, draining, unknown, full) |
 * | `adopt(reservationId)` | the forwarded `Reservation`, now owned here, or `null` (lapsed/foreign) |
 * | `nodes()` | every live node with its held count, sorted by id |
 */
import type { RegistryErrorCode, RegistryStats } from '../machines/registryLink.js';

/** What one node announces about itself. */
export interface NodeInfo {
  /** Unique per node; also its place in the rotation (nodes are sorted by id). */
  readonly id: string;
  /** Where peers reach it (forwarded requests), e.g. `http://10.0.0.7:8080`. */
  readonly url: string;
  /** Render slots it offers (`AP_MAX_CONCURRENCY`); `null` until announced: never chosen. */
  readonly capacity: number | null;
  /** Optional affinity label (`selectAndReserve(pool, { node })` matches it exactly). */
  readonly label: string | null;
  /** Draining nodes (restarting, shutting down) are never chosen. */
  readonly draining: boolean;
}

/** A node as the registry sees it now. */
export interface NodeState extends NodeInfo {
  /** Slots held on it now (reserved or committed, unexpired). */
  readonly held: number;
}

export type ReservationStatus = 'reserved' | 'committed' | 'released' | 'lost' | 'handed_off';

/** One claimed slot on one worker. */
export interface Reservation {
  readonly id: string;
  readonly worker: NodeInfo;
  /** Where it stands as this process knows it. `handed_off`: a peer adopted it. */
  readonly status: ReservationStatus;
  /**
   * Hands the slot to the render now running: the held count does not move (1 → 1), and the
   * registry renews it until `release()`. Rejects `ERR_RESERVATION_LOST` if the lease lapsed,
   * `ERR_RESERVATION_FOREIGN` if a peer adopted it. Idempotent once committed.
   */
  commit(): Promise<void>;
  /** Frees the slot (and wakes waiting selections). Safe on every path; idempotent. */
  release(): Promise<void>;
}

export interface SelectOptions {
  /** Only workers whose `label` is exactly this (affinity = require). */
  readonly node?: string;
  /** Worker ids never to choose (e.g. this node itself, when handing off). */
  readonly exclude?: readonly string[];
  /**
   * `rotation` (default): the next eligible worker in id order after the pool's cursor.
   * `least_loaded`: the eligible worker with the most free slots, ties broken by rotation.
   * Either way the cursor advances once per successful selection.
   */
  readonly order?: 'rotation' | 'least_loaded';
  /** Wait up to this long (ms) for a slot to be released before answering `null`. @default 0 */
  readonly waitMs?: number;
  /** Aborting a wait answers `null` at once. */
  readonly signal?: AbortSignal;
}

export interface CapacityRegistry {
  selectAndReserve(pool: string, opts?: SelectOptions): Promise<Reservation | null>;
  reserve(workerId: string): Promise<Reservation | null>;
  /** A peer takes over a reservation made for it and forwarded by id. */
  adopt(reservationId: string): Promise<Reservation | null>;
  nodes(): Promise<NodeState[]>;
  stats(): RegistryStats;
  /** Stops renewing (committed holds then lapse within their lease) and closes connections. */
  close(): Promise<void>;
}

export interface Membership {
  /** Registers this node and starts the heartbeat. Rejects if Redis cannot be reached. */
  start(): Promise<void>;
  setDraining(draining: boolean): Promise<void>;
  /** Announces a new capacity (`null`: unknown, never chosen). */
  setCapacity(capacity: number | null): Promise<void>;
  /** Stops the heartbeat and removes this node at once. */
  stop(): Promise<void>;
}

/** Every failure of the registry. Match on `code`; `worker` names the node involved, if any. */
export class RegistryError extends Error {
  override readonly name = 'RegistryError';
  readonly code: RegistryErrorCode;
  readonly worker: string | null;
  constructor(
    code: RegistryErrorCode,
    message: string,
    options?: { worker?: string | null; cause?: unknown },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.worker = options?.worker ?? null;
  }
}

/** Where the registry's Redis lives, and how its keys are named. */
export interface ClusterRedisOptions {
  /** `redis://host:port/db`. */
  readonly url: string;
  /** Prefix of every key and channel. Keep the `{…}` hash tag. @default '{audio-proxy}:' */
  readonly prefix?: string;
  /** Milliseconds; when set, scripts use it instead of Redis `TIME` (tests only). */
  readonly clock?: () => number;
  /** Background failures (renewal, heartbeat, malformed records seen while selecting). */
  readonly onError?: (error: RegistryError) => void;
}

/** For `createCapacityRegistry(options)`: a `CapacityRegistryClient` (`capacityRegistry.ts`). */
export interface CapacityRegistryOptions extends ClusterRedisOptions {
  /** This node's id: `adopt` accepts only reservations made for it. */
  readonly self?: string;
  /** Lease of an uncommitted reservation (ms). @default RESERVATION_LEASE_MS */
  readonly reservationLeaseMs?: number;
  /** Lease of a committed hold, renewed at a third of it (ms). @default HOLD_LEASE_MS */
  readonly holdLeaseMs?: number;
}

/** `createMembership(options)` in `cluster/membership.ts`. */
export interface MembershipOptions extends ClusterRedisOptions {
  readonly node: {
    readonly id: string;
    readonly url: string;
    readonly capacity: number | null;
    readonly label?: string | null;
  };
  /** Pools this node serves. @default ['render'] */
  readonly pools?: readonly string[];
  /** Heartbeat lease (ms), renewed at a third of it. @default NODE_LEASE_MS */
  readonly leaseMs?: number;
}
