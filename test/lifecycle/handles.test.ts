// A host that makes and closes proxies over and over (tests, a supervisor that rebuilds one on a
// config change) is left as it was: after 20 proxies, each scraped (so the process metrics'
// collectors ran) and closed, no handle, timer, process listener or telemetry subscriber is left
// over, and every event-loop monitor and GC observer the process metrics started is stopped.
import diagnostics from 'node:diagnostics_channel';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { createAudioProxy } from '../../src/proxy.js';
import { CHANNELS } from '../../src/telemetry/channels.js';

const PROXIES = 20;
/** The smallest proxy: one thread per pool (each boot warms its pools). */
const config = () =>
  loadConfig({ AP_LOG_LEVEL: 'error', AP_MAX_CONCURRENCY: '1', AP_MAX_PROBE_CONCURRENCY: '1' });

/** Active resources (handles, requests, timers) by type. */
function resources(): Record<string, number> {
  const count: Record<string, number> = {};
  for (const type of process.getActiveResourcesInfo()) count[type] = (count[type] ?? 0) + 1;
  return count;
}

function processListeners(): Record<string, number> {
  return Object.fromEntries(
    process.eventNames().map((name) => [String(name), process.listenerCount(name)]),
  );
}

const subscribed = () => CHANNELS.filter((name) => diagnostics.channel(name).hasSubscribers);

/** Lets closes, unrefs and immediates settle. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 100));

describe(`${PROXIES} proxies made and closed`, () => {
  it('leave no handle, listener, subscriber, monitor or observer behind', async () => {
    // One proxy first, so what a first import and first use set up once is in the baseline.
    const first = await createAudioProxy({
      config: config(),
      logger: pino({ level: 'silent' }),
    });
    await first.metrics.expose();
    await first.close();
    await settle();
    const before = { resources: resources(), listeners: processListeners(), subs: subscribed() };

    const samplers = [];
    for (let i = 0; i < PROXIES; i++) {
      const proxy = await createAudioProxy({
        config: config(),
        logger: pino({ level: 'silent' }),
      });
      const { body } = await proxy.metrics.expose();
      expect(body).toContain('# TYPE nodejs_eventloop_lag_seconds gauge');
      samplers.push(proxy.metrics.process);
      await proxy.close();
    }
    await settle();

    const after = resources();
    for (const [type, n] of Object.entries(after)) {
      expect({ type, n }).toEqual({ type, n: Math.min(n, before.resources[type] ?? 0) });
    }
    expect(processListeners()).toEqual(before.listeners);
    expect(subscribed()).toEqual(before.subs);
    expect(samplers.flatMap((s) => s.monitors)).toHaveLength(PROXIES);
    expect(samplers.flatMap((s) => s.observers)).toHaveLength(PROXIES);
    // disable() answers false for a monitor that is already stopped (counted: a failure message
    // must not carry the native histograms themselves)
    const running = samplers.flatMap((s) => s.monitors).filter((m) => m.disable()).length;
    expect({ running }).toEqual({ running: 0 });
  }, 300_000);
});
