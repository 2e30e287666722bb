/**
 * Stage 1, the signature: a path that is not `/{signature}/…` is the router's own 404, a
 * malformed or wrong signature is 401. What passes is the rest of the path (options and
 * source), still escaped, exactly as it was signed.
 *
 * ## Invariants
 * - **Nothing about the options or the source is looked at before the signature holds**, so an
 *   unsigned path learns nothing (the 401 is the same for every wrong signature).
 * - **Every configured key/salt pair verifies** (rotation; `signature.ts` says how they are
 *   compared), so a URL signed with a rotated-out pair keeps working until that pair is removed.
 * - **`secure` refuses `insecure`** (a purge): an operator's act needs a real signature even on a
 *   node that renders `insecure` URLs for development.
 *
 * ## Races
 * None: pure, then one answer.
 *
 * ## Events
 * None.
 */
import { ANSWERED, type Answered, type Exchange, fail, type StageContext } from '../exchange.js';
import { signatureConfigOf, splitPath, verifySignature } from '../signature.js';

/** The verified rest of the path, or `ANSWERED` (404 route, 401). */
export function signatureStage(
  x: Exchange,
  ctx: StageContext,
  rawUrl: string,
  secure = false,
): string | Answered {
  const split = splitPath(rawUrl);
  if (!split.ok) {
    if (split.reason === 'no_route') fail(x, { type: 'not_found', scope: 'route' });
    else fail(x, { type: 'invalid_signature' });
    return ANSWERED;
  }
  const verdict = verifySignature(split.signature, split.rest, signatureConfigOf(ctx.config));
  if (!verdict.ok || (secure && verdict.insecure)) {
    fail(x, { type: 'invalid_signature' });
    return ANSWERED;
  }
  return split.rest;
}
