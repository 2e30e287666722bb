/**
 * Stage 3, the expiry: a render URL whose `exp` has passed is 410, answered as immutable (an
 * expired URL never becomes valid again). `/info` URLs carry no expiry.
 *
 * ## Invariants
 * - **One clock reading per request** (`nowS`, taken by the router): the expiry, the HIT's
 *   presign TTL and the success `Cache-Control` all clamp against the same second.
 *
 * ## Races
 * None: pure, then one answer.
 *
 * ## Events
 * None.
 */
import { ANSWERED, type Answered, type Exchange, fail } from '../exchange.js';
import { isExpired } from '../expiry.js';

/** `ANSWERED` (410) when `exp` has passed at `nowS`, else undefined. */
export function expiryStage(
  x: Exchange,
  exp: number | undefined,
  nowS: number,
): Answered | undefined {
  if (!isExpired(exp, nowS)) return undefined;
  fail(x, { type: 'expired' });
  return ANSWERED;
}
