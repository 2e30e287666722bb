/**
 * The standard process and runtime metrics (prom-client's default set: `process_cpu_seconds_total`,
 * `process_resident_memory_bytes`, `process_open_fds`, `nodejs_eventloop_lag_seconds`,
 * `nodejs_heap_size_used_bytes`, `nodejs_gc_duration_seconds`, …) on one proxy's own registry,
 * with the function that stops them.
 *
 * ## Invariants
 * - **On the registry given, never the global one**, so two proxies in one process do not
 *   collide (prom-client refuses a second registration of a name in one registry).
 * - **Stopping leaves nothing running.** Most of the set is read at scrape time and holds
 *   nothing, but two members start samplers when they are created: an event-loop delay monitor
 *   (`perf_hooks.monitorEventLoopDelay`) and a `PerformanceObserver` on
 *   garbage collections. prom-client keeps no handle on either and has no way to stop them
 *   (prometheus/client_js#494, #500), so every proxy a process ever made would keep both running.
 *   `collectProcessMetrics` therefore watches those two `perf_hooks` constructors for the length
 *   of prom-client's call (it is synchronous: nothing else runs meanwhile, and the originals are
 *   back before it returns), keeps what they made, and the stop function disables the monitor
 *   and disconnects the observer. It is idempotent.
 * - **The delay monitor samples every `LAG_RESOLUTION_MS` (100 ms), not prom-client's 10 ms.**
 *   Each sample is a timer wakeup of the main thread: at 10 ms an idle proxy woke 100 times a
 *   second (~6 ms of CPU per second, measured with `/proc/<pid>/task/<tid>/status`), and since the
 *   cost follows wall time, a render slowed by a busy machine paid more of it: the MISS CPU ratio
 *   of issue #17 moved with load partly for this reason. At 100 ms the lag percentiles still see
 *   any task long enough to matter to a listener (a sample falls due inside every 100 ms), with a
 *   tenth of the wakeups.
 * - **A prom-client that changes how it samples is noticed**: `test/telemetry/processMetrics.test.ts`
 *   checks that exactly one monitor and one observer were made and that the stop ends both.
 */
import perfHooks, { type IntervalHistogram } from 'node:perf_hooks';
import { collectDefaultMetrics, type Registry } from 'prom-client';

/** What `collectProcessMetrics` returns: the samplers the default set started, and their stop. */
export interface ProcessMetrics {
  readonly monitors: readonly IntervalHistogram[];
  readonly observers: readonly perfHooks.PerformanceObserver[];
  /** Disables the monitors and disconnects the observers; idempotent. */
  stop(): void;
}

/** The `perf_hooks` members prom-client calls, as the module object it reads them from. */
interface Hooks {
  monitorEventLoopDelay: typeof perfHooks.monitorEventLoopDelay;
  PerformanceObserver: typeof perfHooks.PerformanceObserver;
}

/** How often the event-loop delay monitor samples, in ms (prom-client's default is 10). */
export const LAG_RESOLUTION_MS = 100;

/** Registers the default set on `registry` and returns how to stop its samplers. */
export function collectProcessMetrics(registry: Registry): ProcessMetrics {
  const monitors: IntervalHistogram[] = [];
  const observers: perfHooks.PerformanceObserver[] = [];
  const hooks: Hooks = perfHooks;
  const { monitorEventLoopDelay, PerformanceObserver } = hooks;
  hooks.monitorEventLoopDelay = (options) => {
    const monitor = monitorEventLoopDelay(options);
    monitors.push(monitor);
    return monitor;
  };
  hooks.PerformanceObserver = class extends PerformanceObserver {
    constructor(callback: ConstructorParameters<typeof PerformanceObserver>[0]) {
      super(callback);
      observers.push(this);
    }
  };
  try {
    collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: LAG_RESOLUTION_MS });
  } finally {
    hooks.monitorEventLoopDelay = monitorEventLoopDelay;
    hooks.PerformanceObserver = PerformanceObserver;
  }
  let stopped = false;
  return {
    monitors,
    observers,
    stop() {
      if (stopped) return;
      stopped = true;
      for (const monitor of monitors) monitor.disable();
      for (const observer of observers) observer.disconnect();
    },
  };
}
