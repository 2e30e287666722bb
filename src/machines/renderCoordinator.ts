/**
 * RenderCoordinator: one render of one variant (one cache key), shared by every subscriber.
 *
 * The coordinator owns the render slot, the Render child that owns ffmpeg, and the backlog of
 * every byte produced so far. Subscribers (HTTP responses, the store Tee) receive `rendering`,
 * then `chunk`s, then exactly one of `done` or `error`, as `notify` messages addressed to their id.
 *
 * ## Invariants
 * - **One terminal message per subscriber**: `done` or `error`, never both, never twice.
 * - **No gap, no duplicate at the join seam**: a joiner gets the backlog snapshot in the same
 *   transition that registers it, so every later chunk reaches it live.
 * - **The slot is released after ffmpeg is gone, never before**: on `render.done` (before the
 *   linger), or after a cancel the Render confirmed. Releasing first would exceed the cap for
 *   the duration of the kill.
 * - **`unsubscribe` by the last subscriber answers only once ffmpeg is dead.**
 * - **Backlog ≤ maxVariantBytes**: the chunk that crosses the cap is neither kept nor sent.
 * - **All backlogs together ≤ the backlog budget** (`AP_BACKLOG_BUDGET_BYTES`, shared by every
 *   coordinator): a chunk that would cross it makes this render stop keeping its backlog (the
 *   bytes kept so far are handed back) and unregister its key. Subscribers already in, the store
 *   Tee included (it joins at byte 0), still get every byte live; a later request for the key
 *   starts its own render instead of joining one that can no longer replay its start. A
 *   re-render costs CPU and a slot; keeping a backlog past the budget would cost unbounded RAM.
 * - **Nothing is kept once stopped**: `stopped` hands the backlog's bytes back to the budget and
 *   empties it, whoever still holds a reference to this actor.
 * - **Fail ordering**: the key is unregistered first (`unregister` is emitted), then the failure
 *   is broadcast, so a request that sees the failure can start a fresh render at once.
 * - **An orphan never makes a listener wait.** A render whose listeners have all left while a
 *   store subscriber (the Tee, joined with `store: true`) stays is an *orphan*: it goes on only
 *   to fill the variant store. Becoming one tells the semaphore `orphaned`; a listener joining
 *   tells it `adopted` (both casts). While a request waits that no free slot will serve, the
 *   semaphore tells an orphan `preempted`, and the orphan is cancelled: the Tee gets `error(cancelled)` and
 *   discards its staging (nothing is stored), ffmpeg is killed, and the slot is released after
 *   the kill by the normal path, which grants the waiter. Cancelled rather than demoted: a
 *   render's slot is its running ffmpeg, so a demoted orphan would either keep its process (the
 *   slot's cost) or have to be resumable (it is not); re-rendering on the next miss is the whole
 *   price. Which orphan yields is the semaphore's choice (the last granted: least work lost).
 *
 * - **Warm work is an orphan from the start** (issue #19): a render whose first subscriber is a
 *   store subscriber (`firstSubscriberStore`, the warm service's job) tells the semaphore
 *   `orphaned` on entering `rendering`, so a listener queued behind it preempts it at once.
 * - **A listener never waits at a warm class**: a listener that joins a render still queued at a
 *   class below `interactive` asks the semaphore to `promote` its waiter (once).
 *
 * ## Races
 * - *Join vs. completion*: a joiner during the linger gets the whole backlog plus `done`.
 * - *Last subscriber leaves vs. render finishes*: either order ends in `stopped` with the slot
 *   released once; a `render.done` that arrives while cancelling counts as the confirmation.
 * - *Displaced while queued*: the semaphore already dropped our id, so nothing is released.
 * - *Preempted vs. adopted*: a `slot.preempted` that finds a listener again (its `adopted` and
 *   the preemption crossed) is ignored; the semaphore forgets the preemption on `adopted`.
 *   One that arrives after the render ended (completed, cancelling) is ignored too.
 *
 * ## Events
 * | Event | From | Effect |
 * |---|---|---|
 * | `join(id, store?)` call | subscriber | reply `{ state, backlog, info? }`; add id unless completed; `stopping` once the backlog was dropped |
 * | `unsubscribe(id)` call / `gone(id)` | subscriber, monitor | remove; last one cancels |
 * | `slot.granted` / `slot.displaced` | semaphore inbox | start the render / fail with 429 |
 * | `slot.preempted` | semaphore inbox | an orphan: cancel, nothing stored; otherwise ignored |
 * | `render.chunk/done/error` | Render child | append and broadcast / complete / fail |
 * | `shutdown` call | system | cancel whatever runs, release, stop; reply after |
 *
 * Collections in context (`subscribers`, `backlog`) are owned by this actor and mutated in
 * place by its actions: copying the backlog on every chunk is quadratic in the variant size.
 */
