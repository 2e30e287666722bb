/**
 * What the request path needs from the rest of the system, as interfaces: the proxy (the
 * composition root) implements them, the router and its stages only call them. Nothing here
 * runs; a stage under test is given a fake of the few members it uses.
 *
 * ## Invariants
 * - **Every member but `config`, `version`, `ffmpeg`, `nowMs`, `ready`, `probe`, `subscribe`,
 *   `unsubscribe` and `retryAfterS` is optional**: an absent feature (store, waiting room,
 *   cluster, remote sources) is an absent member, never a stub that answers something.
 * - **No cluster call ever fails**: Redis trouble is answered as `local`/`refused`, or as an
 *   unknown count for a purge.
 *
 * ## Races
 * None of its own: see the stages and `delivery.ts`.
 *
 * ## Events
 * None.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ActorOptions, AnyActorLogic, AnyActorRef } from 'xstate';
import type { ConfigProvider } from '../config/index.js';
import type { Failure } from '../core/failure.js';
import type { ProbeOutcome, RenderRequest, SubscribeOutcome } from '../core/request.js';
import type { ResolvedSource, Source } from '../core/source.js';
import type { RenderOptions } from '../core/variant.js';
import type { SubscriberMessage } from '../machines/renderCoordinator.js';
import type { VariantStore } from '../store/types.js';
import type { TurnBudget } from './turns.js';

/** What the handler needs from the rest of the system. */
export interface HandlerServices {
  readonly config: ConfigProvider;
  /** Shared with the accept gate, so connections and request stages draw on one budget. */
  readonly turns?: TurnBudget;
  readonly version: string;
  readonly ffmpeg: () => {
    readonly path: string;
    readonly source: string;
    readonly version?: string;
    /** Per option, the ffmpeg parts it needs and this one lacks (when its listing was read). */
    readonly missing?: Readonly<Record<string, readonly string[]>>;
    /** Why the listing could not be read: options are not checked against this ffmpeg. */
    readonly unchecked?: string;
  };
  /** What this node's ffmpeg cannot do (`workers/capabilities.ts`); absent: nothing is refused. */
  readonly capabilities?: {
    refusal(options: RenderOptions): { readonly message: string } | undefined;
  };
  /** Worker pool supervisors' state for /health (a restart in progress still reads healthy). */
  readonly pools?: () => Record<string, unknown>;
  nowMs(): number;
  ready(): Promise<{ ready: boolean; queued: number; threshold: number }>;
  /** Resolves a remote source to something ffmpeg can open (presigning); local is handled here. */
  resolveRemote?(
    source: Source,
    canonical: string,
    options: { enforceSize: boolean },
  ): Promise<ResolvedSource | { failure: Failure }>;
  /** The variant store (HITs); undefined when AP_VARIANT_STORE is unset. */
  readonly store?: VariantStore;
  probe(source: ResolvedSource): Promise<ProbeOutcome>;
  subscribe(
    request: RenderRequest,
    subscriberId: string,
    onMessage: (message: SubscriberMessage) => void,
  ): Promise<SubscribeOutcome>;
  unsubscribe(coordinator: AnyActorRef, subscriberId: string): Promise<void>;
  retryAfterS(): Promise<number>;
  /** Present when AP_WAITING_ROOM is on. */
  readonly waitingRoom?: WaitingRoomEndpoints;
  /** Present when AP_CLUSTER_REDIS_URL is on (see cluster/cluster.ts). */
  readonly cluster?: ClusterEndpoints;
  /** Present when a variant store is: `POST /warm` hands its valid entries here. */
  readonly warm?: WarmEndpoints;
  /** True once `close()` has begun: every request but a preflight answers 503 `shutting_down`. */
  readonly stopping?: () => boolean;
}

/** Where a MISS renders: here under this node's claim, or relayed from the claim's owner. */
export type BeforeRenderOutcome =
  | { readonly type: 'local'; readonly reservation?: string; done(): void }
  | { readonly type: 'relayed' };

/** What the handler needs from cluster mode. No call ever fails: Redis trouble is `local`. */
export interface ClusterEndpoints {
  /**
   * Before a MISS renders: claims the key for this node (`local`; `done` runs when the response
   * closes), or relays the answer of the peer that holds the claim (`relayed`).
   */
  beforeRender(
    req: IncomingMessage,
    res: ServerResponse,
    key: string,
  ): Promise<BeforeRenderOutcome>;
  /** The local queue is full: relays a peer's answer, or refuses with the cluster's Retry-After. */
  handOff(
    req: IncomingMessage,
    res: ServerResponse,
    key: string,
    localRetryAfterS: number,
  ): Promise<
    { readonly type: 'relayed' } | { readonly type: 'refused'; readonly retryAfterS: number }
  >;
  /**
   * After this node purged `key`: tells the other nodes to purge it too. The number of nodes that
   * heard it, or undefined when Redis did not answer. Never rejects.
   */
  purge?(key: string): Promise<number | undefined>;
}

/** One valid warm entry: its path as given, its class, and what a GET of it would render. */
export interface WarmRequestEntry {
  readonly path: string;
  readonly class: 'high' | 'normal' | 'low';
  readonly request: RenderRequest;
}

/** What the handler needs from warming (see services/warmService.ts). */
export interface WarmEndpoints {
  /** One report per entry, in order: `hit`, `started` or `rejected`, with their fields. */
  submit(
    entries: readonly WarmRequestEntry[],
  ): Promise<readonly ({ readonly status: 'hit' | 'started' | 'rejected' } & object)[]>;
  /** Renders a predicted variant at `low` (`AP_PREFETCH_NEXT_TRIM`); never waits for it. */
  prefetch?(request: RenderRequest, path: string): Promise<object>;
}

/** What the handler needs from the waiting room (see services/waitingRoomService.ts). */
export interface WaitingRoomEndpoints {
  join(
    session: string,
  ): Promise<{ type: 'ticket'; ticket: unknown } | { type: 'full'; retryAfterS: number }>;
  status(session: string): Promise<{ type: 'ticket'; ticket: unknown } | { type: 'unknown' }>;
  leave(session: string): Promise<{ type: 'left' } | { type: 'unknown' }>;
  /**
   * Starts the session's run: `null` when the room refused it (the render goes on without the
   * room), else the run, with the slot id its render takes over when it held a reservation.
   * Every non-null answer is followed by exactly one `runEnded`.
   */
  claim(session: string): Promise<{ readonly adoptSlotId: string | null } | null>;
  runEnded(session: string, cancelled: boolean): void;
}

/** Who watches the delivery actors a handler starts (one per render request). */
export interface HandlerObservers {
  /** XState inspection observer (the proxy's `inspect` option). */
  readonly inspect?: ActorOptions<AnyActorLogic>['inspect'];
  /** Told of every delivery actor before it starts (the proxy's live view follows them). */
  readonly track?: (actor: AnyActorRef, name: string) => void;
}
