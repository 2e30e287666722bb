/**
 * `createAudioProxy(config)`: the whole system, assembled in the order its parts depend on each
 * other and stopped in reverse.
 *
 * Start order (each later part may use every earlier one):
 *  1. semaphore and probe limiter: coordinators release into them from their own stop paths,
 *     so they must outlive every coordinator;
 *  2. metrics and readiness: the first accepted connection may be a scrape or a `/ready`;
 *  3. worker pools: renders and probes run in them;
 *  4. the probe and render services (registries and coordinators);
 *  5. the listeners, last: every consumer exists before the first connection.
 *
 * Shutdown (`close()`) first turns the node away from new work: the listeners stop accepting and
 * every new request (`/health` included, on a kept-alive connection or an embedder's own server)
 * answers 503 `shutting_down`. Responses already in flight drain for up to `CLOSE_DRAIN_MS`.
 * Then the list runs backwards: coordinators cancel what is left (each answers only after ffmpeg
 * is dead and its slot released), pools drain and close, and the semaphore goes last.
 *
 * ## Invariants
 * - **The library never kills its host.** `listen()` rejects with a `ListenError`
 *   (`ERR_AP_LISTEN`, the cause attached) and leaves nothing bound; a fatal actor failure closes
 *   the proxy (no drain, bounded by `FATAL_STOP_BUDGET_MS`) and then calls the `onFatal` hook.
 *   Nothing here calls `process.exit`; the CLI's hook does.
 * - **`close()` is idempotent**: every call gets the same promise.
 *
 * ## Races
 * - *A request lands as close() begins*: it is either counted in flight (and drained) or
 *   answered 503; the flag is read once, on entry.
 *
 * ## Events
 * | Log (level) | Fields          | When                                                        |
 * |-------------|-----------------|-------------------------------------------------------------|
 * | error       | `child`,`reason`| a fatal failure closed the proxy and no `onFatal` was given |
 */

import diagnostics from 'node:diagnostics_channel';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Server as NetServer } from 'node:net';
import type { Logger } from 'pino';
import { type Actor, type AnyActorRef, createActor, fromPromise } from 'xstate';
import { call } from './actors/call.js';
import { createSystem, FATAL_STOP_BUDGET_MS, type Fatal } from './actors/system.js';
import { Cluster } from './cluster/cluster.js';
import { type Config, type ConfigProvider, staticConfig } from './config.js';
import type { RenderRequest } from './core/request.js';
import type { ResolvedSource } from './core/source.js';
import { createLiveView } from './debug/liveView.js';
import { type AcceptGate, gateConnections } from './http/acceptGate.js';
import { errorResponse } from './http/errors.js';
import { createHandler } from './http/handler.js';
import { TurnBudget } from './http/turns.js';
import { type InspectOption, inspectRedactions, openInspection } from './inspect.js';
import { probeLimiterMachine } from './machines/probeLimiter.js';
import type { SupervisorState, SupervisorTelemetry } from './machines/processSupervisor.js';
import { type ReadinessReply, readinessMachine } from './machines/readiness.js';
import { createBacklogBudget } from './machines/renderCoordinator.js';
import { semaphoreMachine } from './machines/semaphore.js';
import { type ProbeResult, ProbeService } from './services/probeService.js';
import { renderLogic } from './services/renderLogic.js';
import { RenderService } from './services/renderService.js';
import {
  retryAfter as semaphoreRetryAfter,
  stats as semaphoreStats,
} from './services/semaphoreClient.js';
import { PoolProcess, SupervisedPool } from './services/supervisedPool.js';
import {
  startProcessSupervisor,
  stopSupervisor,
  supervisorStats,
} from './services/supervisorClient.js';
import { TeeService } from './services/teeService.js';
import {
  join as waitingRoomJoin,
  leave as waitingRoomLeave,
  status as waitingRoomStatus,
} from './services/waitingRoomClient.js';
import { WaitingRoomService } from './services/waitingRoomService.js';
import { resolveRemote } from './sources/remote.js';
import { createVariantStore, type VariantStore } from './store/index.js';
import {
  PROBE_LIMITER_PREFIX,
  publishTelemetry,
  SEMAPHORE_PREFIX,
  WORKER_POOL_TRANSITION_CHANNEL,
  wantedOn,
} from './telemetry/channels.js';
import { attachAccessLog, attachRenderLog, createLogger } from './telemetry/logger.js';
import { Metrics } from './telemetry/metrics.js';
import { buildPeaksDecodeArgv, buildRenderArgv, FD_INPUT_PATH } from './workers/argv.js';
import { type ResolvedExecutable, resolveFfmpeg, resolveFfprobe } from './workers/ffmpegPath.js';
import { peaksFrameBudget } from './workers/peaks.js';
import { createWorkerPool, type WorkerPool } from './workers/pool.js';
import { buildProbeArgv, infoBody, parseProbe, probeVerdict } from './workers/probe.js';
import { runProbe } from './workers/renderClient.js';

