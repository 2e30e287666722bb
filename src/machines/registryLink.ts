/**
 * The cluster registry client as its node sees it: is Redis usable right now, and how many
 * slots does this process hold through it. The registry itself lives in Redis
 * (`cluster/scripts.ts`); this chart owns only the node's view, which is what decides between
 * cluster behaviour and acting alone. It does no I/O: `cluster/capacityRegistry.ts` sends it
 * what the connection and each command reported.
 *
 * ## Invariants
 * - **`ready` only on evidence**: a connection that said `ready`, or a command that got an answer.
 *   Starting up is `connecting`, which callers treat like `degraded` (act alone).
 * - **One unreachable answer is enough to degrade**, and one answer is enough to recover: the
 *   caller falls back per request anyway, so the state needs no hysteresis of its own.
 * - **An answered error is not an outage**: a script error or a malformed record is counted and
 *   remembered (`lastError`, with the worker), but it does not degrade the registry.
 * - **reserved + committed = the slots this process must give back or renew**; each reservation
 *   enters once (`reservation.made`) and leaves once (`reservation.ended`), from where it was.
 * - **`closed` has no way out**, yet still counts the reservations that end after it.
 *
 * ## Races
 * - *A late answer after the connection dropped*: `op.ok` in `degraded` is real evidence that
 *   Redis answered, so it recovers; the next failure degrades again. No state is lost either way.
 * - *A reservation ending after `close`*: counters are kept at the root, so they stay true.
 *
 * ## Events
 * | Event | Fields | Effect |
 * |---|---|---|
 * | `redis.ready` / `op.ok` | — | `connecting`/`degraded` → `ready` |
 * | `redis.down` | `message` | `connecting`/`ready` → `degraded` |
 * | `op.failed` | `code`, `worker` | counted; `ERR_REGISTRY_UNREACHABLE` also degrades |
 * | `selection.refused` / `reservation.made` | — | counted |
 * | `reservation.committed` | — | one reserved becomes committed (1 → 1) |
 * | `reservation.ended` | `from` (`reserved`/`committed`), `lost` | one fewer; `lost` counted |
 * | `hold.reasserted` | — | a committed hold had lapsed and was counted again: `lost` counted |
 * | `stats` (call) | — | replies the counts and the state |
 * | `close` | — | → `closed` |
 * Emitted: `{ type: 'state', state }` on entering every state (metrics follow it).
 */
import { enqueueActions, setup } from 'xstate';
import { answer, type CallEnvelope, type ReplyEvent } from '../core/protocol.js';

export type RegistryLinkEvent =
  | { type: 'redis.ready' }
  | { type: 'redis.down'; message: string }
  | { type: 'op.ok' }
  | { type: 'op.failed'; code: RegistryErrorCode; worker: string | null }
  | { type: 'selection.refused' }
  | { type: 'reservation.made' }
  | { type: 'reservation.committed' }
  | { type: 'reservation.ended'; from: 'reserved' | 'committed'; lost: boolean }
  | { type: 'hold.reasserted' }
  | ({ type: 'stats' } & CallEnvelope)
  | { type: 'close' };

/** The counters `stats` answers with; its `state` is the chart's own state, not context. */
export type RegistryLinkContext = Omit<RegistryStats, 'state'>;

export type RegistryLinkEmitted =
  | { type: 'state'; state: RegistryState }
  | ReplyEvent<RegistryStats>;

const INITIAL: RegistryLinkContext = Object.freeze({
  reserved: 0,
  committed: 0,
  selections: 0,
  refusals: 0,
  errors: 0,
  lost: 0,
  lastError: null,
});

/** The stats as a reader sees them: the context plus the state's name. */
export function linkStatsOf(snapshot: {
  value: unknown;
  context: RegistryLinkContext;
}): RegistryStats {
  return { state: snapshot.value as RegistryState, ...snapshot.context };
}

type Ended = Extract<RegistryLinkEvent, { type: 'reservation.ended' }>;
type Failed = Extract<RegistryLinkEvent, { type: 'op.failed' }>;

