/**
 * Subscribe and unsubscribe: the caller side of the RenderCoordinator, over the Registry.
 *
 * `subscribe` is start-or-join as one step. Starting asks the semaphore for a slot *before* a
 * coordinator exists, so a full queue is a 429 with nothing left registered; joining asks the
 * running coordinator for its backlog in the same transition that adds the subscriber.
 *
 * ## Races
 * - *Grant before the coordinator exists*: the semaphore may notify our slot id between its
 *   `queued` reply and the coordinator's creation, so the inbox is registered **before** the
 *   request and buffers until the coordinator starts.
 * - *Coordinator dies holding the slot*: the semaphore watches the coordinator as the slot's
 *   holder; any ending of the actor is a `gone` that frees the slot (the monitor backstop for
 *   paths that bypass the chart's own release).
 * - *Join against a coordinator that is cancelling*: it answers `stopping`; the join is retried
 *   as a fresh start by the Registry.
 * - *Preempted*: the slot id's inbox also carries the semaphore's `preempted` (the coordinator
 *   had declared itself an orphan); it becomes `slot.preempted`, which the coordinator obeys only
 *   while it is still an orphan.
 */

import type { AnyActorRef } from 'xstate';
import { type Actor, type ActorOptions, type AnyActorLogic, createActor } from 'xstate';
import type { ConfigProvider } from '../config.js';
import type { RenderRequest, SubscribeOutcome } from '../http/handler.js';
import {
  type JoinReply,
  type RenderFailure,
  renderCoordinatorMachine,
  type SubscriberMessage,
} from '../machines/renderCoordinator.js';
import type { AdmissionClass, SlotMessage } from '../machines/semaphore.js';
import { CallError, call, inbox } from './call.js';
import { watchInto } from './monitor.js';
import { Registry } from './registry.js';
import { type TeeService, variantMetadata } from './teeService.js';

/** The unsubscribe barrier waits this long: above the Render's whole cancel budget (6 s). */
export const UNSUBSCRIBE_TIMEOUT_MS = 15_000;

export type CoordinatorActor = Actor<typeof renderCoordinatorMachine>;

export interface RenderServiceOptions {
  readonly semaphore: AnyActorRef;
  readonly config: ConfigProvider;
  /** The Render logic the coordinator invokes (a Render machine bound to a pool). */
  readonly renderLogic: AnyActorLogic;
  /** Builds the Render's input for a request (argv, executable, timeout…). */
  readonly renderInput: (request: RenderRequest) => unknown;
  /** Admission class for renders started by this service. @default 'interactive' */
  readonly admissionClass?: AdmissionClass;
  /** Treats a coordinator's XState error (a bug in a pure chart) as fatal. */
  readonly supervise?: (actor: AnyActorRef, name: string) => void;
  /** Writes every render into the variant store (absent: no store). */
  readonly tees?: TeeService;
  /** XState inspection observer for every coordinator (the proxy's `inspect` option). */
  readonly inspect?: ActorOptions<AnyActorLogic>['inspect'];
}

let slotSeq = 0;

export class RenderService {
  readonly registry = new Registry<string, CoordinatorActor>();
  /** Every coordinator not yet stopped, registered or already unregistered (cancelling). */
  readonly #live = new Set<CoordinatorActor>();
  readonly #opts: RenderServiceOptions;
  readonly #machine;

  constructor(options: RenderServiceOptions) {
    this.#opts = options;
    this.#machine = renderCoordinatorMachine.provide({ actors: { render: options.renderLogic } });
  }

  /** Coordinators registered (rendering, queued or lingering): the renders_running gauge. */
  get running(): number {
    return this.registry.size;
  }

  /** Coordinators alive, including unregistered ones still cancelling (leak checks). */
  get live(): number {
    return this.#live.size;
  }

  async subscribe(
    request: RenderRequest,
    subscriberId: string,
    onMessage: (message: SubscriberMessage) => void,
  ): Promise<SubscribeOutcome> {
    const outcome = await this.registry.startOrJoin<
      JoinReply & { type: 'joined' },
      JoinReply & { type: 'joined' },
      RenderFailure
    >(request.key, {
      start: (key) => this.#start(key, request, subscriberId, onMessage),
      join: async (actor, _key, signal) => {
        const off = inbox(actor, subscriberId, onMessage);
        try {
          const reply = await call<JoinReply>(
            actor,
            { type: 'join', id: subscriberId },
            { signal },
          );
          if (reply.type === 'stopping') {
            throw new CallError('ERR_CALLEE_STOPPED', 'coordinator is stopping');
          }
          return reply;
        } catch (error) {
          off();
          throw error;
        }
      },
    });
    switch (outcome.type) {
      case 'started':
        return {
          type: 'miss',
          coordinator: outcome.actor,
          state: outcome.value.state,
          backlog: outcome.value.backlog,
        };
      case 'joined':
        return {
          type: 'coalesced',
          coordinator: outcome.actor,
          state: outcome.value.state,
          backlog: outcome.value.backlog,
        };
      case 'failed':
        return { type: 'failed', failure: outcome.failure };
      default:
        return {
          type: 'failed',
          failure: {
            class: 'render_failed',
            detail: `coordinator unavailable (${outcome.reason})`,
          },
        };
    }
  }

