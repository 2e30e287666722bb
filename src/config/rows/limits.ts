/**
 * Rows of rendering and its limits: render and probe slots, the queue and the readiness
 * threshold over it, byte and duration caps, timeouts, and how many tasks a worker pool serves
 * before it is recycled.
 *
 * ## Invariants
 * - **A derived default follows the effective value it derives from**: probe slots default to
 *   `PROBE_CONCURRENCY_FACTOR` × render slots, the readiness threshold to half the queue, the
 *   variant cap to the source cap, whatever those were set to (or fell back to when invalid).
 *   The rows come after their sources in the table, so `Reading.get` sees them.
 * - **Timeouts fit a Node timer** (`MAX_TIMEOUT_S`), so no limit overflows into "fire at once".
 *
 * Not here: the readiness threshold ≤ queue rule (`cross.ts`), and the waiting room's share of
 * the render slots (`waitingRoom.ts`).
 */
import { DEFAULT_RENDER_TIMEOUT_S } from '../../core/worker.js';
import {
  DEFAULT_BACKLOG_BUDGET_BYTES,
  DEFAULT_MAX_DURATION_S,
  DEFAULT_MAX_PROBES_PER_WORKER_POOL,
  DEFAULT_MAX_RENDERS_PER_WORKER_POOL,
  DEFAULT_MAX_SRC_BYTES,
  DEFAULT_PROBE_TIMEOUT_S,
  DEFAULT_QUEUE_SIZE,
  PROBE_CONCURRENCY_FACTOR,
} from '../defaults.js';
import { integer } from '../parsers.js';
import { row, SECTIONS } from '../row.js';
import { RULE } from '../rules.js';

const section = SECTIONS.limits;

/** Half the queue, floored, at least 1; a queue of 0 has no depth to read, so readiness is off. */
export function defaultReadyQueueThreshold(queueSize: number): number {
  return queueSize === 0 ? 0 : Math.max(1, Math.floor(queueSize / 2));
}

