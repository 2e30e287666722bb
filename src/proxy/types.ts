/**
 * The public face of `createAudioProxy` (re-exported by `proxy.ts` and the package index): its
 * options, the `AudioProxy` it resolves with, and the drain bound `close()` defaults to.
 * Declarations only; the assembly is `proxy.ts`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { Actor } from 'xstate';
import type { Fatal } from '../actors/system.js';
import type { Cluster } from '../cluster/cluster.js';
import type { Config, ConfigProvider } from '../config/index.js';
import type { InspectOption } from '../inspect.js';
import type { probeLimiterMachine } from '../machines/probeLimiter.js';
import type { readinessMachine } from '../machines/readiness.js';
import type { semaphoreMachine } from '../machines/semaphore.js';
import type { ProbeService } from '../services/probeService.js';
import type { RenderService } from '../services/renderService.js';
import type { SupervisedPool } from '../services/supervisedPool.js';
import type { WaitingRoomService } from '../services/waitingRoomService.js';
import type { VariantStore } from '../store/index.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { EncoderCapabilities } from '../workers/capabilities.js';
import type { ResolvedExecutable } from '../workers/ffmpegPath.js';

/**
 * After `close()` begins, how long responses already in flight may go on before what is left is
 * cancelled. A 3-minute track streams at real time, so this cannot wait for every stream; 10 s
 * lets short renders and most HITs finish and, with the stop budgets after it, keeps the CLI's
 * whole shutdown under its 25 s grace (and an orchestrator's usual 30 s).
 */
export const CLOSE_DRAIN_MS = 10_000;

/** What a fatal failure hands the host: which actor, and how it went. */
export type ProxyFatal = Fatal;
export interface AudioProxyOptions {
  /** A loaded config, or a provider (tests change limits through a mutable one). */
  readonly config: Config | ConfigProvider;
  /** @default a pino logger at the config's level, JSON lines on stdout (pretty only when the
   *  config's `logFormat` is `pretty`; `auto` is JSON here) */
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
  /** What this ffmpeg can do, read at boot: the options it cannot honour answer 501. */
  readonly capabilities: EncoderCapabilities;
  /** The variant store, or undefined when AP_VARIANT_STORE is unset. */
  readonly store: VariantStore | undefined;
  /** Cluster mode, or undefined when AP_CLUSTER_REDIS_URL is unset. */
  readonly cluster: Cluster | undefined;
}
