/**
 * Stage 2b, the encoder's capabilities: a render whose options need an ffmpeg part this node's
 * ffmpeg lacks (a filter, an encoder, a muxer; read once at boot, `workers/capabilities.ts`) is
 * 501 `unsupported_option`, naming the option and the part, before the source is touched, any
 * probe runs or any slot is asked for.
 *
 * ## Invariants
 * - **Only what this ffmpeg cannot do is refused here**: a valid option it can do always goes on
 *   (the argv maps every valid value onto what the encoder takes), and an unknown listing
 *   refuses nothing.
 * - **Before the variant store**: a HEAD, a HIT and a MISS of one URL get one answer.
 *
 * ## Races
 * None: a pure question of the listing read at boot.
 *
 * ## Events
 * None.
 */
import { ANSWERED, type Answered, type Exchange, fail, type StageContext } from '../exchange.js';
import type { ParsedRoute } from './options.js';

/** `ANSWERED` (501) when this ffmpeg cannot render the route's options; else nothing. */
export function capabilitiesStage(
  x: Exchange,
  ctx: StageContext,
  parsed: ParsedRoute,
): Answered | undefined {
  if (parsed.endpoint !== 'render') return undefined;
  const refusal = ctx.services.capabilities?.refusal(parsed.options);
  if (refusal === undefined) return undefined;
  fail(x, { type: 'unsupported_option', message: refusal.message });
  return ANSWERED;
}