/** Readiness reads the semaphore's depth with this deadline; a slow read counts as depth 0. */
export const READINESS_DEPTH_TIMEOUT_MS = 1_000;

export const VERSION = '0.1.0';

export { WORKER_POOL_TRANSITION_CHANNEL };

/** Every supervisor state, for the one-hot state gauge. */
const SUPERVISOR_STATES: readonly SupervisorState[] = [
  'notStarted',
  'starting',
  'running',
  'draining',
  'restarting',
  'failed',
  'stopping',
  'stopped',
];

/** At shutdown, how long running tasks get before their threads (and ffmpeg) are killed. */
export const POOL_STOP_DRAIN_MS = 10_000;

/**
 * Pending connections the kernel may queue for the public listener. Node's default (511) is
 * overrun by a burst of a few thousand clients: the overflow is reset instead of answered, where
 * the contract promises a 429. The kernel caps it at `net.core.somaxconn` (4096 on Debian 12).
 */
export const LISTEN_BACKLOG = 4_096;

/**
 * After `close()` begins, how long responses already in flight may go on before what is left is
 * cancelled. A 3-minute track streams at real time, so this cannot wait for every stream; 10 s
 * lets short renders and most HITs finish and, with the stop budgets after it, keeps the CLI's
 * whole shutdown under its 25 s grace (and an orchestrator's usual 30 s).
 */
export const CLOSE_DRAIN_MS = 10_000;

/** `listen()` could not bind: `code` is `ERR_AP_LISTEN`, `cause` the system error (EADDRINUSE…). */
export class ListenError extends Error {
  override readonly name = 'ListenError';
  readonly code = 'ERR_AP_LISTEN';
  readonly address: string;
  readonly port: number;
  /** Which listener failed. */
  readonly listener: 'public' | 'metrics';
  constructor(listener: 'public' | 'metrics', address: string, port: number, cause: unknown) {
    const why = (cause as NodeJS.ErrnoException | undefined)?.code ?? String(cause);
    const where = address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
    super(`cannot listen on ${where} (${listener} listener): ${why}`, { cause });
    this.listener = listener;
    this.address = address;
    this.port = port;
  }
}

/** What a fatal failure hands the host: which actor, and how it went. */
export type ProxyFatal = Fatal;
export interface AudioProxyOptions {
  /** A loaded config, or a provider (tests change limits through a mutable one). */
  readonly config: Config | ConfigProvider;
  /** @default a pino logger at the config's level */
  readonly logger?: Logger;
  /** Wall clock in ms (URL expiry). @default Date.now */
  readonly now?: () => number;
  /**
   * Streams every actor to a Stately inspector: `{ url }` of a relay (`audio-proxy inspect`,
   * docs/inspect.md), or a function/observer given XState's raw inspection events.
   * @default none (the actors are created without an observer)
   */
  readonly inspect?: InspectOption;
  /**
   * Called once after an internal failure (a state chart threw, a singleton actor ended) has
   * closed the proxy (bounded by `FATAL_STOP_BUDGET_MS`). The library never exits the process:
   * the CLI exits 70 from here; an embedding app may restart the proxy, alert, or exit.
   * @default none: the failure is logged, the proxy is closed, the host keeps running
   */
  readonly onFatal?: (fatal: ProxyFatal) => void | Promise<void>;
}

