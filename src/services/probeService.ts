/**
 * The probe gate: one ffprobe per source in flight, shared by every request that needs the
 * verdict, rationed by the probe limiter (no queue: overflow is a 429 with `Retry-After: 1`).
 *
 * A waiter asks `probe(source)`; the first one for a source takes a limiter slot and starts a
 * ProbeCoordinator, later ones join it. The verdict is either the parsed probe (audio-only
 * policy applied: `video_source` and `undecodable_source` are refusals shared like results) or
 * a failure (`not_found`, `probe_timeout`, `probe_failed`), which is never shared beyond the
 * waiters already present.
 *
 * A verdict about the bytes is kept per source version (`probeCache.ts`): the next request for
 * the same unchanged source is answered from it, without a limiter slot or a subprocess.
 *
 * The probe itself (open the source, run ffprobe on its descriptor, judge the answer) is the
 * `probeLogic` the caller provides: the proxy's is `probeGate.ts`.
 *
 * ## Races
 * - *Verdict before the waiter's continuation runs*: the inbox is registered before the join,
 *   and a verdict held in the join reply is taken from there.
 * - *Coordinator dies without a verdict*: the waiter's deadline (`AP_PROBE_TIMEOUT` + 3 s)
 *   answers `probe_timeout`; the coordinator's own probe deadline fires first.
 */
import {
  type Actor,
  type ActorOptions,
  type AnyActorLogic,
  type AnyActorRef,
  createActor,
} from 'xstate';
import { CallError, call, inbox } from '../actors/call.js';
import { watchInto } from '../actors/monitor.js';
import { Registry } from '../actors/registry.js';
import type { ConfigProvider } from '../config/index.js';
import type { Failure } from '../core/failure.js';
import type { ProbeOutcome } from '../core/request.js';
import type { ResolvedSource } from '../core/source.js';
import {
  type ProbeJoinReply,
  type ProbeWaiterMessage,
  probeCoordinatorMachine,
} from '../machines/probeCoordinator.js';
import { ProbeCache } from './probeCache.js';
import { acquireProbeSlot } from './semaphoreClient.js';

/** Past the probe's own deadline, how long a waiter waits before calling it a timeout. */
export const PROBE_WAITER_SLACK_MS = 3_000;

/** What the probe actor resolves with: the /info body, or a refusal shared like a result. */
export type ProbeResult =
  | {
      readonly ok: true;
      readonly info: Record<string, unknown>;
      readonly media?: Extract<ProbeOutcome, { ok: true }>['media'];
    }
  | {
      readonly ok: false;
      readonly refusal: 'video_source' | 'undecodable_source' | 'source_too_large';
    };

type CoordinatorActor = Actor<typeof probeCoordinatorMachine>;

let seq = 0;

export class ProbeService {
  readonly registry = new Registry<string, CoordinatorActor>();
  /** Verdicts per source version: a second variant of a source runs no ffprobe. */
  readonly cache: ProbeCache<ProbeResult>;
  readonly #limiter: AnyActorRef;
  readonly #config: ConfigProvider;
  readonly #machine;
  readonly #supervise: ((actor: AnyActorRef, name: string) => void) | undefined;
  readonly #inspect: ActorOptions<AnyActorLogic>['inspect'];

  constructor(options: {
    limiter: AnyActorRef;
    config: ConfigProvider;
    probeLogic: AnyActorLogic;
    supervise?: (actor: AnyActorRef, name: string) => void;
    /** XState inspection observer for every coordinator (the proxy's `inspect` option). */
    inspect?: ActorOptions<AnyActorLogic>['inspect'];
    /** Verdicts kept; 0 turns the cache off. @default PROBE_CACHE_ENTRIES */
    cacheEntries?: number;
  }) {
    this.cache = new ProbeCache(options.cacheEntries);
    this.#supervise = options.supervise;
    this.#inspect = options.inspect;
    this.#limiter = options.limiter;
    this.#config = options.config;
    this.#machine = probeCoordinatorMachine.provide({ actors: { probe: options.probeLogic } });
  }