import {
  type AnyActorLogic,
  type AnyActorRef,
  assign,
  emit,
  enqueueActions,
  sendTo,
  setup,
} from 'xstate';
import type { RenderFailure, RenderInfo } from '../core/failure.js';
import { answer, callerOf, type ReplyEvent } from '../core/protocol.js';
import type { AdmissionClass } from './semaphore.js';

/** A joiner within this window after completion is served from the backlog instead of a re-render. */
export const LINGER_MS = 1_000; // catches requests already in flight; a miss re-renders: wasteful, never wrong

/** Messages a subscriber receives, in order: rendering?, chunk*, (done | error). */
export type SubscriberMessage =
  | { readonly type: 'rendering' }
  | { readonly type: 'chunk'; readonly data: Buffer }
  | { readonly type: 'done'; readonly info: RenderInfo }
  | { readonly type: 'error'; readonly failure: RenderFailure };

export type CoordinatorPhase = 'queued' | 'rendering' | 'completed';

export type JoinReply =
  | {
      readonly type: 'joined';
      readonly state: CoordinatorPhase;
      readonly backlog: readonly Buffer[];
      readonly info?: RenderInfo;
    }
  /** The coordinator is on its way out (already unregistered): start or join afresh. */
  | { readonly type: 'stopping' };

/**
 * The bytes every coordinator's backlog holds, against one limit. Shared by all coordinators
 * of a proxy and changed only by their actions (append, drop, stop), so it never drifts.
 */
export interface BacklogBudget {
  /** Read on every chunk (config provider). */
  readonly limitBytes: () => number;
  /** Bytes held in backlogs right now. */
  heldBytes: number;
}

export function createBacklogBudget(limitBytes: () => number): BacklogBudget {
  return { limitBytes, heldBytes: 0 };
}

export interface RenderCoordinatorInput {
  readonly key: string;
  /** Outcome of the semaphore request made before this actor was created. */
  readonly admission: 'granted' | 'queued';
  /** The semaphore holder/waiter id this coordinator owns. */
  readonly slotId: string;
  readonly semaphore: AnyActorRef;
  readonly firstSubscriber: string;
  /** The first subscriber only fills the store (warm work): the render starts as an orphan. */
  readonly firstSubscriberStore?: boolean;
  /** The class the slot was asked at. @default 'interactive' */
  readonly admissionClass?: AdmissionClass;
  /** Read on every chunk (config provider). */
  readonly maxVariantBytes: () => number;
  /** The budget all backlogs share (absent: backlogs are bounded by maxVariantBytes only). */
  readonly backlogBudget?: BacklogBudget;
  /** Passed through to the `render` actor. */
  readonly renderInput: unknown;
}

type Envelope = { callId?: number; replyTo?: AnyActorRef };

export type RenderCoordinatorEvent =
  /** `store`: a subscriber that only fills the variant store (the Tee); it listens for nobody. */
  | ({ type: 'join'; id: string; store?: boolean } & Envelope)
  | ({ type: 'unsubscribe'; id: string } & Envelope)
  | { type: 'gone'; id: string; reason?: unknown }
  | { type: 'slot.granted' }
  | { type: 'slot.displaced'; retryAfterS: number }
  | { type: 'slot.preempted' }
  | { type: 'render.pid'; pid: number }
  | { type: 'render.chunk'; data: Buffer }
  | { type: 'render.done'; info?: { bytes?: number } }
  | { type: 'render.error'; failure: RenderFailure }
  | { type: 'render.cancelled' }
  | ({ type: 'shutdown' } & Envelope);

export type RenderCoordinatorEmitted =
  | { type: 'notify'; to: string; message: SubscriberMessage }
  | ReplyEvent
  | { type: 'unregister' }
  | { type: 'telemetry'; event: 'rendering' | 'completed' | 'failed' | 'cancelled'; key: string };