export interface AudioProxy {
  /** The public listener's handler, for embedding in any node:http-compatible server. */
  readonly handler: (req: IncomingMessage, res: ServerResponse) => Promise<void>;
  /** The metrics listener's handler (`/metrics`, and the `/debug/actors` live view). */
  readonly metricsHandler: (req: IncomingMessage, res: ServerResponse) => Promise<void>;
  /**
   * Starts both listeners; resolves with their bound addresses. Rejects with a `ListenError`
   * (`code: 'ERR_AP_LISTEN'`, e.g. cause EADDRINUSE) and leaves nothing bound.
   */
  listen(options?: {
    /** @default the config's `bind` (`AP_BIND`), else every interface */
    host?: string;
    /** @default the config's `port` */
    port?: number;
    metricsHost?: string;
    metricsPort?: number;
  }): Promise<{
    url: string;
    metricsUrl: string;
  }>;
  /**
   * Stops accepting and answers every new request 503 `shutting_down`; lets responses in
   * flight finish for up to `drainMs`; then cancels what is left, drains pools and resolves
   * when nothing is left running. Idempotent (later calls get the first call's promise).
   */
  close(options?: {
    /** @default CLOSE_DRAIN_MS */
    drainMs?: number;
  }): Promise<void>;
  /** The live actors, for inspection and tests. */
  readonly actors: {
    readonly semaphore: Actor<typeof semaphoreMachine>;
    readonly probeLimiter: Actor<typeof probeLimiterMachine>;
    readonly readiness: Actor<typeof readinessMachine>;
  };
  readonly renders: RenderService;
  /** Present when AP_WAITING_ROOM is on. */
  readonly waitingRoom: WaitingRoomService | undefined;
  readonly probes: ProbeService;
  readonly pools: { readonly render: SupervisedPool; readonly probe: SupervisedPool };
  readonly metrics: Metrics;
  readonly ffmpeg: ResolvedExecutable;
  readonly ffprobe: ResolvedExecutable;
  /** The variant store, or undefined when AP_VARIANT_STORE is unset. */
  readonly store: VariantStore | undefined;
  /** Cluster mode, or undefined when AP_CLUSTER_REDIS_URL is unset. */
  readonly cluster: Cluster | undefined;
}

function isProvider(c: Config | ConfigProvider): c is ConfigProvider {
  return typeof (c as ConfigProvider).get === 'function';
}

