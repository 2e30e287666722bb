/**
 * Readiness: the hysteresis latch behind `GET /ready`.
 *
 * A load balancer should stop sending new work to a node whose render queue is deep, and only
 * send it again once the queue has drained well below that depth; otherwise the node flaps in
 * and out of rotation on every arrival. This latch owns that one bit.
 *
 * ## Invariants
 * - **The latch moves only when asked** (`check`): there is no timer and no subscription.
 * - **Threshold 0 disables the check** and clears a tripped latch.
 * - `ready → tripped` when depth ≥ T; `tripped → ready` when depth ≤ ⌊T/2⌋ (with T = 1, only at an
 *   empty queue).
 * - **Every uncertainty resolves to ready**: the caller reads the depth from the semaphore and
 *   passes 0 if that read fails; an unreachable latch is answered "ready" by the client.
 *
 * ## Events
 * | Event | Fields | Reply |
 * |---|---|---|
 * | `check` | `queued` (depth read by the caller), `threshold` | `{ ready, queued, threshold }` after the move |
 */
import { type AnyActorRef, enqueueActions, setup } from 'xstate';
import { answer, type ReplyEvent } from '../core/protocol.js';

export interface ReadinessCheck {
  readonly type: 'check';
  readonly queued: number;
  readonly threshold: number;
  readonly callId?: number;
  readonly replyTo?: AnyActorRef;
}

export interface ReadinessReply {
  readonly ready: boolean;
  readonly queued: number;
  readonly threshold: number;
}

export const readinessMachine = setup({
  types: {
    events: {} as ReadinessCheck,
    emitted: {} as ReplyEvent<ReadinessReply>,
  },
  guards: {
    disabled: ({ event }) => event.threshold === 0,
    deepEnough: ({ event }) => event.queued >= event.threshold,
    drained: ({ event }) => event.queued <= Math.floor(event.threshold / 2),
  },
  actions: {
    answer: enqueueActions(({ event, enqueue }, params: { ready: boolean }) => {
      const payload: ReadinessReply = {
        ready: params.ready,
        queued: event.queued,
        threshold: event.threshold,
      };
      answer(enqueue, event, payload);
    }),
  },
}).createMachine({
  id: 'readiness',
  initial: 'ready',
  states: {
    ready: {
      on: {
        check: [
          { guard: 'disabled', actions: { type: 'answer', params: { ready: true } } },
          {
            guard: 'deepEnough',
            target: 'tripped',
            actions: { type: 'answer', params: { ready: false } },
          },
          { actions: { type: 'answer', params: { ready: true } } },
        ],
      },
    },
    tripped: {
      on: {
        check: [
          {
            guard: 'disabled',
            target: 'ready',
            actions: { type: 'answer', params: { ready: true } },
          },
          {
            guard: 'drained',
            target: 'ready',
            actions: { type: 'answer', params: { ready: true } },
          },
          { actions: { type: 'answer', params: { ready: false } } },
        ],
      },
    },
  },
});
