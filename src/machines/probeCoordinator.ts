/**
 * ProbeCoordinator: one ffprobe of one source, shared by every request that needs its verdict.
 *
 * Different variants of one source, and `/info`, ask the same question ("what is in this
 * file?"), so the identity is the canonical source, not the cache key. The coordinator holds a
 * probe-limiter slot for exactly as long as ffprobe runs, and shares the answer for a short
 * linger with requests already in flight. It is not a cache.
 *
 * ## Invariants
 * - **At most one ffprobe per source in flight** (the Registry makes start-or-join one step).
 * - **The probe slot is released when the verdict arrives**, not at the end of the linger, so
 *   a second source is never refused because the first one is lingering.
 * - **A failure is never shared beyond the waiters already present**: the key is unregistered
 *   first, then the failure is broadcast, and the next request probes again.
 * - **Every waiter gets exactly one verdict** (`result` or `error`).
 *
 * ## Races
 * - *Join vs. verdict*: a joiner in `holding` is answered with the result in its join reply; a
 *   joiner in `probing` is answered `pending` and receives the verdict as a `notify`.
 *
 * ## Events
 * | Event | From | Effect |
 * |---|---|---|
 * | `join(id)` call | waiter | `probing`: reply `pending`, add; `holding`: reply `held(result)` |
 * | `leave(id)` / `gone(id)` | waiter, monitor | drop the waiter (the probe is bounded; it runs on) |
 * | probe done / error | invoked `probe` actor | release the slot; share or fail |
 */
import { type AnyActorLogic, type AnyActorRef, emit, enqueueActions, sendTo, setup } from 'xstate';
import type { ProbeFailureClass } from '../core/failure.js';
import { answer, type ReplyEvent } from '../core/protocol.js';

/** Requests already in flight when the verdict lands are served from it, not re-probed. */
export const PROBE_LINGER_MS = 1_000; // matches the render linger; a miss just probes again

const PROBE_FAILURE_CLASSES: ReadonlySet<string> = new Set([
  'not_found',
  'probe_timeout',
  'probe_failed',
  'upstream_unavailable',
  'not_configured',
]);

export interface ProbeFailure {
  readonly class: ProbeFailureClass;
  readonly detail?: string;
}

export type ProbeWaiterMessage<R> =
  | { readonly type: 'result'; readonly result: R }
  | { readonly type: 'error'; readonly failure: ProbeFailure };

export type ProbeJoinReply<R> =
  | { readonly type: 'pending' }
  | { readonly type: 'held'; readonly result: R }
  | { readonly type: 'stopping' };

export interface ProbeCoordinatorInput {
  readonly key: string;
  readonly slotId: string;
  readonly limiter: AnyActorRef;
  readonly firstWaiter: string;
  readonly probeInput: unknown;
}

interface Context {
  readonly key: string;
  readonly slotId: string;
  readonly limiter: AnyActorRef;
  readonly probeInput: unknown;
  readonly waiters: Set<string>;
  result: unknown;
}

type Envelope = { callId?: number; replyTo?: AnyActorRef };

export type ProbeCoordinatorEvent =
  | ({ type: 'join'; id: string } & Envelope)
  | { type: 'leave'; id: string }
  | { type: 'gone'; id: string; reason?: unknown };

export const probeCoordinatorMachine = setup({
  types: {
    input: {} as ProbeCoordinatorInput,
    context: {} as Context,
    events: {} as ProbeCoordinatorEvent,
    emitted: {} as
      | { type: 'notify'; to: string; message: ProbeWaiterMessage<unknown> }
      | ReplyEvent
      | { type: 'unregister' },
  },
  actors: {
    // Provided by the system: runs ffprobe in the probe pool and resolves with the parsed
    // verdict, or rejects with a `ProbeFailure`-shaped error.
    probe: {} as AnyActorLogic,
  },
  actions: {
    addWaiter: ({ context, event }) => {
      if (event.type === 'join') context.waiters.add(event.id);
    },
    removeWaiter: ({ context, event }) => {
      if (event.type === 'leave' || event.type === 'gone') context.waiters.delete(event.id);
    },
    replyJoin: enqueueActions(
      ({ context, event, enqueue }, params: { state: 'pending' | 'held' | 'stopping' }) => {
        if (event.type !== 'join') return;
        const payload =
          params.state === 'held'
            ? { type: 'held', result: context.result }
            : { type: params.state };
        answer(enqueue, event, payload);
      },
    ),
    // The verdict and the failure come in the invoke's typed done / error event, handed over as
    // params by the transitions below (the machine's own event union does not include them).
    keepResult: ({ context }, params: { output: unknown }) => {
      context.result = params.output;
    },
    broadcastResult: enqueueActions(({ context, enqueue }) => {
      for (const id of context.waiters) {
        enqueue.emit({
          type: 'notify',
          to: id,
          message: { type: 'result', result: context.result },
        });
      }
      context.waiters.clear();
    }),
    broadcastFailure: enqueueActions(({ context, enqueue }, params: { error: unknown }) => {
      const failure = toFailure(params.error);
      for (const id of context.waiters) {
        enqueue.emit({ type: 'notify', to: id, message: { type: 'error', failure } });
      }
      context.waiters.clear();
    }),
    unregister: emit({ type: 'unregister' as const }),
    releaseSlot: sendTo(
      ({ context }) => context.limiter,
      ({ context }) => ({ type: 'release', id: context.slotId }),
    ),
  },
  delays: { linger: PROBE_LINGER_MS },
}).createMachine({
  id: 'probeCoordinator',
  context: ({ input }) => ({
    key: input.key,
    slotId: input.slotId,
    limiter: input.limiter,
    probeInput: input.probeInput,
    waiters: new Set([input.firstWaiter]),
    result: undefined,
  }),
  initial: 'probing',
  states: {
    probing: {
      invoke: {
        src: 'probe',
        input: ({ context }: { context: Context }) => context.probeInput,
        onDone: {
          target: 'holding',
          actions: [
            'releaseSlot',
            { type: 'keepResult', params: ({ event }) => ({ output: event.output }) },
            'broadcastResult',
          ],
        },
        onError: {
          target: 'stopped',
          actions: [
            'releaseSlot',
            'unregister',
            { type: 'broadcastFailure', params: ({ event }) => ({ error: event.error }) },
          ],
        },
      },
      on: {
        join: { actions: [{ type: 'replyJoin', params: { state: 'pending' } }, 'addWaiter'] },
        leave: { actions: 'removeWaiter' },
        gone: { actions: 'removeWaiter' },
      },
    },
    holding: {
      after: { linger: 'stopped' },
      on: { join: { actions: { type: 'replyJoin', params: { state: 'held' } } } },
    },
    stopped: { type: 'final' },
  },
});

/** Normalises whatever the probe actor rejected with into the closed failure set. */
export function toFailure(error: unknown): ProbeFailure {
  const cls = (error as { class?: unknown } | null)?.class;
  if (typeof cls === 'string' && PROBE_FAILURE_CLASSES.has(cls)) {
    const detail = (error as { detail?: unknown }).detail;
    const known = cls as ProbeFailureClass;
    return typeof detail === 'string' ? { class: known, detail } : { class: known };
  }
  return { class: 'probe_failed', detail: error instanceof Error ? error.message : String(error) };
}