export async function createAudioProxy(options: AudioProxyOptions): Promise<AudioProxy> {
  const provider = isProvider(options.config) ? options.config : staticConfig(options.config);
  const boot = provider.get();
  const logger = options.logger ?? createLogger(boot.logLevel);
  const now = options.now ?? Date.now;
  const ffmpeg = resolveFfmpeg({
    env: { PATH: process.env.PATH, AP_FFMPEG_PATH: boot.ffmpegPath },
  });
  const ffprobe = resolveFfprobe({
    env: { PATH: process.env.PATH, AP_FFPROBE_PATH: boot.ffprobePath },
  });

  // 0. the variant store, proved usable (file: staging swept + write probe; s3: PUT+DELETE)
  const store = await createVariantStore(boot);
  // Inspection (opt-in): connected before the first actor exists, so none goes unseen.
  const inspection = await openInspection(options.inspect, inspectRedactions(boot));
  const inspect = inspection.observer ? { inspect: inspection.observer } : {};
  // The live view follows each tee once it exists (it is created with the HTTP side, below).
  let trackTee: (actor: AnyActorRef, name: string) => void = () => {};
  const tees = store
    ? new TeeService({ store, config: provider, ...inspect, track: (a, n) => trackTee(a, n) })
    : undefined;

  // 1. slots
  const semaphore = createActor(semaphoreMachine, {
    input: {
      limits: () => {
        const c = provider.get();
        return {
          capacity: c.maxConcurrency,
          queueSize: c.queueSize,
          renderTimeoutS: c.renderTimeoutS,
        };
      },
      // Built only when a diagnostics channel listens (metrics, the live view, an embedder).
      telemetry: wantedOn(SEMAPHORE_PREFIX),
    },
    ...inspect,
  });
  const probeLimiter = createActor(probeLimiterMachine, {
    input: { limits: () => ({ capacity: provider.get().maxProbeConcurrency }) },
    ...inspect,
  });
  const readiness = createActor(readinessMachine, inspect);

  // 3. pools (sized to the admission capacity: the semaphore is the only queue), each owned by
  // a process supervisor that starts it lazily, recycles it after N tasks and replaces it when
  // it stops answering health probes.
  const supervisedPool = (name: 'render' | 'probe', size: number, maxTasks: () => number) => {
    const process = new PoolProcess(() => createWorkerPool({ name, size }));
    const supervisor = startProcessSupervisor({ process, maxTasks }, inspect);
    // Every supervisor transition goes out on the diagnostics channel, labelled with its pool.
    const transitions = diagnostics.channel(WORKER_POOL_TRANSITION_CHANNEL);
    supervisor.on('telemetry', (event: SupervisorTelemetry) => {
      if (transitions.hasSubscribers) transitions.publish({ pool: name, ...event });
    });
    return new SupervisedPool({ name, size, supervisor, process });
  };
  const renderPool = supervisedPool(
    'render',
    boot.maxConcurrency,
    () => provider.get().maxRendersPerWorkerPool,
  );
  const probePool = supervisedPool(
    'probe',
    boot.maxProbeConcurrency,
    () => provider.get().maxProbesPerWorkerPool,
  );

  // 4. services
  // Coordinators are supervised by the system once it exists (a chart that throws is a bug).
  let supervise: (actor: AnyActorRef, name: string) => void = () => {};
  const renders = new RenderService({
    supervise: (a, n) => supervise(a, n),
    semaphore,
    config: provider,
    renderLogic,
    ...(tees ? { tees } : {}),
    ...inspect,
    backlogBudget: createBacklogBudget(() => provider.get().backlogBudgetBytes),
    renderInput: (request: RenderRequest) =>
      renderInputFor(request, provider.get(), ffmpeg.path, renderPool),
  });
  const probeLogic = fromPromise<ProbeResult, ResolvedSource>(async ({ input, signal }) => {
    const c = provider.get();
    // The proxy opens the source; ffprobe reads the descriptor (never a path or URL).
    const opened = input.open
      ? await input.open(signal)
      : ({ ok: false, refusal: 'not_found', detail: 'nothing to open' } as const);
    if (!opened.ok) {
      // Over AP_MAX_SRC_BYTES while reading is a verdict about the bytes, shared like one.
      if (opened.refusal === 'source_too_large') return { ok: false, refusal: 'source_too_large' };
      throw { class: opened.refusal, detail: opened.detail ?? '' };
    }
    let outcome: Awaited<ReturnType<typeof runProbe>>;
    try {
      outcome = await runProbe(
        probePool,
        {
          executable: ffprobe.path,
          argv: buildProbeArgv(FD_INPUT),
          timeoutMs: c.probeTimeoutS * 1000,
          nice: c.ffmpegNice,
          inputFd: opened.lease.fd,
        },
        { signal },
      );
    } finally {
      opened.lease.release(); // runProbe settles only once ffprobe is reaped
    }
    if (outcome.type !== 'ok') {
      // ffprobe refusing the bytes is a verdict about the source (415), shared like a result.
      // Its one input is a regular file the proxy opened, so an ffprobe that exits with a
      // status of its own (not killed, not timed out) failed to read those bytes as media,
      // whatever words its stderr used (crafted Ogg pages, truncated FLAC, WAVs with no layout).
      if (outcome.class === 'undecodable' || exitedOnTheBytes(outcome)) {
        return { ok: false, refusal: 'undecodable_source' };
      }
      const cls =
        outcome.class === 'timeout'
          ? 'probe_timeout'
          : outcome.class === 'not_found'
            ? 'not_found'
            : 'probe_failed';
      throw { class: cls, detail: outcome.stderrTail };
    }
    const parsed = parseProbe(outcome.stdout);
    const verdict = probeVerdict(parsed, { requireDuration: false });
    if (!verdict.ok) {
      if (verdict.reason === 'render_failed')
        throw { class: 'probe_failed', detail: 'unparseable probe output' };
      return { ok: false, refusal: verdict.reason };
    }
    const media = verdict.info;
    return {
      ok: true,
      info: infoBody(parsed) as Record<string, unknown>,
      media: {
        ...(media.sampleRate !== undefined ? { sampleRate: media.sampleRate } : {}),
        ...(media.channels !== undefined ? { channels: media.channels } : {}),
        ...(media.bitDepth !== undefined ? { bitDepth: media.bitDepth } : {}),
        ...(media.duration !== undefined ? { duration: media.duration } : {}),
      },
    };
  });
  const probes = new ProbeService({
    limiter: probeLimiter,
    config: provider,
    probeLogic,
    supervise: (a, n) => supervise(a, n),
    ...inspect,
  });

  // Cluster mode (AP_CLUSTER_REDIS_URL): render claims, membership and hand-off through Redis.
  const cluster = boot.clusterRedisUrl
    ? new Cluster({
        config: boot,
        onError: (err) => logger.warn({ err }, 'cluster: redis call failed; acting alone'),
      })
    : undefined;

  const metrics = new Metrics({
    ...(cluster ? { cluster: () => cluster.sample() } : {}),
    slots: () => semaphoreStats(semaphore, 1_000),
    rendersRunning: () => renders.running,
    backlogBytes: () => renders.backlogBytes,
    extra: async () =>
      [renderPool, probePool].flatMap((p) => {
        const s = supervisorStats(p.supervisor);
        const labels = { pool: p.name };
        return [
          {
            name: 'audio_proxy_worker_pool_restarts',
            help: 'Worker pool restarts since boot (recycles and replacements).',
            value: s.restarts,
            labels,
          },
          {
            name: 'audio_proxy_worker_pool_generation',
            help: 'Current worker pool incarnation.',
            value: s.generation,
            labels,
          },
          {
            name: 'audio_proxy_worker_pool_tasks_since_start',
            help: 'Tasks the current worker pool has been given.',
            value: s.tasksSinceStart,
            labels,
          },
          {
            name: 'audio_proxy_worker_pool_healthy',
            help: '1 unless the supervisor is in failed.',
            value: s.healthy ? 1 : 0,
            labels,
          },
          ...(['max_tasks', 'unhealthy', 'manual'] as const).map((reason) => ({
            name: 'audio_proxy_worker_pool_last_restart_reason',
            help: 'Why the pool last restarted (1 for the last reason; all 0 before any restart).',
            value: s.lastRestartReason === reason ? 1 : 0,
            labels: { ...labels, reason },
          })),
          ...SUPERVISOR_STATES.map((state) => ({
            name: 'audio_proxy_worker_pool_state',
            help: 'The supervisor state (1 for the current one).',
            value: s.state === state ? 1 : 0,
            labels: { ...labels, state },
          })),
        ];
      }),
  });
  const detachRenderLog = attachRenderLog(logger);
  const detachAccessLog = boot.accessLog ? attachAccessLog(logger) : () => {};
  const detachLog = () => {
    detachRenderLog();
    detachAccessLog();
  };

  const ready = async (): Promise<ReadinessReply> => {
    const threshold = provider.get().readyQueueThreshold;
    let queued = 0;
    try {
      queued = (await semaphoreStats(semaphore, READINESS_DEPTH_TIMEOUT_MS)).queued;
    } catch {
      queued = 0; // every uncertainty resolves to ready
    }
    try {
      return await call<ReadinessReply>(
        readiness,
        { type: 'check', queued, threshold },
        { timeout: 2_000 },
      );
    } catch {
      return { ready: true, queued: 0, threshold };
    }
  };

  const ffmpegVersionInfo = { path: ffmpeg.path, source: ffmpeg.source };
  const poolHealth = () =>
    Object.fromEntries(
      [renderPool, probePool].map((p) => {
        const s = supervisorStats(p.supervisor);
        return [
          p.name,
          {
            state: s.state,
            healthy: s.healthy,
            restarts: s.restarts,
            lastRestartReason: s.lastRestartReason,
          },
        ];
      }),
    );
  // The waiting room (AP_WAITING_ROOM): tickets in front of the render slots.
  const waitingRoom = boot.waitingRoom
    ? new WaitingRoomService({ semaphore, config: provider, now, ...inspect })
    : undefined;

  const turns = new TurnBudget();
  // Set when close() begins; read once per request, on entry.
  let stopping = false;
  const inFlight = new Set<ServerResponse>();
  let onDrained: (() => void) | undefined;
  const inner = createHandler({
    ...inspect, // the delivery actors, like every other, go to the inspector and the live view
    track: (actor, name) => liveView.track(actor, name),
    stopping: () => stopping,
    turns,
    config: provider,
    version: VERSION,
    ffmpeg: () => ffmpegVersionInfo,
    pools: poolHealth,
    nowMs: now,
    ready,
    probe: (source) => probes.probe(source),
    subscribe: async (request, id, onMessage) => {
      const outcome = await renders.subscribe(request, id, onMessage);
      cluster?.subscribed(request, outcome);
      return outcome;
    },
    unsubscribe: (coordinator, id) => renders.unsubscribe(coordinator, id),
    retryAfterS: () => semaphoreRetryAfter(semaphore),
    resolveRemote: (source, canonical, opts) =>
      resolveRemote(source, canonical, provider.get(), opts),
    ...(store ? { store } : {}),
    ...(cluster ? { cluster } : {}),
    ...(waitingRoom
      ? {
          waitingRoom: {
            join: (session: string) => waitingRoomJoin(waitingRoom.room, session),
            status: (session: string) => waitingRoomStatus(waitingRoom.room, session),
            leave: (session: string) => waitingRoomLeave(waitingRoom.room, session),
            claim: (session: string) => waitingRoom.claim(session),
            runEnded: (session: string, cancelled: boolean) =>
              waitingRoom.runEnded(session, cancelled),
          },
        }
      : {}),
  });

  // Responses in flight are counted so close() can let them finish (up to its drain bound).
  const handler = (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (!stopping) {
      inFlight.add(res);
      res.once('close', () => {
        inFlight.delete(res);
        if (inFlight.size === 0) onDrained?.();
      });
    }
    return inner(req, res);
  };

  // The live view of the actors (`/debug/actors`), on the metrics listener only.
  const liveView = createLiveView({
    actors: [
      { name: 'semaphore', actor: semaphore },
      { name: 'probeLimiter', actor: probeLimiter },
      { name: 'readiness', actor: readiness },
      { name: 'pool:render', actor: renderPool.supervisor },
      { name: 'pool:probe', actor: probePool.supervisor },
      ...(waitingRoom ? [{ name: 'waitingRoom', actor: waitingRoom.room }] : []),
    ],
  });

  const metricsHandler = async (req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '/').split('?', 1)[0];
    if (liveView.handle(req, res, path)) return;
    if ((req.method === 'GET' || req.method === 'HEAD') && path === '/metrics') {
      const { contentType, body } = await metrics.expose();
      res.writeHead(200, { 'content-type': contentType, 'cache-control': 'no-store' });
      res.end(req.method === 'HEAD' ? undefined : body);
      return;
    }
    const r = errorResponse({ type: 'not_found', scope: 'route' });
    res.writeHead(r.status, r.headers);
    res.end(r.body);
  };

  // A fatal failure closes the proxy, then tells the host (see `onFatal`); never process.exit.
  let fatalDuringStart: Fatal | undefined;
  let runFatal: ((fatal: Fatal) => void) | undefined;
  let publicServer: Server | null = null;
  let gate: AcceptGate | null = null;
  let metricsServer: Server | null = null;
  const unpublish: Array<() => void> = [];

  const system = await createSystem(
    [
      {
        name: 'semaphore',
        start: () => {
          semaphore.start();
          unpublish.push(publishTelemetry(semaphore, SEMAPHORE_PREFIX));
          return semaphore;
        },
        stop: () => {
          semaphore.stop();
        },
        actor: () => semaphore,
      },
      {
        name: 'probeLimiter',
        start: () => {
          probeLimiter.start();
          unpublish.push(publishTelemetry(probeLimiter, PROBE_LIMITER_PREFIX));
          return probeLimiter;
        },
        stop: () => {
          probeLimiter.stop();
        },
        actor: () => probeLimiter,
      },
      {
        name: 'readiness',
        start: () => readiness.start(),
        stop: () => {
          readiness.stop();
        },
        actor: () => readiness,
      },
      {
        // Supervisors start their pools lazily; stopping drains up to a bound, then kills.
        name: 'pools',
        // Warmed at boot with one echo each, so the first request does not pay for the threads'
        // start (and a probe deadline is never spent waiting for a pool to come up).
        start: async (): Promise<SupervisedPool[]> => {
          await Promise.all(
            [renderPool, probePool].map((p) => p.run({ kind: 'echo', value: 'warm' })),
          );
          return [renderPool, probePool];
        },
        stop: async (pools: SupervisedPool[]) => {
          await Promise.all(
            pools.map((p) => stopSupervisor(p.supervisor, { drainTimeoutMs: POOL_STOP_DRAIN_MS })),
          );
          for (const p of pools) p.supervisor.stop();
        },
        stopTimeoutMs: POOL_STOP_DRAIN_MS + 10_000,
      },
      {
        // Before the renders, so it stops after them: tees settle, then the store closes.
        name: 'store',
        start: () => store,
        stop: async () => {
          await tees?.drain();
          await store?.close();
        },
      },
      {
        // Before the renders, so it stops after them: their registry slots are released first.
        name: 'cluster',
        start: async () => {
          await cluster?.start();
          return cluster;
        },
        stop: () => cluster?.close(),
      },
      {
        name: 'renders',
        start: () => renders,
        stop: () => renders.shutdown(),
        stopTimeoutMs: 20_000,
      },
    ],
    { logger, onFatal: (fatal) => (runFatal ? runFatal(fatal) : (fatalDuringStart = fatal)) },
  ).catch(async (error: unknown) => {
    await cluster?.close(); // its Redis connections were opened before the boot failed
    throw error;
  });
  trackTee = (actor, name) => liveView.track(actor, name);
  supervise = (actor, name) => {
    liveView.track(actor, name);
    void system.supervise(actor, name);
  };

  let closing: Promise<void> | undefined;
  const close = (opts: { drainMs?: number } = {}): Promise<void> => {
    closing ??= (async () => {
      stopping = true; // from here every new request answers 503 shutting_down
      liveView.close(); // ends its event streams, which would otherwise hold the listener open
      const servers = [publicServer, metricsServer].filter((s): s is Server => s !== null);
      gate?.listener.close();
      gate?.close();
      for (const s of servers) {
        s.close();
        s.closeIdleConnections();
      }
      await cluster?.drain(); // peers stop choosing this node before its renders are cancelled
      await drainInFlight(opts.drainMs ?? CLOSE_DRAIN_MS);
      await system.stop();
      for (const s of servers) s.closeAllConnections();
      for (const off of unpublish.splice(0)) off();
      detachLog();
      waitingRoom?.stop();
      metrics.close();
      inspection.close(); // last: the actors' final snapshots have been sent
    })();
    return closing;
  };
  /** Resolves when no response is in flight, or after `ms`. */
  const drainInFlight = (ms: number): Promise<void> =>
    inFlight.size === 0 || ms <= 0
      ? Promise.resolve()
      : new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, ms);
          onDrained = () => {
            clearTimeout(timer);
            resolve();
          };
        });

  runFatal = (fatal) => {
    // The system has logged it. Close without draining (a broken singleton must not keep
    // serving), bounded, then hand the decision to the host.
    let budget: ReturnType<typeof setTimeout> | undefined;
    void Promise.race([
      close({ drainMs: 0 }).catch(() => {}),
      new Promise<void>((resolve) => {
        budget = setTimeout(resolve, FATAL_STOP_BUDGET_MS);
      }),
    ]).then(async () => {
      clearTimeout(budget);
      if (options.onFatal) {
        // A throwing hook must not become an unhandled rejection (that, too, ends a host).
        await Promise.resolve()
          .then(() => options.onFatal!(fatal))
          .catch((err: unknown) => logger.error({ err }, 'the onFatal hook threw'));
      } else {
        logger.error(
          { child: fatal.child, reason: fatal.reason.type },
          'audio-proxy closed after an internal failure; no onFatal hook was given, the host process is left running',
        );
      }
    });
  };
  if (fatalDuringStart) runFatal(fatalDuringStart);

  return {
    handler,
    metricsHandler,
    async listen(opts = {}) {
      const c = provider.get();
      publicServer = createServer((req, res) => void handler(req, res));
      metricsServer = createServer((req, res) => void metricsHandler(req, res));
      // The public port is accepted by the gate, which feeds the HTTP server turn by turn.
      gate = gateConnections(publicServer, turns);
      const publicAt = { host: opts.host ?? c.bind, port: opts.port ?? c.port };
      const metricsAt = {
        host: opts.metricsHost ?? c.metricsBind,
        port: opts.metricsPort ?? c.metricsPort,
      };
      try {
        await bind(gate.listener, 'public', { ...publicAt, backlog: LISTEN_BACKLOG });
        await bind(metricsServer, 'metrics', metricsAt);
      } catch (error) {
        // Nothing stays bound and nothing is left to close: a later listen() may try again.
        gate.listener.close();
        gate.close();
        metricsServer.close();
        [publicServer, metricsServer, gate] = [null, null, null];
        throw error;
      }
      // The HTTP server never listens itself; its 'listening' starts the connection tracking
      // that header/request timeouts and closeIdleConnections/closeAllConnections rely on.
      publicServer.emit('listening');
      const a = gate.listener.address() as AddressInfo;
      const m = metricsServer.address() as AddressInfo;
      const host = (addr: AddressInfo) =>
        addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
      return { url: `http://${host(a)}:${a.port}`, metricsUrl: `http://${host(m)}:${m.port}` };
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
    store,
    cluster,
  };
}