interface PendingReply {
  readonly callId: number;
  readonly replyTo?: AnyActorRef;
}

export interface RenderCoordinatorContext {
  readonly key: string;
  readonly admission: 'granted' | 'queued';
  readonly slotId: string;
  readonly semaphore: AnyActorRef;
  readonly maxVariantBytes: () => number;
  readonly renderInput: unknown;
  readonly admissionClass: AdmissionClass;
  /** A listener joined while queued at a lower class and the waiter was promoted. */
  promoted: boolean;
  readonly subscribers: Set<string>;
  /** The subscribers that joined with `store: true`: they never keep a slot from a listener. */
  readonly storeSubscribers: Set<string>;
  readonly backlog: Buffer[];
  readonly backlogBudget: BacklogBudget | null;
  /** Bytes of `backlog` charged to the budget. */
  keptBytes: number;
  /** False once the backlog was dropped for the budget: no join can be replayed from it. */
  keeping: boolean;
  bytes: number;
  info: RenderInfo | null;
  pid: number | null;
  /** Unsubscribe/shutdown calls answered once ffmpeg is confirmed dead. */
  readonly parked: PendingReply[];
}

function removeSubscriber(context: RenderCoordinatorContext, id: string): void {
  context.subscribers.delete(id);
  context.storeSubscribers.delete(id);
}

/** Subscribers remain and every one of them is a store subscriber. */
function isOrphan({ subscribers, storeSubscribers }: RenderCoordinatorContext): boolean {
  return subscribers.size > 0 && subscribers.size === storeSubscribers.size;
}

