/**
 * The two admission singletons, created (not started: the system starts them first and stops
 * them last) and sized from the config:
 * - the render **semaphore** (`AP_MAX_CONCURRENCY` slots, `AP_QUEUE_SIZE` waiters, waits bounded
 *   by `AP_RENDER_TIMEOUT`);
 * - the **probe limiter** (`AP_MAX_PROBE_CONCURRENCY`, no queue).
 *
 * ## Invariants
 * - **Limits are read from the provider at every operation**, never copied at boot, so a
 *   mutable config (tests, a reload) changes them in place.
 * - **The semaphore builds a telemetry event only when its channel has a subscriber**
 *   (`wantedOn`): metrics, the live view or an embedder; otherwise the hot path emits nothing.
 */
import { type Actor, type ActorOptions, createActor } from 'xstate';
import type { ConfigProvider } from '../config/index.js';
import { probeLimiterMachine } from '../machines/probeLimiter.js';
import { semaphoreMachine } from '../machines/semaphore.js';
import { SEMAPHORE_PREFIX, wantedOn } from '../telemetry/channels.js';

export interface Slots {
  readonly semaphore: Actor<typeof semaphoreMachine>;
  readonly probeLimiter: Actor<typeof probeLimiterMachine>;
}

/** Creates both actors, unstarted. `inspect` is the proxy's XState inspection observer. */
export function createSlots(
  config: ConfigProvider,
  options: { readonly inspect?: ActorOptions<typeof semaphoreMachine>['inspect'] } = {},
): Slots {
  const inspect = options.inspect ? { inspect: options.inspect } : {};
  const semaphore = createActor(semaphoreMachine, {
    input: {
      limits: () => {
        const c = config.get();
        return {
          capacity: c.maxConcurrency,
          queueSize: c.queueSize,
          renderTimeoutS: c.renderTimeoutS,
        };
      },
      telemetry: wantedOn(SEMAPHORE_PREFIX),
    },
    ...inspect,
  });
  const probeLimiter = createActor(probeLimiterMachine, {
    input: { limits: () => ({ capacity: config.get().maxProbeConcurrency }) },
    ...inspect,
  });
  return { semaphore, probeLimiter };
}
