/**
 * Stage 8, the probe gate: the source is probed (ffprobe, shared per source) and refused before
 * any slot when it cannot be rendered: what the probe answers (404, 415 undecodable or video,
 * 429 probe queue, 5xx), what the encoders cannot take or longer than `AP_MAX_DURATION_S`
 * (`admissionVerdict`: 413, 415), and peaks of a source whose duration is unknown (415).
 *
 * ## Invariants
 * - **No render slot is asked for before every refusal here had its chance.**
 * - **The probe's size wins** over the stat's (a remote source's length is known once fetched).
 *
 * ## Races
 * - *Client leaves during the probe*: the probe goes on for whoever else waits on it; the answer
 *   goes to a closed response.
 *
 * ## Events
 * None of its own (the probe service publishes its own).
 */
import type { ProbeOutcome } from '../../core/request.js';
import type { ResolvedSource } from '../../core/source.js';
import type { RenderOptions } from '../../core/variant.js';
import { admissionVerdict } from '../../workers/probe.js';
import {
  ANSWERED,
  type Answered,
  type Exchange,
  fail,
  nextStage,
  type StageContext,
} from '../exchange.js';

export type ProbeFindings = Extract<ProbeOutcome, { ok: true }>;

/** The probe's findings, or `ANSWERED` (the refusals above). */
export async function probeGateStage(
  x: Exchange,
  ctx: StageContext,
  resolved: ResolvedSource,
  options: RenderOptions,
): Promise<ProbeFindings | Answered> {
  const probe = await ctx.services.probe(resolved);
  const turn = nextStage(x);
  if (turn) await turn;
  if (!probe.ok) {
    fail(x, probe.failure);
    return ANSWERED;
  }
  // What the encoders cannot take, or past the output bound, is refused before any slot.
  const probedSize = typeof probe.info.size === 'number' ? probe.info.size : resolved.size;
  const admission = admissionVerdict(probe.media ?? {}, probedSize, ctx.config);
  if (!admission.ok) {
    fail(x, { type: admission.reason });
    return ANSWERED;
  }
  if (options.format === 'peaks' && probe.media?.duration === undefined) {
    // Peaks need the duration to size their buckets; a source without one cannot be drawn.
    fail(x, { type: 'undecodable_source' });
    return ANSWERED;
  }
  return probe;
}
