/**
 * Stage 2, the options: the verified rest of the path parsed into an endpoint (`render` with its
 * options, or `info`) and the raw source string. A rest with no source marker is 404 ("Source
 * not found": the route matched, the source is what is missing); a bad option is 422 naming the
 * offending segment in its canonical spelling.
 *
 * ## Invariants
 * - **The grammar is `options.ts`'s**, with the configuration's presets (`presets.ts`); this
 *   stage only answers its refusals. Without a context (tests) there are no presets.
 *
 * ## Races
 * None: pure, then one answer.
 *
 * ## Events
 * None.
 */
import { ANSWERED, type Answered, type Exchange, fail, type StageContext } from '../exchange.js';
import { NO_PRESETS, parseRoute, type RouteResult } from '../options.js';
import { optionGrammarOf } from '../presets.js';

/** A parsed route: `render` (options, expiry, normalised options) or `info`. */
export type ParsedRoute = Extract<RouteResult, { ok: true }>;

/** The parsed route, or `ANSWERED` (404, 422). */
export function optionsStage(
  x: Exchange,
  rest: string,
  ctx?: StageContext,
): ParsedRoute | Answered {
  const parsed = parseRoute(rest, ctx ? optionGrammarOf(ctx.config) : NO_PRESETS);
  if (parsed.ok) return parsed;
  if (parsed.error === 'not_found') fail(x, { type: 'not_found' });
  else fail(x, { type: 'invalid_options', message: parsed.message });
  return ANSWERED;
}