export const LIMIT_ROWS = [
  row({
    name: 'AP_MAX_CONCURRENCY',
    field: 'maxConcurrency',
    section,
    default: 'the CPU count (`os.availableParallelism()`)',
    rule: RULE.positive,
    doc: 'Render slots: encoders running at once. A coalesced request takes none.',
    read: (v) => integer(v, v.cpuCount, 'positive'),
  }),
  row({
    name: 'AP_MAX_PROBE_CONCURRENCY',
    field: 'maxProbeConcurrency',
    section,
    default: `${PROBE_CONCURRENCY_FACTOR} × the effective \`AP_MAX_CONCURRENCY\``,
    rule: RULE.positive,
    doc: 'Probe slots: ffprobe runs at once. No queue; overflow is a 429.',
    read: (v) => integer(v, v.get('maxConcurrency') * PROBE_CONCURRENCY_FACTOR, 'positive'),
  }),
  row({
    name: 'AP_QUEUE_SIZE',
    field: 'queueSize',
    section,
    default: `\`${DEFAULT_QUEUE_SIZE}\``,
    rule: RULE.nonNegative,
    doc: 'Requests that may wait for a render slot; beyond it, 429 at once. `0` means no waiting.',
    read: (v) => integer(v, DEFAULT_QUEUE_SIZE, 'nonNegative'),
  }),
  row({
    name: 'AP_READY_QUEUE_THRESHOLD',
    field: 'readyQueueThreshold',
    section,
    default: '`0` if the queue size is 0, else max(1, floor(queue size / 2))',
    rule: `${RULE.nonNegative}, at most the effective \`AP_QUEUE_SIZE\``,
    doc: 'Queue depth at which `/ready` turns 503 (it recovers at half); `0` disables the check.',
    read: (v) => integer(v, defaultReadyQueueThreshold(v.get('queueSize')), 'nonNegative'),
  }),
  row({
    name: 'AP_MAX_SRC_BYTES',
    field: 'maxSrcBytes',
    section,
    default: `\`${DEFAULT_MAX_SRC_BYTES}\``,
    rule: RULE.positive,
    doc: 'Largest source accepted (over it: 413): checked by stat and on the opened file before rendering (not for `/info`), and on every byte the proxy reads of a remote source (`/info` too: it is what the proxy stores).',
    read: (v) => integer(v, DEFAULT_MAX_SRC_BYTES, 'positive'),
  }),
  row({
    name: 'AP_MAX_VARIANT_BYTES',
    field: 'maxVariantBytes',
    section,
    default: 'the effective `AP_MAX_SRC_BYTES`',
    rule: `${RULE.positive}; may exceed \`AP_MAX_SRC_BYTES\``,
    doc: 'Most bytes one render may produce (over it the render fails); what renders keep in memory is bounded by `AP_BACKLOG_BUDGET_BYTES`.',
    read: (v) => integer(v, v.get('maxSrcBytes'), 'positive'),
  }),
  row({
    name: 'AP_BACKLOG_BUDGET_BYTES',
    field: 'backlogBudgetBytes',
    section,
    default: `\`${DEFAULT_BACKLOG_BUDGET_BYTES}\` (256 MiB)`,
    rule: `${RULE.nonNegative}; 0 keeps no backlog`,
    doc: 'Bytes all running renders keep in memory together to replay to late joiners. A render whose next chunk would cross it stops keeping its backlog: its listeners and the store still get every byte, and a later request for the same variant renders afresh.',
    read: (v) => integer(v, DEFAULT_BACKLOG_BUDGET_BYTES, 'nonNegative'),
  }),
  row({
    name: 'AP_RENDER_TIMEOUT',
    field: 'renderTimeoutS',
    section,
    default: `\`${DEFAULT_RENDER_TIMEOUT_S}\``,
    rule: RULE.timeout,
    doc: 'Render silence limit (504); a queued request waiting longer than this plus 1 s gets a 429.',
    read: (v) => integer(v, DEFAULT_RENDER_TIMEOUT_S, 'timeout'),
  }),
  row({
    name: 'AP_PROBE_TIMEOUT',
    field: 'probeTimeoutS',
    section,
    default: `\`${DEFAULT_PROBE_TIMEOUT_S}\``,
    rule: RULE.timeout,
    doc: 'ffprobe time limit, for `/info` and the probe before a render.',
    read: (v) => integer(v, DEFAULT_PROBE_TIMEOUT_S, 'timeout'),
  }),
  row({
    name: 'AP_MAX_DURATION_S',
    field: 'maxDurationS',
    section,
    default: `\`${DEFAULT_MAX_DURATION_S}\``,
    rule: RULE.positive,
    doc: 'Longest source a render accepts, by its probe (over it: 413 `source_too_long`), and longest output ffmpeg writes (`-t`, a backstop for sources that lie).',
    read: (v) => integer(v, DEFAULT_MAX_DURATION_S, 'positive'),
  }),
  row({
    name: 'AP_MAX_RENDERS_PER_WORKER_POOL',
    field: 'maxRendersPerWorkerPool',
    section,
    default: `\`${DEFAULT_MAX_RENDERS_PER_WORKER_POOL}\``,
    rule: `${RULE.nonNegative}; 0 never recycles`,
    doc: 'Renders a render worker pool serves before the process supervisor drains it and starts a fresh one (workers that leak are replaced without dropping work).',
    read: (v) => integer(v, DEFAULT_MAX_RENDERS_PER_WORKER_POOL, 'nonNegative'),
  }),
  row({
    name: 'AP_MAX_PROBES_PER_WORKER_POOL',
    field: 'maxProbesPerWorkerPool',
    section,
    default: `\`${DEFAULT_MAX_PROBES_PER_WORKER_POOL}\``,
    rule: `${RULE.nonNegative}; 0 never recycles`,
    doc: 'Probes a probe worker pool serves before it is recycled the same way.',
    read: (v) => integer(v, DEFAULT_MAX_PROBES_PER_WORKER_POOL, 'nonNegative'),
  }),
] as const;
