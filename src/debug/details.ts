/**
 * What the live view shows beside an actor's state: a few numbers read from its snapshot's
 * context (slots held and queued per class, a pool's generation and task count, a coordinator's
 * subscribers and bytes). Read-only, flat, JSON-safe.
 *
 * ## Invariants
 * - **Never writes, never throws**: a context it cannot read gives `{}`; the view is a
 *   bystander and must not break the actor it watches (the semaphore's table is live and
 *   mutable, so it is only counted, never copied or iterated beyond a bounded prefix).
 * - **Bounded output**: at most `MAX_DETAIL_FIELDS` fields, strings cut to `MAX_DETAIL_CHARS`,
 *   id lists to `MAX_LISTED_IDS`; a Map, Set or array is shown by its size.
 *
 * ## Races
 * - None of its own: it runs inside the inspection callback, between two steps of the actor,
 *   so the context it reads is the one that step left.
 *
 * ## Events
 * | Chart | Fields |
 * |---|---|
 * | `semaphore` | held, capacity, queued, queueSize, queued_<class>, holders, waiters |
 * | `probeLimiter` | held, capacity |
 * | `processSupervisor` | the supervisor's stats (state, generation, restarts, tasks…) |
 * | `renderCoordinator` | as any other, plus the render's `input` and `output` format |
 * | any other | its context's primitive fields, and the size of each collection |
 */

import type { ProbeLimiterContext } from '../machines/probeLimiter.js';
import { type ProcessSupervisorContext, statsOfContext } from '../machines/processSupervisor.js';
import { ADMISSION_CLASSES, limitsOf, type SemaphoreContext } from '../machines/semaphore.js';

/** A long key or source is cut here: enough to tell two apart on screen. */
export const MAX_DETAIL_CHARS = 160;
/** Holder and waiter ids listed per semaphore; the counts are always exact. */
export const MAX_LISTED_IDS = 8;
/** Fields kept per actor: a context with more is summarised, not dumped. */
export const MAX_DETAIL_FIELDS = 16;

export type DetailValue = string | number | boolean | null;
export type Details = Record<string, DetailValue>;

function cut(s: string): string {
  return s.length > MAX_DETAIL_CHARS ? `${s.slice(0, MAX_DETAIL_CHARS - 1)}…` : s;
}

function idList(ids: Iterable<string>): string {
  const out: string[] = [];
  let more = 0;
  for (const id of ids) {
    if (out.length < MAX_LISTED_IDS) out.push(id);
    else more++;
  }
  return cut(more > 0 ? `${out.join(' ')} (+${more})` : out.join(' '));
}

function semaphoreDetails(ctx: SemaphoreContext): Details {
  const { table } = ctx;
  const limits = limitsOf(ctx.config);
  const out: Details = {
    held: table.holders.size,
    capacity: limits.capacity,
    queued: table.waiters.size,
    queueSize: limits.queueSize,
  };
  ADMISSION_CLASSES.forEach((cls, rank) => {
    out[`queued_${cls}`] = table.depth(rank);
  });
  out.holders = idList(table.holders.keys());
  out.waiters = idList(table.waiters.keys());
  return out;
}

function probeLimiterDetails(ctx: ProbeLimiterContext): Details {
  const capacity = ctx.config.capacity ?? ctx.config.limits?.().capacity ?? null;
  return { held: ctx.holders.size, capacity };
}

function supervisorDetails(ctx: ProcessSupervisorContext): Details {
  const s = statsOfContext(ctx);
  return {
    generation: s.generation,
    restarts: s.restarts,
    tasksSinceStart: s.tasksSinceStart,
    running: s.running,
    waiting: s.waiting,
    healthy: s.healthy,
    lastRestartReason: s.lastRestartReason,
  };
}

/** Primitive fields as they are, collections by size; functions and objects are skipped. */
function genericDetails(ctx: unknown): Details {
  const out: Details = {};
  if (ctx === null || typeof ctx !== 'object') return out;
  let n = 0;
  for (const [key, value] of Object.entries(ctx)) {
    if (n >= MAX_DETAIL_FIELDS) break;
    let shown: DetailValue | undefined;
    if (value === null || typeof value === 'number' || typeof value === 'boolean') shown = value;
    else if (typeof value === 'string') shown = cut(value);
    else if (value instanceof Map || value instanceof Set) shown = value.size;
    else if (Array.isArray(value)) shown = value.length;
    if (shown === undefined) continue;
    out[key] = shown;
    n++;
  }
  return out;
}

/**
 * A coordinator's key is a hash: its render's argv says what is being made. The input is the
 * render's canonical source when it carries one (ffmpeg's own input is only a descriptor), else
 * the argv's; a query string is dropped either way (a signature is nobody's business here).
 */
function coordinatorDetails(ctx: {
  renderInput?: { spec?: { argv?: unknown }; source?: unknown };
}): Details {
  const out = genericDetails(ctx);
  const argv = ctx.renderInput?.spec?.argv;
  if (!Array.isArray(argv)) return out;
  const at = argv.lastIndexOf('-i');
  const labelled = ctx.renderInput?.source;
  const input = typeof labelled === 'string' ? labelled : at >= 0 ? argv[at + 1] : undefined;
  if (typeof input === 'string') out.input = cut(input.split('?', 1)[0] ?? '');
  const f = argv.lastIndexOf('-f');
  const output = f >= 0 ? argv[f + 1] : undefined;
  if (typeof output === 'string') out.output = output;
  return out;
}

/** The fields shown for an actor of chart `chartId` whose snapshot context is `context`. */
export function detailsOf(chartId: string, context: unknown): Details {
  try {
    switch (chartId) {
      case 'semaphore':
        return semaphoreDetails(context as SemaphoreContext);
      case 'probeLimiter':
        return probeLimiterDetails(context as ProbeLimiterContext);
      case 'processSupervisor':
        return supervisorDetails(context as ProcessSupervisorContext);
      case 'renderCoordinator':
        return coordinatorDetails(context as Parameters<typeof coordinatorDetails>[0]);
      default:
        return genericDetails(context);
    }
  } catch {
    return {};
  }
}