/** `server.listen(at)`, rejecting with a `ListenError` instead of emitting an unhandled 'error'. */
function bind(
  server: NetServer,
  listener: 'public' | 'metrics',
  at: { host: string | undefined; port: number; backlog?: number },
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onError = (error: Error) =>
      reject(new ListenError(listener, at.host ?? '::', at.port, error));
    server.once('error', onError);
    server.listen(at, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

/** ffprobe ended by itself with a failure status: its verdict on the bytes it was handed. */
function exitedOnTheBytes(outcome: { class: string; exitStatus: number | null }): boolean {
  return outcome.class === 'render_failed' && outcome.exitStatus !== null && outcome.exitStatus > 0;
}

/** What the Render machine needs for one request: the executable, argv and deadline. */
function renderInputFor(
  request: RenderRequest,
  config: Config,
  ffmpegPath: string,
  pool: WorkerPool,
) {
  const { options, source, media } = request;
  // ffmpeg reads the descriptor the proxy opens at submission, never `source.input`'s path/URL.
  const input = { ...FD_INPUT, ...media, maxDurationS: config.maxDurationS };
  const open = source.open;
  if (open === undefined) throw new TypeError('renderInputFor: the source has no opener');
  // What the live view shows as the input: the argv only names the descriptor.
  const label = source.canonical;
  const spec = {
    executable: ffmpegPath,
    timeoutMs: config.renderTimeoutS * 1000,
    nice: config.ffmpegNice,
    openInput: open,
  };
  if (options.format !== 'peaks') {
    return { spec: { ...spec, argv: buildRenderArgv(options, input) }, pool, source: label };
  }
  // Peaks: ffmpeg decodes to PCM at the source's rate; the worker reduces it to one chunk.
  const sampleRate = media?.sampleRate ?? PEAKS_FALLBACK_RATE_HZ;
  const channels = options.channels ?? 1;
  return {
    spec: {
      ...spec,
      argv: buildPeaksDecodeArgv(options, input, { sampleRate, channels }),
      peaks: {
        channels,
        pts: options.pts ?? 800,
        totalFrames: peaksFrameBudget(media?.duration ?? 0, sampleRate, options.trim),
        sampleRate,
        format: options.peaksFormat ?? 'json',
      },
    },
    pool,
    source: label,
  };
}

/** What every ffmpeg/ffprobe run reads: the source descriptor the child inherits as fd 3. */
const FD_INPUT = { url: FD_INPUT_PATH, kind: 'local' } as const;

/** Peaks of a source whose probe named no rate are decoded at this one. */
const PEAKS_FALLBACK_RATE_HZ = 44_100;