export const renderCoordinatorMachine = setup({
  types: {
    input: {} as RenderCoordinatorInput,
    context: {} as RenderCoordinatorContext,
    events: {} as RenderCoordinatorEvent,
    emitted: {} as RenderCoordinatorEmitted,
  },
  actors: {
    // Provided by the system: a Render machine (or, in tests, anything that speaks its events).
    render: {} as AnyActorLogic,
  },
  guards: {
    admittedAtOnce: ({ context }) => context.admission === 'granted',
    isLastSubscriber: ({ context, event }) =>
      'id' in event && context.subscribers.has(event.id) && context.subscribers.size === 1,
    /** The last listener leaves while a store subscriber stays: the render becomes an orphan. */
    orphansRender: ({ context, event }) =>
      'id' in event &&
      context.subscribers.has(event.id) &&
      !context.storeSubscribers.has(event.id) &&
      context.subscribers.size - 1 === context.storeSubscribers.size &&
      context.storeSubscribers.size > 0,
    /** A listener joins an orphan. */
    adoptsOrphan: ({ context, event }) =>
      event.type === 'join' &&
      event.store !== true &&
      !context.subscribers.has(event.id) &&
      isOrphan(context),
    isOrphan: ({ context }) => isOrphan(context),
    /** A listener joins while the slot is still asked at a class below `interactive`. */
    promotesWaiter: ({ context, event }) =>
      event.type === 'join' &&
      event.store !== true &&
      context.admissionClass !== 'interactive' &&
      !context.promoted,
    overCap: ({ context, event }) =>
      event.type === 'render.chunk' &&
      context.bytes + event.data.length > context.maxVariantBytes(),
    overBudget: ({ context, event }) =>
      event.type === 'render.chunk' &&
      context.keeping &&
      context.backlogBudget !== null &&
      context.backlogBudget.heldBytes + event.data.length > context.backlogBudget.limitBytes(),
    backlogDropped: ({ context }) => !context.keeping,
  },
  actions: {
    addSubscriber: ({ context, event }) => {
      if (event.type !== 'join') return;
      context.subscribers.add(event.id);
      if (event.store === true) context.storeSubscribers.add(event.id);
    },
    removeSubscriber: ({ context, event }) => {
      if ('id' in event) removeSubscriber(context, event.id);
    },
    replyJoin: enqueueActions(
      ({ context, event, enqueue }, params: { state: CoordinatorPhase }) => {
        if (event.type !== 'join' || event.callId === undefined) return;
        const payload: JoinReply = {
          type: 'joined',
          state: params.state,
          backlog: context.backlog.slice(),
          ...(context.info ? { info: context.info } : {}),
        };
        answer(enqueue, event, payload);
      },
    ),
    replyStopping: enqueueActions(({ event, enqueue }) => {
      if (event.type === 'join') answer(enqueue, event, { type: 'stopping' });
    }),
    replyOk: enqueueActions(({ event, enqueue }) => {
      answer(enqueue, event, { type: 'ok' });
    }),
    park: ({ context, event }) => {
      const caller = callerOf(event);
      if (caller) context.parked.push(caller);
    },
    answerParked: enqueueActions(({ context, enqueue }) => {
      for (const pending of context.parked.splice(0)) {
        answer(enqueue, pending, { type: 'ok' });
      }
    }),
    notifyJoinerRendering: enqueueActions(({ event, enqueue }) => {
      if (event.type === 'join') {
        enqueue.emit({ type: 'notify', to: event.id, message: { type: 'rendering' } });
      }
    }),
    broadcastRendering: enqueueActions(({ context, enqueue }) => {
      for (const id of context.subscribers) {
        enqueue.emit({ type: 'notify', to: id, message: { type: 'rendering' } });
      }
    }),
    ackChunk: sendTo('render', ({ event }) => ({
      type: 'ack',
      bytes: event.type === 'render.chunk' ? event.data.length : 0,
    })),
    appendAndBroadcast: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== 'render.chunk') return;
      if (context.keeping) {
        context.backlog.push(event.data);
        context.keptBytes += event.data.length;
        if (context.backlogBudget) context.backlogBudget.heldBytes += event.data.length;
      }
      context.bytes += event.data.length;
      const message: SubscriberMessage = { type: 'chunk', data: event.data };
      for (const id of context.subscribers) enqueue.emit({ type: 'notify', to: id, message });
    }),
    /** Hands the backlog's bytes back to the budget and forgets them (`keeping` unchanged). */
    releaseBacklog: ({ context }) => {
      if (context.backlogBudget) context.backlogBudget.heldBytes -= context.keptBytes;
      context.keptBytes = 0;
      context.backlog.length = 0;
    },
    stopKeeping: ({ context }) => {
      context.keeping = false;
    },
    recordPid: assign({ pid: ({ event }) => (event.type === 'render.pid' ? event.pid : null) }),
    recordDone: assign({
      info: ({ context }) => ({ exitStatus: 0 as const, bytes: context.bytes }),
    }),
    broadcastDone: enqueueActions(({ context, enqueue }) => {
      const info = context.info ?? { exitStatus: 0 as const, bytes: context.bytes };
      for (const id of context.subscribers) {
        enqueue.emit({ type: 'notify', to: id, message: { type: 'done', info } });
      }
      context.subscribers.clear();
    }),
    notifyJoinerDone: enqueueActions(({ context, event, enqueue }) => {
      if (event.type === 'join' && context.info) {
        enqueue.emit({
          type: 'notify',
          to: event.id,
          message: { type: 'done', info: context.info },
        });
      }
    }),
    unregister: emit({ type: 'unregister' as const }),
    broadcastFailure: enqueueActions(({ context, enqueue }, params: { failure: RenderFailure }) => {
      for (const id of context.subscribers) {
        enqueue.emit({
          type: 'notify',
          to: id,
          message: { type: 'error', failure: params.failure },
        });
      }
      context.subscribers.clear();
    }),
    releaseSlot: sendTo(
      ({ context }) => context.semaphore,
      ({ context }) => ({ type: 'release', id: context.slotId }),
    ),
    cancelRender: sendTo('render', { type: 'cancel' }),
    tellOrphaned: sendTo(
      ({ context }) => context.semaphore,
      ({ context }) => ({ type: 'orphaned', id: context.slotId }),
    ),
    tellOrphanedIfOrphan: enqueueActions(({ context, enqueue }) => {
      if (!isOrphan(context)) return;
      enqueue.sendTo(context.semaphore, { type: 'orphaned', id: context.slotId });
    }),
    promoteSlot: enqueueActions(({ context, enqueue }) => {
      context.promoted = true;
      enqueue.sendTo(context.semaphore, {
        type: 'promote',
        id: context.slotId,
        class: 'interactive',
      });
    }),
    tellAdopted: sendTo(
      ({ context }) => context.semaphore,
      ({ context }) => ({ type: 'adopted', id: context.slotId }),
    ),
    telemetry: emit(
      ({ context }, params: { event: 'rendering' | 'completed' | 'failed' | 'cancelled' }) => ({
        type: 'telemetry' as const,
        event: params.event,
        key: context.key,
      }),
    ),
  },
  delays: {
    linger: LINGER_MS,
  },
}).createMachine({
  id: 'renderCoordinator',
  context: ({ input }) => ({
    key: input.key,
    admission: input.admission,
    slotId: input.slotId,
    semaphore: input.semaphore,
    maxVariantBytes: input.maxVariantBytes,
    renderInput: input.renderInput,
    admissionClass: input.admissionClass ?? 'interactive',
    promoted: false,
    subscribers: new Set([input.firstSubscriber]),
    storeSubscribers: new Set(input.firstSubscriberStore === true ? [input.firstSubscriber] : []),
    backlog: [],
    backlogBudget: input.backlogBudget ?? null,
    keptBytes: 0,
    keeping: true,
    bytes: 0,
    info: null,
    pid: null,
    parked: [],
  }),
  initial: 'admitting',
  states: {
    /** Transient: the semaphore already answered before this actor existed. */
    admitting: {
      always: [{ guard: 'admittedAtOnce', target: 'rendering' }, { target: 'queued' }],
    },
    queued: {
      on: {
        join: [
          {
            guard: 'promotesWaiter',
            actions: [
              'addSubscriber',
              { type: 'replyJoin', params: { state: 'queued' } },
              'promoteSlot',
            ],
          },
          { actions: ['addSubscriber', { type: 'replyJoin', params: { state: 'queued' } }] },
        ],
        'slot.granted': { target: 'rendering' },
        'slot.displaced': {
          target: 'stopped',
          actions: [
            'unregister',
            {
              type: 'broadcastFailure',
              params: ({ event }) => ({
                failure: {
                  class: 'queue_full',
                  retryAfterS: event.retryAfterS,
                  detail: 'displaced by a higher admission class',
                },
              }),
            },
            { type: 'telemetry', params: { event: 'failed' } },
          ],
        },
        unsubscribe: [
          {
            guard: 'isLastSubscriber',
            target: 'stopped',
            actions: ['removeSubscriber', 'releaseSlot', 'replyOk'],
          },
          { actions: ['removeSubscriber', 'replyOk'] },
        ],
        gone: [
          {
            guard: 'isLastSubscriber',
            target: 'stopped',
            actions: ['removeSubscriber', 'releaseSlot'],
          },
          { actions: 'removeSubscriber' },
        ],
        shutdown: {
          target: 'stopped',
          actions: [
            'unregister',
            {
              type: 'broadcastFailure',
              params: { failure: { class: 'cancelled', detail: 'shutting down' } },
            },
            'releaseSlot',
            'replyOk',
          ],
        },
      },
    },
    rendering: {
      entry: [
        'broadcastRendering',
        { type: 'telemetry', params: { event: 'rendering' } },
        'tellOrphanedIfOrphan',
      ],
      invoke: {
        id: 'render',
        src: 'render',
        input: ({ context }: { context: RenderCoordinatorContext }) => context.renderInput,
        onError: {
          target: 'stopped',
          actions: [
            'unregister',
            {
              type: 'broadcastFailure',
              params: ({ event }) => ({
                failure: {
                  class: 'render_failed',
                  detail: `render died without reporting: ${String(event.error)}`,
                },
              }),
            },
            'releaseSlot',
            'answerParked',
            { type: 'telemetry', params: { event: 'failed' } },
          ],
        },
      },
      initial: 'streaming',
      states: {
        streaming: {
          on: {
            join: [
              // The start of the output is gone: the joiner starts its own render.
              { guard: 'backlogDropped', actions: 'replyStopping' },
              {
                guard: 'adoptsOrphan',
                actions: [
                  'notifyJoinerRendering',
                  { type: 'replyJoin', params: { state: 'rendering' } },
                  'addSubscriber',
                  'tellAdopted',
                ],
              },
              {
                actions: [
                  'notifyJoinerRendering',
                  { type: 'replyJoin', params: { state: 'rendering' } },
                  'addSubscriber',
                ],
              },
            ],
            // Only an orphan yields (see "An orphan never makes a listener wait").
            'slot.preempted': {
              guard: 'isOrphan',
              target: 'cancelling',
              actions: [
                'unregister',
                {
                  type: 'broadcastFailure',
                  params: {
                    failure: {
                      class: 'cancelled',
                      detail: 'preempted: no listener left and a request is waiting for the slot',
                    },
                  },
                },
              ],
            },
            'render.pid': { actions: 'recordPid' },
            'render.chunk': [
              {
                guard: 'overCap',
                target: 'cancelling',
                actions: [
                  'unregister',
                  {
                    type: 'broadcastFailure',
                    params: ({ context }) => ({
                      failure: {
                        class: 'render_failed',
                        exitStatus: null,
                        detail: `render output exceeded the ${context.maxVariantBytes()}-byte retention cap (AP_MAX_VARIANT_BYTES)`,
                      },
                    }),
                  },
                  { type: 'telemetry', params: { event: 'failed' } },
                ],
              },
              {
                guard: 'overBudget',
                actions: [
                  'releaseBacklog',
                  'stopKeeping',
                  'unregister',
                  'ackChunk',
                  'appendAndBroadcast',
                ],
              },
              { actions: ['ackChunk', 'appendAndBroadcast'] },
            ],
            'render.done': {
              target: '#renderCoordinator.completed',
              actions: [
                'recordDone',
                'broadcastDone',
                'releaseSlot',
                { type: 'telemetry', params: { event: 'completed' } },
              ],
            },
            'render.error': {
              target: '#renderCoordinator.stopped',
              actions: [
                'unregister',
                { type: 'broadcastFailure', params: ({ event }) => ({ failure: event.failure }) },
                'releaseSlot',
                { type: 'telemetry', params: { event: 'failed' } },
              ],
            },
            unsubscribe: [
              {
                guard: 'isLastSubscriber',
                target: 'cancelling',
                actions: ['removeSubscriber', 'park'],
              },
              { guard: 'orphansRender', actions: ['removeSubscriber', 'replyOk', 'tellOrphaned'] },
              { actions: ['removeSubscriber', 'replyOk'] },
            ],
            gone: [
              { guard: 'isLastSubscriber', target: 'cancelling', actions: 'removeSubscriber' },
              { guard: 'orphansRender', actions: ['removeSubscriber', 'tellOrphaned'] },
              { actions: 'removeSubscriber' },
            ],
            shutdown: {
              target: 'cancelling',
              actions: [
                'unregister',
                {
                  type: 'broadcastFailure',
                  params: { failure: { class: 'cancelled', detail: 'shutting down' } },
                },
                'park',
              ],
            },
          },
        },
        /** Waiting for the Render to confirm ffmpeg is dead; nobody is subscribed any more. */
        cancelling: {
          entry: [
            'unregister',
            'cancelRender',
            { type: 'telemetry', params: { event: 'cancelled' } },
          ],
          on: {
            'render.cancelled': {
              target: '#renderCoordinator.stopped',
              actions: ['releaseSlot', 'answerParked'],
            },
            'render.done': {
              target: '#renderCoordinator.stopped',
              actions: ['releaseSlot', 'answerParked'],
            },
            'render.error': {
              target: '#renderCoordinator.stopped',
              actions: ['releaseSlot', 'answerParked'],
            },
            'render.chunk': { actions: 'ackChunk' },
            // Already unregistered: a joiner that reached us anyway is told to start afresh.
            join: { actions: 'replyStopping' },
            unsubscribe: { actions: ['removeSubscriber', 'park'] },
            gone: { actions: 'removeSubscriber' },
            shutdown: { actions: 'park' },
          },
        },
      },
    },
    completed: {
      after: { linger: { target: 'stopped' } },
      on: {
        join: [
          // Already unregistered; a joiner that reached us anyway cannot get the whole output.
          { guard: 'backlogDropped', actions: 'replyStopping' },
          {
            actions: ['notifyJoinerDone', { type: 'replyJoin', params: { state: 'completed' } }],
          },
        ],
        unsubscribe: { actions: ['removeSubscriber', 'replyOk'] },
        gone: { actions: 'removeSubscriber' },
        shutdown: { target: 'stopped', actions: 'replyOk' },
      },
    },
    stopped: { type: 'final', entry: 'releaseBacklog' },
  },
});
