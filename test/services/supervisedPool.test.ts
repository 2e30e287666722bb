// A supervised pool as the proxy builds it (a real worker pool of one thread): the supervisor
// starts it lazily, every transition goes out on the pool-transition channel labelled with the
// pool's name, and the system child warms the pools at start and drains and stops their
// supervisors at stop. Then the gauges and /health summary read from the same supervisors.
import diagnostics from 'node:diagnostics_channel';
import { afterEach, describe, expect, it } from 'vitest';
import { createSystem } from '../../src/actors/system.js';
import { poolGauges, poolHealth, SUPERVISOR_STATES } from '../../src/services/poolGauges.js';
import {
  createSupervisedPool,
  POOL_STOP_DRAIN_MS,
  poolsChild,
  type SupervisedPool,
} from '../../src/services/supervisedPool.js';
import { stopSupervisor } from '../../src/services/supervisorClient.js';
import { WORKER_POOL_TRANSITION_CHANNEL } from '../../src/telemetry/channels.js';

const quiet = { error: () => {}, warn: () => {} };
const pools: SupervisedPool[] = [];
afterEach(async () => {
  for (const p of pools.splice(0)) {
    await stopSupervisor(p.supervisor, { drainTimeoutMs: 0 }).catch(() => {});
    p.supervisor.stop();
  }
});

function pool(name: 'render' | 'probe', maxTasks = 0): SupervisedPool {
  const p = createSupervisedPool({ name, size: 1, maxTasks: () => maxTasks });
  pools.push(p);
  return p;
}

describe('createSupervisedPool', () => {
  it('starts nothing until a task; publishes each transition labelled with the pool', async () => {
    const seen: Array<{ pool: string; to: string }> = [];
    const listener = (m: unknown) => seen.push(m as { pool: string; to: string });
    diagnostics.subscribe(WORKER_POOL_TRANSITION_CHANNEL, listener);
    try {
      const p = pool('probe');
      expect(p.started).toBe(false);
      expect(p.process.created).toBe(0);
      await expect(p.run({ kind: 'echo', value: 'hi' })).resolves.toBe('hi');
      expect(p.process.created).toBe(1);
      expect(seen.length).toBeGreaterThan(0);
      expect(seen.every((m) => m.pool === 'probe')).toBe(true);
      expect(seen.map((m) => m.to)).toContain('starting');
    } finally {
      diagnostics.unsubscribe(WORKER_POOL_TRANSITION_CHANNEL, listener);
    }
  });
});

describe('poolsChild', () => {
  it('warms every pool at start; drains and stops the supervisors at stop', async () => {
    const render = pool('render');
    const probe = pool('probe');
    const child = poolsChild([render, probe]);
    expect(child.name).toBe('pools');
    expect(child.stopTimeoutMs).toBe(POOL_STOP_DRAIN_MS + 10_000);
    const system = await createSystem([child], { logger: quiet });
    expect(system.get('pools')).toEqual([render, probe]);
    expect(render.started && probe.started).toBe(true);
    expect(poolHealth([render, probe])).toEqual({
      render: { state: 'running', healthy: true, restarts: 0, lastRestartReason: null },
      probe: { state: 'running', healthy: true, restarts: 0, lastRestartReason: null },
    });
    await system.stop();
    expect(render.supervisor.getSnapshot().status).toBe('stopped');
    expect(probe.supervisor.getSnapshot().status).toBe('stopped');
    expect(render.started).toBe(false);
  });
});

describe('poolGauges', () => {
  it('reads every gauge from the supervisors, one-hot families complete', async () => {
    const render = pool('render');
    const probe = pool('probe');
    await render.run({ kind: 'echo', value: 1 });
    const gauges = poolGauges([render, probe]);
    const value = (name: string, labels: Record<string, string>) =>
      gauges.find((g) => g.name === name && JSON.stringify(g.labels) === JSON.stringify(labels))
        ?.value;
    expect(value('audio_proxy_worker_pool_generation', { pool: 'render' })).toBe(1);
    expect(value('audio_proxy_worker_pool_generation', { pool: 'probe' })).toBe(0);
    expect(value('audio_proxy_worker_pool_tasks_since_start', { pool: 'render' })).toBe(1);
    expect(value('audio_proxy_worker_pool_restarts', { pool: 'render' })).toBe(0);
    expect(value('audio_proxy_worker_pool_healthy', { pool: 'probe' })).toBe(1);
    expect(value('audio_proxy_worker_pool_state', { pool: 'render', state: 'running' })).toBe(1);
    expect(value('audio_proxy_worker_pool_state', { pool: 'probe', state: 'notStarted' })).toBe(1);
    for (const p of ['render', 'probe']) {
      const states = gauges.filter(
        (g) => g.name === 'audio_proxy_worker_pool_state' && g.labels?.pool === p,
      );
      expect(states.map((g) => g.labels?.state)).toEqual(SUPERVISOR_STATES);
      expect(states.reduce((sum, g) => sum + g.value, 0)).toBe(1);
      const reasons = gauges.filter(
        (g) => g.name === 'audio_proxy_worker_pool_last_restart_reason' && g.labels?.pool === p,
      );
      expect(reasons.map((g) => g.labels?.reason)).toEqual(['max_tasks', 'unhealthy', 'manual']);
      expect(reasons.every((g) => g.value === 0)).toBe(true); // no restart yet
    }
  });
});
