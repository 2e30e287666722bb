/**
 * Subscribe and unsubscribe: the caller side of the RenderCoordinator, over the Registry.
 *
 * `subscribe` is start-or-join as one step. Starting asks the semaphore for a slot *before* a
 * coordinator exists, so a full queue is a 429 with nothing left registered; joining asks the
 * running coordinator for its backlog in the same transition that adds the subscriber.
 *
 * ## Invariants
 * - **One owner per slot, from grant to end.** The render input (`renderInput.ts` in the proxy)
 *   is built only once the semaphore has admitted the request (a refusal never pays for it); a
 *   throw there is given back like any other. From the grant until the coordinator has started,
 *   `#start` owns the slot or queue place and gives it back on any throw (`#abandon`); from the
 *   coordinator's start on, the coordinator owns it and releases it on every one of its paths.
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
import { CallError, call, cast, inbox } from '../actors/call.js';
import { watchInto } from '../actors/monitor.js';
import { Registry } from '../actors/registry.js';
import type { ConfigProvider } from '../config/index.js';
import type { RenderFailure } from '../core/failure.js';
import type { RenderRequest, SubscribeOutcome } from '../core/request.js';
import {
  type BacklogBudget,
  type JoinReply,
  renderCoordinatorMachine,
  type SubscriberMessage,
} from '../machines/renderCoordinator.js';
import type { AdmissionClass, SlotMessage } from '../machines/semaphore.js';
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
  /** Admission class for renders started by this service, unless `subscribe` names one. @default 'interactive' */
  readonly admissionClass?: AdmissionClass;
  /** Treats a coordinator's XState error (a bug in a pure chart) as fatal. */
  readonly supervise?: (actor: AnyActorRef, name: string) => void;
  /** Writes every render into the variant store (absent: no store). */
  readonly tees?: TeeService;
  /** XState inspection observer for every coordinator (the proxy's `inspect` option). */
  readonly inspect?: ActorOptions<AnyActorLogic>['inspect'];
  /** The budget every coordinator's backlog draws on (`AP_BACKLOG_BUDGET_BYTES`). */
  readonly backlogBudget?: BacklogBudget;
}

let slotSeq = 0;

/** How one subscriber takes part (the warm service's jobs; a live request passes nothing). */
export interface SubscribeOptions {
  /** The class a render this subscription starts asks its slot at. */
  readonly class?: AdmissionClass;
  /** The subscriber only fills the store: it never keeps a slot from a listener. */
  readonly store?: boolean;
}

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

  /** Bytes all backlogs hold now (0 without a budget: nothing is counted). */
  get backlogBytes(): number {
    return this.#opts.backlogBudget?.heldBytes ?? 0;
  }

  /** Coordinators alive, including unregistered ones still cancelling (leak checks). */
  get live(): number {
    return this.#live.size;
  }

  async subscribe(
    request: RenderRequest,
    subscriberId: string,
    onMessage: (message: SubscriberMessage) => void,
    options: SubscribeOptions = {},
  ): Promise<SubscribeOutcome> {
    const outcome = await this.registry.startOrJoin<
      JoinReply & { type: 'joined' },
      JoinReply & { type: 'joined' },
      RenderFailure
    >(request.key, {
      start: (key) => this.#start(key, request, subscriberId, onMessage, options),
      join: async (actor, _key, signal) => {
        const off = inbox(actor, subscriberId, onMessage);
        try {
          const reply = await call<JoinReply>(
            actor,
            options.store === true
              ? { type: 'join', id: subscriberId, store: true }
              : { type: 'join', id: subscriberId },
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
    options: SubscribeOptions,
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
    const cls = options.class ?? this.#opts.admissionClass;
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
    // From here the slot (or the queue place) is held: this function owns it until the
    // coordinator has started, and the coordinator owns it from then on. Any throw in between
    // gives it back here, so exactly one owner releases it on every path.
    let actor: CoordinatorActor | null = null;
    let started = false;
    let unwatchSlot: (() => void) | null = null;
    try {
      // The render's input (argv, sizing) only for a request the semaphore admitted: a burst's
      // refusals never build it. A throw here (argv building, a source the encoders cannot
      // take) gives the slot back like any other below.
      const renderInput = this.#opts.renderInput(request);
      actor = createActor(this.#machine, {
        input: {
          key,
          admission: admission.type,
          slotId,
          semaphore,
          firstSubscriber: subscriberId,
          ...(options.store === true ? { firstSubscriberStore: true } : {}),
          ...(cls ? { admissionClass: cls } : {}),
          maxVariantBytes: () => this.#opts.config.get().maxVariantBytes,
          ...(this.#opts.backlogBudget ? { backlogBudget: this.#opts.backlogBudget } : {}),
          renderInput,
        },
        ...(this.#opts.inspect ? { inspect: this.#opts.inspect } : {}),
      });
      const self = actor;
      coordinator = self;
      inbox(self, subscriberId, onMessage);
      self.on('unregister', () => this.registry.unregister(key, self));
      unwatchSlot = watchInto(semaphore, slotId, self);
      this.#opts.supervise?.(self, `renderCoordinator:${key}`);
      this.#live.add(self);
      const unwatch = unwatchSlot;
      self.subscribe({
        complete: () => {
          this.#live.delete(self);
          offSlot();
          unwatch();
        },
        error: () => {
          this.#live.delete(self);
          offSlot();
        },
      });
      this.#opts.tees?.onRendering(self, key, variantMetadata(request.options));
      started = true;
      self.start();
      for (const message of early.splice(0)) forward(message);
    } catch (error) {
      this.#abandon(slotId, actor, started, offSlot, unwatchSlot);
      throw error;
    }
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

  /**
   * Gives back what a failed hand-off holds: a started coordinator is told to shut down (it
   * cancels its render and releases the slot once ffmpeg is dead); before that, the slot or
   * queue place is released here and the coordinator that never ran is forgotten.
   */
  #abandon(
    slotId: string,
    actor: CoordinatorActor | null,
    started: boolean,
    offSlot: () => void,
    unwatchSlot: (() => void) | null,
  ): void {
    if (actor && started && actor.getSnapshot().status === 'active') {
      cast(actor, { type: 'shutdown' });
      return; // its own stop path releases, and its completion observer cleans up
    }
    unwatchSlot?.();
    offSlot();
    if (actor) {
      this.#live.delete(actor);
      actor.stop();
    }
    cast(this.#opts.semaphore, { type: 'release', id: slotId });
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