  async probe(source: ResolvedSource): Promise<ProbeOutcome> {
    const cacheKey = ProbeCache.keyOf(source);
    const known = this.cache.get(cacheKey);
    if (known !== undefined) return toOutcome({ type: 'result', result: known });
    const outcome = await this.#probe(source, cacheKey ?? source.canonical);
    if (outcome.result !== undefined) this.cache.set(cacheKey, outcome.result);
    return outcome.answer;
  }

  /** `key` names the source version when it is known, so a rewritten file never joins the probe
   * of its previous bytes (a coordinator keeps its verdict for late joiners a while). */
  async #probe(
    source: ResolvedSource,
    key: string,
  ): Promise<{ answer: ProbeOutcome; result?: ProbeResult }> {
    const answered = (message: ProbeWaiterMessage<ProbeResult>) =>
      message.type === 'result'
        ? { answer: toOutcome(message), result: message.result }
        : { answer: toOutcome(message) };
    const waiterId = `probe-waiter-${++seq}`;
    let settle!: (m: ProbeWaiterMessage<ProbeResult>) => void;
    const verdict = new Promise<ProbeWaiterMessage<ProbeResult>>((r) => {
      settle = r;
    });
    const offs: Array<() => void> = [];
    const outcome = await this.registry.startOrJoin<null, ProbeJoinReply<ProbeResult>, Failure>(
      key,
      {
        start: async (key) => {
          const slotId = `probe-${++seq}`;
          const slot = await acquireProbeSlot(this.#limiter, slotId);
          if (slot.type !== 'granted') {
            return {
              type: 'failed',
              failure: {
                type: 'queue_full',
                retryAfterS: slot.type === 'queue_full' ? slot.retryAfterS : 1,
              },
            };
          }
          const actor = createActor(this.#machine, {
            input: {
              key,
              slotId,
              limiter: this.#limiter,
              firstWaiter: waiterId,
              probeInput: source,
            },
            ...(this.#inspect ? { inspect: this.#inspect } : {}),
          });
          offs.push(inbox(actor, waiterId, settle as (m: unknown) => void));
          actor.on('unregister', () => this.registry.unregister(key, actor));
          this.#supervise?.(actor, `probeCoordinator:${key}`);
          const unwatch = watchInto(this.#limiter, slotId, actor);
          actor.subscribe({ complete: unwatch, error: unwatch });
          actor.start();
          return { type: 'started', actor, value: null };
        },
        join: async (actor, _key, signal) => {
          const off = inbox(actor, waiterId, settle as (m: unknown) => void);
          offs.push(off);
          const reply = await call<ProbeJoinReply<ProbeResult>>(
            actor,
            { type: 'join', id: waiterId },
            { signal },
          );
          if (reply.type === 'stopping') {
            off();
            throw new CallError('ERR_CALLEE_STOPPED', 'probe coordinator is stopping');
          }
          return reply;
        },
      },
    );
    try {
      if (outcome.type === 'failed') return { answer: { ok: false, failure: outcome.failure } };
      if (outcome.type === 'unavailable') {
        return { answer: { ok: false, failure: { type: 'probe_failed' } } };
      }
      if (outcome.type === 'joined' && outcome.value.type === 'held') {
        return answered({ type: 'result', result: outcome.value.result });
      }
      const deadlineMs = this.#config.get().probeTimeoutS * 1000 + PROBE_WAITER_SLACK_MS;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise<ProbeWaiterMessage<ProbeResult>>((resolve) => {
        timer = setTimeout(
          () => resolve({ type: 'error', failure: { class: 'probe_timeout' } }),
          deadlineMs,
        );
      });
      const message = await Promise.race([verdict, timeout]);
      clearTimeout(timer);
      if (message.type === 'error') outcome.actor.send({ type: 'leave', id: waiterId });
      return answered(message);
    } finally {
      for (const off of offs) off();
    }
  }
}

function toOutcome(message: ProbeWaiterMessage<ProbeResult>): ProbeOutcome {
  if (message.type === 'error') {
    const cls = message.failure.class;
    return { ok: false, failure: { type: cls === 'not_found' ? 'not_found' : cls } };
  }
  const result = message.result;
  return result.ok
    ? { ok: true, info: result.info, ...(result.media ? { media: result.media } : {}) }
    : { ok: false, failure: { type: result.refusal } };
}
