/**
 * Stage 5, the conditional request: an `If-None-Match` naming the variant's ETag is 304 with the
 * ETag and `Cache-Control`, before any storage access (the ETag is a function of the URL).
 *
 * ## Invariants
 * - **No store, source or slot is touched** for a 304.
 *
 * ## Races
 * None: pure, then one answer.
 *
 * ## Events
 * None.
 */
import { ifNoneMatchMatches } from '../cacheKey.js';
import { ANSWERED, type Answered, type Exchange } from '../exchange.js';
import { surrogateHeaders, type VariantDescription } from './variant.js';

/** `ANSWERED` (304) when the client holds this variant, else undefined. */
export function notModifiedStage(x: Exchange, variant: VariantDescription): Answered | undefined {
  const inm = x.req.headers['if-none-match'];
  if (typeof inm !== 'string' || !ifNoneMatchMatches(inm, variant.etag)) return undefined;
  x.res.writeHead(304, {
    etag: variant.etag,
    'cache-control': variant.cacheControl,
    ...surrogateHeaders(variant.surrogateKey),
    ...x.cors,
  });
  x.res.end();
  return ANSWERED;
}
