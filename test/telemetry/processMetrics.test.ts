// The standard process and runtime metrics (#16 item 4): prom-client's default set on a
// registry of our own (two in one process do not collide), under their standard names; the two
// samplers prom-client starts for it (an event-loop delay monitor, a GC observer) are caught, so
// `stop` ends them; `perf_hooks` is left as it was found.
import perfHooks from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import {
  collectProcessMetrics,
  LAG_RESOLUTION_MS,
  type ProcessMetrics,
} from '../../src/telemetry/processMetrics.js';

const STANDARD = [
  ['process_cpu_seconds_total', 'counter'],
  ['process_start_time_seconds', 'gauge'],
  ['process_resident_memory_bytes', 'gauge'],
  ['nodejs_eventloop_lag_seconds', 'gauge'],
  ['nodejs_eventloop_lag_p99_seconds', 'gauge'],
  ['nodejs_heap_size_used_bytes', 'gauge'],
  ['nodejs_active_handles_total', 'gauge'],
  ['nodejs_version_info', 'gauge'],
  ['nodejs_gc_duration_seconds', 'histogram'],
] as const;

const made: ProcessMetrics[] = [];
afterEach(() => {
  for (const m of made.splice(0)) m.stop();
});
function collect(registry = new Registry()) {
  const m = collectProcessMetrics(registry);
  made.push(m);
  return { registry, m };
}

/** A full collection, on demand (V8's `gc`, reached without `--expose-gc` on the command line). */
function forceGc(): void {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}

async function gcCount(registry: Registry): Promise<number> {
  const json = await registry.getSingleMetric('nodejs_gc_duration_seconds')!.get();
  const values = json.values as { value: number; metricName?: string }[];
  return values
    .filter((v) => v.metricName === 'nodejs_gc_duration_seconds_count')
    .reduce((sum, v) => sum + v.value, 0);
}

describe('collectProcessMetrics', () => {
  it('registers the standard names on the registry given, never the global one', async () => {
    const { registry } = collect();
    const text = await registry.metrics();
    for (const [name, type] of STANDARD) expect(text).toContain(`# TYPE ${name} ${type}\n`);
    expect(text).toMatch(/^process_cpu_seconds_total \d/m);
    // a second proxy's registry in the same process does not collide
    expect(() => collect()).not.toThrow();
    const { register } = await import('prom-client');
    expect(register.getSingleMetric('process_cpu_seconds_total')).toBeUndefined();
  });

  it('catches the one monitor and one observer it starts, and leaves perf_hooks as it was', () => {
    const { monitorEventLoopDelay, PerformanceObserver } = perfHooks;
    const { m } = collect();
    expect(m.monitors).toHaveLength(1);
    expect(m.observers).toHaveLength(1);
    expect(m.observers[0]).toBeInstanceOf(PerformanceObserver);
    expect(perfHooks.monitorEventLoopDelay).toBe(monitorEventLoopDelay);
    expect(perfHooks.PerformanceObserver).toBe(PerformanceObserver);
  });

  it('the delay monitor samples every LAG_RESOLUTION_MS, not every 10 ms (an idle proxy stays asleep)', async () => {
    const { m } = collect();
    const monitor = m.monitors[0]!;
    monitor.reset();
    // Ten periods, so a busy CI machine's late timers cannot push the count under the floor.
    await new Promise((resolve) => setTimeout(resolve, 10 * LAG_RESOLUTION_MS));
    // at prom-client's own 10 ms this would be ~100 samples
    expect(monitor.count).toBeGreaterThanOrEqual(5);
    expect(monitor.count).toBeLessThanOrEqual(11);
    m.stop();
  });

  it('stop disables the monitor and disconnects the GC observer; twice is harmless', async () => {
    const kept = collect();
    const stopped = collect();
    stopped.m.stop();
    stopped.m.stop();
    expect(stopped.m.monitors[0]!.disable()).toBe(false); // already disabled
    expect(kept.m.monitors[0]!.disable()).toBe(true); // was running (stop re-disables: harmless)
    const before = [await gcCount(kept.registry), await gcCount(stopped.registry)];
    forceGc();
    await new Promise((resolve) => setTimeout(resolve, 50)); // GC entries arrive asynchronously
    expect(await gcCount(kept.registry)).toBeGreaterThan(before[0]!);
    expect(await gcCount(stopped.registry)).toBe(before[1]);
  });
});
