/**
 * What the worker pools' supervisors report outward: Prometheus gauges for a scrape
 * (`poolGauges`, the `extra` gauges of `telemetry/metrics.ts`) and the per-pool summary `/health`
 * shows (`poolHealth`).
 *
 * ## Invariants
 * - **Read at call time** from each supervisor's snapshot (`supervisorStats`); nothing is cached,
 *   so a scrape or a health check never sees a stale state.
 * - **Labels come from closed sets**: the pool's name, `SUPERVISOR_STATES` and the restart
 *   reasons. The one-hot families (`_state`, `_last_restart_reason`) list every value, 0 or 1,
 *   so a dashboard never sees a series vanish; before any restart every reason reads 0.
 */
import type { RestartReason, SupervisorState } from '../machines/processSupervisor.js';
import type { ExtraGauge } from '../telemetry/metrics.js';
import type { SupervisedPool } from './supervisedPool.js';
import { supervisorStats } from './supervisorClient.js';

/** Every supervisor state, for the one-hot state gauge. */
export const SUPERVISOR_STATES: readonly SupervisorState[] = [
  'notStarted',
  'starting',
  'running',
  'draining',
  'restarting',
  'failed',
  'stopping',
  'stopped',
];

const RESTART_REASONS: readonly RestartReason[] = ['max_tasks', 'unhealthy', 'manual'];

/** The pools' gauges, labelled `pool` (one series per pool and label value). */
export function poolGauges(pools: readonly SupervisedPool[]): ExtraGauge[] {
  return pools.flatMap((p) => {
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
      ...RESTART_REASONS.map((reason) => ({
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
  });
}

/** One pool as `/health` shows it (a restart in progress still reads healthy). */
export interface PoolHealth {
  readonly state: SupervisorState;
  readonly healthy: boolean;
  readonly restarts: number;
  readonly lastRestartReason: RestartReason | null;
}

/** `/health`'s `pools`: each pool's supervisor summary, keyed by the pool's name. */
export function poolHealth(pools: readonly SupervisedPool[]): Record<string, PoolHealth> {
  return Object.fromEntries(
    pools.map((p) => {
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
}
