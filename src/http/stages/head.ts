/**
 * Stage 7, HEAD on a MISS: once the source is known to exist (its stat passed), a HEAD is
 * answered with the success headers and `x-audio-proxy: MISS`, and nothing is probed, claimed
 * or rendered.
 *
 * ## Invariants
 * - **A HEAD never spawns anything**: it stops here, before the probe gate.
 *
 * ## Races
 * None.
 *
 * ## Events
 * None.
 */
import { ANSWERED, type Answered, type Exchange } from '../exchange.js';
import type { VariantDescription } from './variant.js';

/** `ANSWERED` (200, no body) for a HEAD, else undefined. */
export function headStage(x: Exchange, variant: VariantDescription): Answered | undefined {
  if (!x.head) return undefined;
  x.cache = 'MISS';
  x.res.writeHead(200, { ...variant.headers, 'x-audio-proxy': 'MISS', ...x.cors });
  x.res.end();
  return ANSWERED;
}