export const registryLinkMachine = setup({
  types: {
    context: {} as RegistryLinkContext,
    events: {} as RegistryLinkEvent,
    emitted: {} as RegistryLinkEmitted,
  },
  guards: {
    unreachable: ({ event }) => (event as Failed).code === 'ERR_REGISTRY_UNREACHABLE',
  },
  actions: {
    announce: enqueueActions(({ enqueue }, params: { state: RegistryState }) => {
      enqueue.emit({ type: 'state', state: params.state });
    }),
    countFailure: enqueueActions(({ context, event, enqueue }) => {
      const { code, worker } = event as Failed;
      enqueue.assign({ errors: context.errors + 1, lastError: { code, worker } });
    }),
    countRefusal: enqueueActions(({ context, enqueue }) => {
      enqueue.assign({ refusals: context.refusals + 1 });
    }),
    countReservation: enqueueActions(({ context, enqueue }) => {
      enqueue.assign({ reserved: context.reserved + 1, selections: context.selections + 1 });
    }),
    countCommit: enqueueActions(({ context, enqueue }) => {
      enqueue.assign({ reserved: context.reserved - 1, committed: context.committed + 1 });
    }),
    countEnd: enqueueActions(({ context, event, enqueue }) => {
      const { from, lost } = event as Ended;
      enqueue.assign({
        reserved: context.reserved - (from === 'reserved' ? 1 : 0),
        committed: context.committed - (from === 'committed' ? 1 : 0),
        lost: context.lost + (lost ? 1 : 0),
      });
    }),
    countReassertion: enqueueActions(({ context, enqueue }) => {
      enqueue.assign({ lost: context.lost + 1 });
    }),
    answerStats: enqueueActions(({ context, event, enqueue, self }) => {
      answer(enqueue, event, linkStatsOf({ value: self.getSnapshot().value, context }));
    }),
  },
}).createMachine({
  id: 'registryLink',
  context: INITIAL,
  initial: 'connecting',
  on: {
    'selection.refused': { actions: 'countRefusal' },
    'reservation.made': { actions: 'countReservation' },
    'reservation.committed': { actions: 'countCommit' },
    'reservation.ended': { actions: 'countEnd' },
    'hold.reasserted': { actions: 'countReassertion' },
    'op.failed': { actions: 'countFailure' },
    stats: { actions: 'answerStats' },
  },
  states: {
    connecting: {
      entry: { type: 'announce', params: { state: 'connecting' } },
      on: {
        'redis.ready': { target: 'ready' },
        'op.ok': { target: 'ready' },
        'redis.down': { target: 'degraded' },
        'op.failed': [
          { guard: 'unreachable', target: 'degraded', actions: 'countFailure' },
          { actions: 'countFailure' },
        ],
        close: { target: 'closed' },
      },
    },
    ready: {
      entry: { type: 'announce', params: { state: 'ready' } },
      on: {
        'redis.down': { target: 'degraded' },
        'op.failed': [
          { guard: 'unreachable', target: 'degraded', actions: 'countFailure' },
          { actions: 'countFailure' },
        ],
        close: { target: 'closed' },
      },
    },
    degraded: {
      entry: { type: 'announce', params: { state: 'degraded' } },
      on: {
        'redis.ready': { target: 'ready' },
        'op.ok': { target: 'ready' },
        close: { target: 'closed' },
      },
    },
    // Terminal but not `final`: a done actor would drop the `reservation.ended` still to come.
    closed: {
      entry: { type: 'announce', params: { state: 'closed' } },
    },
  },
});

export type RegistryState = 'connecting' | 'ready' | 'degraded' | 'closed';

export interface RegistryStats {
  readonly state: RegistryState;
  /** Reservations this process holds, not yet committed. */
  readonly reserved: number;
  /** Committed holds this process renews. */
  readonly committed: number;
  /** Reservations obtained: selected, reserved by name, or adopted. */
  readonly selections: number;
  /** Selections and named reservations answered `null` (no room). */
  readonly refusals: number;
  /** Errors reported (thrown, or passed to `onError` for background work). */
  readonly errors: number;
  /** Reservations found lapsed at commit or renewal. */
  readonly lost: number;
  readonly lastError: { readonly code: RegistryErrorCode; readonly worker: string | null } | null;
}

export type RegistryErrorCode =
  /** Redis could not be reached or did not answer in time. */
  | 'ERR_REGISTRY_UNREACHABLE'
  /** A script failed inside Redis. */
  | 'ERR_REGISTRY_SCRIPT'
  /** A record in Redis is not what this code writes (named by `worker`). */
  | 'ERR_REGISTRY_MALFORMED'
  /** The reservation's lease lapsed before commit. */
  | 'ERR_RESERVATION_LOST'
  /** The reservation was adopted by a peer; only the peer may commit it. */
  | 'ERR_RESERVATION_FOREIGN'
  /** The registry was closed. */
  | 'ERR_REGISTRY_CLOSED';