  async #start(
    key: string,
    request: RenderRequest,
    subscriberId: string,
    onMessage: (message: SubscriberMessage) => void,
  ) {
    const { semaphore } = this.#opts;
    const slotId = `render-${++slotSeq}`;
    let coordinator: CoordinatorActor | null = null;
    const early: SlotMessage[] = [];
    const forward = (message: SlotMessage) => {
      const event =
        message.type === 'granted'
          ? ({ type: 'slot.granted' } as const)
          : message.type === 'preempted'
            ? ({ type: 'slot.preempted' } as const)
            : ({ type: 'slot.displaced', retryAfterS: message.retryAfterS } as const);
      if (coordinator) coordinator.send(event);
      else early.push(message);
    };
    const offSlot = inbox<SlotMessage>(semaphore, slotId, forward);
    const cls = this.#opts.admissionClass;
    type Admission =
      | { type: 'granted' }
      | { type: 'queued' }
      | { type: 'queue_full'; retryAfterS: number }
      | { type: 'already_held' };
    let admission: Admission | null = null;
    if (request.adoptSlotId) {
      // A waiting-room reservation: take its slot over (1 → 1) instead of asking for another.
      const moved = await call<
        { type: 'transferred'; as: 'holder' | 'waiter' } | { type: 'unknown' }
      >(semaphore, { type: 'transfer', from: request.adoptSlotId, to: slotId });
      if (moved.type === 'transferred') {
        admission = { type: moved.as === 'holder' ? 'granted' : 'queued' };
      }
    }
    admission ??= await call<Admission>(
      semaphore,
      cls ? { type: 'request', id: slotId, class: cls } : { type: 'request', id: slotId },
    );
    if (admission.type === 'queue_full' || admission.type === 'already_held') {
      offSlot();
      const retryAfterS = admission.type === 'queue_full' ? admission.retryAfterS : 1;
      return {
        type: 'failed' as const,
        failure: { class: 'queue_full' as const, retryAfterS, detail: 'Render queue is full' },
      };
    }
    const actor = createActor(this.#machine, {
      input: {
        key,
        admission: admission.type,
        slotId,
        semaphore,
        firstSubscriber: subscriberId,
        maxVariantBytes: () => this.#opts.config.get().maxVariantBytes,
        renderInput: this.#opts.renderInput(request),
      },
      ...(this.#opts.inspect ? { inspect: this.#opts.inspect } : {}),
    });
    coordinator = actor;
    inbox(actor, subscriberId, onMessage);
    actor.on('unregister', () => this.registry.unregister(key, actor));
    const unwatchSlot = watchInto(semaphore, slotId, actor);
    this.#opts.supervise?.(actor, `renderCoordinator:${key}`);
    this.#live.add(actor);
    actor.subscribe({
      complete: () => {
        this.#live.delete(actor);
        offSlot();
        unwatchSlot();
      },
      error: () => {
        this.#live.delete(actor);
        offSlot();
      },
    });
    this.#opts.tees?.onRendering(actor, key, variantMetadata(request.options));
    actor.start();
    for (const message of early.splice(0)) forward(message);
    const snapshot = actor.getSnapshot();
    const state: JoinReply & { type: 'joined' } = {
      type: 'joined',
      state: snapshot.matches('queued')
        ? 'queued'
        : snapshot.matches('completed')
          ? 'completed'
          : 'rendering',
      backlog: [],
    };
    return { type: 'started' as const, actor, value: state };
  }

  /** Leaves a coordinator; resolves once the coordinator answered (after any kill it caused). */
  async unsubscribe(coordinator: AnyActorRef, subscriberId: string): Promise<void> {
    try {
      await call(
        coordinator,
        { type: 'unsubscribe', id: subscriberId },
        { timeout: UNSUBSCRIBE_TIMEOUT_MS },
      );
    } catch (error) {
      // A coordinator that already stopped has nothing to cancel.
      if (!(error instanceof CallError && error.code === 'ERR_CALLEE_STOPPED')) throw error;
    }
  }

  /** Stops every coordinator: each cancels its render and releases its slot before answering. */
  async shutdown(timeoutMs = UNSUBSCRIBE_TIMEOUT_MS): Promise<void> {
    const actors = [...this.#live];
    await Promise.allSettled(
      actors.map((a) => call(a, { type: 'shutdown' }, { timeout: timeoutMs })),
    );
  }
}
