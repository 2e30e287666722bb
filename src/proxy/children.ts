/**
 * The system's application children, in the order `createSystem` starts them (and stops them in
 * reverse): probes, the variant store, the cluster link, the renders. Each spec says what it
 * starts and how it stops; the composition root (`proxy.ts`) lists them after the singletons.
 *
 * ## Invariants
 * - **The store and the cluster start before the renders, so they stop after them**: tees
 *   settle and the store closes only once no render can write; registry slots are released
 *   before the Redis link closes.
 * - **A render's stop is bounded** (`RENDERS_STOP_TIMEOUT_MS`): the system reports a child that
 *   outlives it rather than waiting for ever.
 */
import type { AnyActorRef } from 'xstate';
import type { ChildSpec } from '../actors/system.js';
import type { Cluster } from '../cluster/cluster.js';
import type { ConfigProvider } from '../config/index.js';
import type { InspectObserver } from '../inspect.js';
import { createBacklogBudget } from '../machines/renderCoordinator.js';
import { probeLogic } from '../services/probeGate.js';
import { ProbeService } from '../services/probeService.js';
import { renderInputFor } from '../services/renderInput.js';
import { renderLogic } from '../services/renderLogic.js';
import { RenderService } from '../services/renderService.js';
import type { SupervisedPool } from '../services/supervisedPool.js';
import type { TeeService } from '../services/teeService.js';
import type { VariantStore } from '../store/types.js';
import type { EncoderCapabilities } from '../workers/capabilities.js';

/** How long the renders' stop may take before the system reports it. */
export const RENDERS_STOP_TIMEOUT_MS = 20_000;

type Inspect = { inspect?: InspectObserver };

export function probesChild(deps: {
  readonly limiter: AnyActorRef;
  readonly config: ConfigProvider;
  readonly pool: SupervisedPool;
  readonly ffprobePath: string;
  readonly capabilities: EncoderCapabilities;
  readonly inspect: Inspect;
}): ChildSpec<ProbeService> {
  const { limiter, config, pool, ffprobePath, capabilities, inspect } = deps;
  return {
    name: 'probes',
    start: (sys) =>
      new ProbeService({
        limiter,
        config,
        probeLogic: probeLogic({ config, pool, ffprobePath, capabilities }),
        supervise: (a, n) => void sys.supervise(a, n),
        ...inspect,
      }),
    stop: () => {}, // a probe is bounded by its own deadline and releases into the limiter
  };
}

export function storeChild(
  store: VariantStore | undefined,
  tees: TeeService | undefined,
): ChildSpec<VariantStore | undefined> {
  return {
    name: 'store',
    start: () => store,
    stop: async () => {
      await tees?.drain();
      await store?.close();
    },
  };
}

export function clusterChild(cluster: Cluster | undefined): ChildSpec<Cluster | undefined> {
  return {
    name: 'cluster',
    start: async () => {
      await cluster?.start();
      return cluster;
    },
    stop: () => cluster?.close(),
  };
}

export function rendersChild(deps: {
  readonly semaphore: AnyActorRef;
  readonly config: ConfigProvider;
  readonly tees: TeeService | undefined;
  readonly ffmpegPath: string;
  readonly pool: SupervisedPool;
  readonly inspect: Inspect;
}): ChildSpec<RenderService> {
  const { semaphore, config, tees, ffmpegPath, pool, inspect } = deps;
  return {
    name: 'renders',
    start: (sys) =>
      new RenderService({
        supervise: (a, n) => void sys.supervise(a, n),
        semaphore,
        config,
        renderLogic,
        ...(tees ? { tees } : {}),
        ...inspect,
        backlogBudget: createBacklogBudget(() => config.get().backlogBudgetBytes),
        renderInput: (request) => renderInputFor(request, config.get(), ffmpegPath, pool),
      }),
    stop: (renders) => renders.shutdown(),
    stopTimeoutMs: RENDERS_STOP_TIMEOUT_MS,
  };
}
