/**
 * `createAudioProxy(config)`: the composition root. It builds the parts in the order they depend
 * on each other, hands the singletons to the system (`actors/system.ts`), which starts them in
 * that order and stops them in reverse, and wires the HTTP side to what the system started.
 * Each part's logic lives in its own room (the probe gate, render input, pool gauges and the
 * metrics router in `services/`; the listeners, in-flight drain, fatal policy and the public
 * types beside this file in `proxy/`); this file only wires.
 *
 * Before anything starts, ffmpeg and ffprobe are resolved and ffmpeg's capabilities listed
 * (while the variant store is proved): the boot log says what this ffmpeg cannot do, and the
 * request path, the probe gate, `/health` and the demo are handed the one reading.
 *
 * Start order (each later child may use every earlier one):
 *  1. semaphore, probe limiter, readiness: coordinators release into them from their own stop
 *     paths, so they must outlive every coordinator;
 *  2. worker pools (warmed): renders and probes run in them;
 *  3. the probe service, the variant store and cluster mode;
 *  4. the render service, last: its coordinators are the first thing stopped.
 * Services that supervise dynamic actors are built inside their child from the system it hands
 * them; the live view follows every supervised actor through the system's `onSupervise` hook.
 * Metrics, logs and both handlers are built once the system runs; the listeners start at
 * `listen()`, when every consumer exists.
 *
 * Shutdown (`close()`) first turns the node away from new work: the listeners stop accepting and
 * every new request (`/health` included, on a kept-alive connection or an embedder's own server)
 * answers 503 `shutting_down`. Responses already in flight drain for up to `CLOSE_DRAIN_MS`.
 * Then the system stops backwards: coordinators cancel what is left (each answers only after
 * ffmpeg is dead and its slot released), pools drain and close, and the semaphore goes last.
 *
 * ## Invariants
 * - **The library never kills its host.** `listen()` rejects with a `ListenError`
 *   (`ERR_AP_LISTEN`, the cause attached) and leaves nothing bound; a fatal actor failure closes
 *   the proxy (no drain, bounded by `FATAL_STOP_BUDGET_MS`) and then calls the `onFatal` hook
 *   (`proxy/fatal.ts`). Nothing here calls `process.exit`; the CLI's hook does.
 * - **`close()` is idempotent**: every call gets the same promise.
 * - **Nothing is wired in after construction**: every hook is given where the part is built.
 *
 * ## Races
 * - *A request lands as close() begins*: it is either counted in flight (and drained) or
 *   answered 503; the flag is read once, on entry.
 * - *A fatal failure during start*: the system reports it at once; it is acted on (the proxy
 *   closed, then `onFatal`) as soon as the proxy is assembled.
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import { createActor } from 'xstate';
import { actorChild, createSystem, type Fatal } from './actors/system.js';
import { Cluster } from './cluster/cluster.js';
import { type Config, type ConfigProvider, staticConfig } from './config/index.js';
import { errorResponse } from './http/errors.js';
import { createHandler } from './http/handler.js';
import { optionGrammarOf } from './http/presets.js';
import { TurnBudget } from './http/turns.js';
import { readinessMachine } from './machines/readiness.js';
import { clusterChild, probesChild, rendersChild, storeChild } from './proxy/children.js';
import { closeOnFatal } from './proxy/fatal.js';
import { ResponsesInFlight } from './proxy/inFlight.js';
import { Listeners } from './proxy/listeners.js';
import { openObservation, watchActors } from './proxy/observation.js';
import {
  type AudioProxy,
  type AudioProxyOptions,
  CLOSE_DRAIN_MS,
  type ProxyFatal,
} from './proxy/types.js';
import { ffmpegBootNotes, ffmpegHealth } from './services/encoderReport.js';
import { metricsRouter } from './services/metricsRouter.js';
import { poolGauges, poolHealth } from './services/poolGauges.js';
import type { ProbeService } from './services/probeService.js';
import { checkReady } from './services/readinessClient.js';
import type { RenderService } from './services/renderService.js';
import { retryAfter, stats as semaphoreStats } from './services/semaphoreClient.js';
import { createSlots } from './services/slots.js';
import { createSupervisedPool, poolsChild } from './services/supervisedPool.js';
import { TeeService } from './services/teeService.js';
import { WaitingRoomService } from './services/waitingRoomService.js';
import { WarmService, warmStatusRoute } from './services/warmService.js';
import { resolveRemote } from './sources/remote.js';
import { createVariantStore } from './store/index.js';
import {
  PROBE_LIMITER_PREFIX,
  publishTelemetry,
  SEMAPHORE_PREFIX,
  WORKER_POOL_TRANSITION_CHANNEL,
} from './telemetry/channels.js';
import { attachAccessLog, attachRenderLog, createLogger } from './telemetry/logger.js';
import { Metrics, SCRAPE_SAMPLE_TIMEOUT_MS } from './telemetry/metrics.js';
import { EncoderCapabilities, readCapabilities } from './workers/capabilities.js';
import { resolveFfmpeg, resolveFfprobe } from './workers/ffmpegPath.js';

export const VERSION = '0.1.0';

export { LISTEN_BACKLOG, ListenError } from './proxy/listeners.js';
export {
  type AudioProxy,
  type AudioProxyOptions,
  CLOSE_DRAIN_MS,
  type ProxyFatal,
  WORKER_POOL_TRANSITION_CHANNEL,
};

function isProvider(c: Config | ConfigProvider): c is ConfigProvider {
  return typeof (c as ConfigProvider).get === 'function';
}

export async function createAudioProxy(options: AudioProxyOptions): Promise<AudioProxy> {
  const provider = isProvider(options.config) ? options.config : staticConfig(options.config);
  const boot = provider.get();
  // The presets against the option grammar: a bad one is a ConfigError before anything is built.
  optionGrammarOf(boot);
  // JSON unless the config says `pretty`: the library never sniffs its host's terminal.
  const logger = options.logger ?? createLogger(boot.logLevel, { format: boot.logFormat });
  const now = options.now ?? Date.now;
  const env = { PATH: process.env.PATH };
  const ffmpeg = resolveFfmpeg({ env: { ...env, AP_FFMPEG_PATH: boot.ffmpegPath } });
  const ffprobe = resolveFfprobe({ env: { ...env, AP_FFPROBE_PATH: boot.ffprobePath } });
  // What this ffmpeg can do, listed while the store is proved (workers/capabilities.ts).
  const reading = readCapabilities(ffmpeg.path);

  // The variant store, proved usable (file: staging swept + write probe; s3: PUT+DELETE).
  const store = await createVariantStore(boot);
  // Inspection (opt-in) and the flight recorder (AP_FLIGHT_RECORDER), before the first actor.
  const { inspection, recorder, inspect, watchSemaphore } = await openObservation(
    boot,
    options.inspect,
    logger,
  );
  const capabilities = new EncoderCapabilities(await reading);
  for (const note of ffmpegBootNotes(ffmpeg, ffprobe, capabilities)) {
    logger[note.level](note.fields, note.message);
  }

  // The singletons, created here and started by the system in its order.
  const { semaphore, probeLimiter } = createSlots(provider, inspect);
  watchSemaphore(semaphore);
  const readiness = createActor(readinessMachine, inspect);
  // Pools sized to the admission capacity (the semaphore is the only queue), each under a
  // process supervisor that starts it lazily, recycles it after N tasks, replaces it if unwell.
  const renderPool = createSupervisedPool({
    name: 'render',
    size: boot.maxConcurrency,
    maxTasks: () => provider.get().maxRendersPerWorkerPool,
    ...inspect,
  });
  const probePool = createSupervisedPool({
    name: 'probe',
    size: boot.maxProbeConcurrency,
    maxTasks: () => provider.get().maxProbesPerWorkerPool,
    ...inspect,
  });
  const pools = [renderPool, probePool];
  // The waiting room (AP_WAITING_ROOM): tickets in front of the render slots.
  const waitingRoom = boot.waitingRoom
    ? new WaitingRoomService({ semaphore, config: provider, now, ...inspect })
    : undefined;
  // The live view (`/debug/actors`, metrics listener only) and the recorder name every actor.
  const { liveView, track } = watchActors(recorder, [
    { name: 'semaphore', actor: semaphore },
    { name: 'probeLimiter', actor: probeLimiter },
    { name: 'readiness', actor: readiness },
    { name: 'pool:render', actor: renderPool.supervisor },
    { name: 'pool:probe', actor: probePool.supervisor },
    ...(waitingRoom ? [{ name: 'waitingRoom', actor: waitingRoom.room }] : []),
  ]);
  const tees = store ? new TeeService({ store, config: provider, ...inspect, track }) : undefined;
  // Cluster mode (AP_CLUSTER_REDIS_URL): render claims, membership and hand-off through Redis.
  const cluster = boot.clusterRedisUrl
    ? new Cluster({
        config: boot,
        onError: (err) => logger.warn({ err }, 'cluster: redis call failed; acting alone'),
        // Another node's purge: this node's store and hot cache drop the variant too.
        ...(store ? { onPurge: (key: string) => store.delete(key) } : {}),
      })
    : undefined;

  // A fatal failure is acted on once the proxy is assembled (see `onFatal` below).
  let raiseFatal!: (fatal: Fatal) => void;
  const fatal = new Promise<Fatal>((resolve) => {
    raiseFatal = resolve;
  });
  const system = await createSystem(
    [
      actorChild('semaphore', semaphore, (a) => publishTelemetry(a, SEMAPHORE_PREFIX)),
      actorChild('probeLimiter', probeLimiter, (a) => publishTelemetry(a, PROBE_LIMITER_PREFIX)),
      actorChild('readiness', readiness),
      poolsChild(pools),
      probesChild({
        limiter: probeLimiter,
        config: provider,
        pool: probePool,
        ffprobePath: ffprobe.path,
        capabilities,
        inspect,
      }),
      storeChild(store, tees),
      clusterChild(cluster),
      rendersChild({
        semaphore,
        config: provider,
        tees,
        ffmpegPath: ffmpeg.path,
        pool: renderPool,
        inspect,
      }),
    ],
    {
      logger,
      onSupervise: track,
      onFatal: (failure) => {
        if (failure.reason.type === 'error') recorder?.fault(failure.child, failure.reason.error);
        raiseFatal(failure);
      },
    },
  ).catch(async (error: unknown) => {
    await cluster?.close(); // its Redis connections were opened before the boot failed
    throw error;
  });
  const renders = system.get<RenderService>('renders');
  const probes = system.get<ProbeService>('probes');
  // Warming (POST /warm, issue #19): only with a store, which is what it fills.
  const warm = store
    ? new WarmService({
        renders,
        store,
        ...(tees ? { tees } : {}),
        config: provider,
        ...(cluster ? { claim: (key: string) => cluster.claimForWarm(key) } : {}),
      })
    : undefined;

  const metrics = new Metrics({
    ...(cluster ? { cluster: () => cluster.sample() } : {}),
    slots: () => semaphoreStats(semaphore, SCRAPE_SAMPLE_TIMEOUT_MS),
    rendersRunning: () => renders.running,
    backlogBytes: () => renders.backlogBytes,
    variantStore: () => store?.usage?.(),
    extra: async () => poolGauges(pools),
  });
  const detachLogs = [attachRenderLog(logger), boot.accessLog ? attachAccessLog(logger) : null];

  const turns = new TurnBudget();
  // Set when close() begins; read once per request, on entry.
  let stopping = false;
  const inFlight = new ResponsesInFlight();
  const ffmpegVersionInfo = ffmpegHealth(ffmpeg, capabilities);
  const inner = createHandler({
    ...inspect, // the delivery actors, like every other, go to the inspector and the live view
    track,
    stopping: () => stopping,
    turns,
    config: provider,
    version: VERSION,
    ffmpeg: () => ffmpegVersionInfo,
    capabilities,
    pools: () => poolHealth(pools),
    nowMs: now,
    ready: () => checkReady(semaphore, readiness, provider.get().readyQueueThreshold),
    probe: (source) => probes.probe(source),
    subscribe: async (request, id, onMessage) => {
      const outcome = await renders.subscribe(request, id, onMessage);
      cluster?.subscribed(request, outcome);
      return outcome;
    },
    unsubscribe: (coordinator, id) => renders.unsubscribe(coordinator, id),
    retryAfterS: () => retryAfter(semaphore),
    resolveRemote: (source, canonical, opts) =>
      resolveRemote(source, canonical, provider.get(), opts),
    ...(store ? { store } : {}),
    ...(cluster ? { cluster } : {}),
    ...(waitingRoom ? { waitingRoom: waitingRoom.endpoints() } : {}),
    ...(warm ? { warm } : {}),
  });

  // Responses in flight are counted so close() can let them finish (up to its drain bound).
  const handler = (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (!stopping) inFlight.track(res);
    return inner(req, res);
  };
  const metricsHandler = metricsRouter({
    metrics,
    routes: [liveView, ...(warm ? [warmStatusRoute(warm)] : []), ...(recorder ? [recorder] : [])],
    notFound: () => errorResponse({ type: 'not_found', scope: 'route' }),
  });

  const listeners = new Listeners({ handler, metricsHandler, turns });
  let closing: Promise<void> | undefined;
  const close = (opts: { drainMs?: number } = {}): Promise<void> => {
    closing ??= (async () => {
      stopping = true; // from here every new request answers 503 shutting_down
      liveView.close(); // ends its event streams, which would otherwise hold the listener open
      listeners.stopAccepting();
      await cluster?.drain(); // peers stop choosing this node before its renders are cancelled
      await inFlight.drain(opts.drainMs ?? CLOSE_DRAIN_MS);
      warm?.close(); // no new warm attempt; admitted ones end with their coordinators
      await system.stop();
      listeners.closeAll();
      for (const off of detachLogs) off?.();
      waitingRoom?.stop();
      metrics.close();
      inspection.close(); // last: the actors' final snapshots have been sent
      recorder?.close();
    })();
    return closing;
  };
  // A fatal failure closes the proxy (no drain, bounded), then the host decides; see fatal.ts.
  void fatal.then((failure) => closeOnFatal(failure, { close, onFatal: options.onFatal, logger }));

  return {
    handler,
    metricsHandler,
    async listen(opts = {}) {
      const c = provider.get();
      return listeners.listen(
        { host: opts.host ?? c.bind, port: opts.port ?? c.port },
        { host: opts.metricsHost ?? c.metricsBind, port: opts.metricsPort ?? c.metricsPort },
      );
    },
    close,
    actors: { semaphore, probeLimiter, readiness },
    renders,
    waitingRoom,
    probes,
    pools: { render: renderPool, probe: probePool },
    metrics,
    ffmpeg,
    ffprobe,
    capabilities,
    store,
    cluster,
    warm,
    recorder,
  };
}
