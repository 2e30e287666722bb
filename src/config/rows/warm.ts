/**
 * Rows of warming (`POST /warm`, issue #19): how many entries one request may carry, how many
 * the node holds at once, how many of them it has admitted to the render semaphore at once,
 * and how a displaced or refused entry is retried. See docs/classes.md.
 *
 * ## Invariants
 * - **Warm work never takes the whole wait queue by default**: `AP_WARM_ADMITTED` defaults to the
 *   render slots plus half the queue, so live requests find room without displacing anyone
 *   until an operator raises it. Either way a live request displaces warm work, never the
 *   reverse (`machines/semaphore.ts`).
 * - **Retries are bounded twice**: by `AP_WARM_ATTEMPTS` and by `AP_WARM_BACKOFF_MAX_SECONDS`.
 */
import {
  DEFAULT_PREFETCH_HLS_SEGMENTS,
  DEFAULT_WARM_ATTEMPTS,
  DEFAULT_WARM_BACKOFF_MAX_S,
  DEFAULT_WARM_MAX_ENTRIES,
  DEFAULT_WARM_MAX_PENDING,
} from '../defaults.js';
import { boolean, integer } from '../parsers.js';
import { row, SECTIONS } from '../row.js';
import { RULE } from '../rules.js';

const section = SECTIONS.limits;

export const WARM_ROWS = [
  row({
    name: 'AP_WARM_MAX_ENTRIES',
    field: 'warmMaxEntries',
    section,
    default: `\`${DEFAULT_WARM_MAX_ENTRIES}\``,
    rule: RULE.positive,
    doc: 'Entries one `POST /warm` may carry; more is a 422 and nothing of it is warmed.',
    read: (v) => integer(v, DEFAULT_WARM_MAX_ENTRIES, 'positive'),
  }),
  row({
    name: 'AP_WARM_MAX_PENDING',
    field: 'warmMaxPending',
    section,
    default: `\`${DEFAULT_WARM_MAX_PENDING}\``,
    rule: RULE.positive,
    doc: 'Warm entries the node holds at once (waiting, admitted, backing off); an entry beyond it is `rejected(warm_full)`.',
    read: (v) => integer(v, DEFAULT_WARM_MAX_PENDING, 'positive'),
  }),
  row({
    name: 'AP_WARM_ADMITTED',
    field: 'warmAdmitted',
    section,
    default: 'the effective `AP_MAX_CONCURRENCY` + floor(`AP_QUEUE_SIZE` / 2)',
    rule: RULE.positive,
    doc: 'Warm renders admitted to the render semaphore at once (running or queued there); the rest wait in the warm service, taking no place in the queue.',
    read: (v) =>
      integer(v, v.get('maxConcurrency') + Math.floor(v.get('queueSize') / 2), 'positive'),
  }),
  row({
    name: 'AP_WARM_ATTEMPTS',
    field: 'warmAttempts',
    section,
    default: `\`${DEFAULT_WARM_ATTEMPTS}\``,
    rule: RULE.positive,
    doc: 'Attempts a warm entry gets: each displacement, refusal (queue full) or preemption by a listener costs one; the last is reported `failed` with its reason.',
    read: (v) => integer(v, DEFAULT_WARM_ATTEMPTS, 'positive'),
  }),
  row({
    name: 'AP_WARM_BACKOFF_MAX_SECONDS',
    field: 'warmBackoffMaxS',
    section,
    default: `\`${DEFAULT_WARM_BACKOFF_MAX_S}\``,
    rule: RULE.timeout,
    doc: "Ceiling on a warm retry's wait: the semaphore's `Retry-After`, doubled per attempt, at most this.",
    read: (v) => integer(v, DEFAULT_WARM_BACKOFF_MAX_S, 'timeout'),
  }),
  row({
    name: 'AP_PREFETCH_NEXT_TRIM',
    field: 'prefetchNextTrim',
    section,
    default: '`false`',
    rule: RULE.boolean,
    doc: 'With a variant store: a MISS of `t:S:D` prefetches `t:S+D:D` (same source and options) at class `low`, as warm work (preempted by any waiting listener).',
    read: (v) => boolean(v, false),
  }),
  row({
    name: 'AP_PREFETCH_HLS_SEGMENTS',
    field: 'prefetchHlsSegments',
    section,
    default: `\`${DEFAULT_PREFETCH_HLS_SEGMENTS}\``,
    rule: RULE.nonNegative,
    doc: 'With a variant store: a MISS of `f:hls` segment `hls_seg:N` prefetches the next this many segments (never past the last, never the init part) at class `low`, as warm work; `0` is off.',
    read: (v) => integer(v, DEFAULT_PREFETCH_HLS_SEGMENTS, 'nonNegative'),
  }),
] as const;
