/**
 * What a render URL's answer is, before anything is looked up: its variant key, ETag, the
 * success headers (type, `Cache-Control` clamped to the URL's expiry, disposition, and the
 * source's surrogate key as `Surrogate-Key` and `Cache-Tag`, so a CDN can purge every variant of
 * one source at once). Every later stage (304, HIT, HEAD, render) answers with these.
 *
 * ## Invariants
 * - **Pure**: the same route, source and second give the same description.
 * - **`Cache-Control` never outlives the URL** (`clampCacheControl`).
 *
 * ## Races
 * None.
 *
 * ## Events
 * None.
 */
import {
  contentDisposition,
  contentTypeFor,
  IMMUTABLE_CACHE_CONTROL,
} from '../../core/variantHeaders.js';
import { cacheKey, etagOf, surrogateKeyOf } from '../cacheKey.js';
import { clampCacheControl } from '../expiry.js';
import type { ParsedRoute } from './options.js';

export type RenderRoute = Extract<ParsedRoute, { endpoint: 'render' }>;

export interface VariantDescription {
  readonly key: string;
  readonly etag: string;
  readonly cacheControl: string;
  /** The source's tag for a CDN purge (`Surrogate-Key`, `Cache-Tag`). */
  readonly surrogateKey: string;
  /** The success headers (lower-case names), without `x-audio-proxy` and CORS. */
  readonly headers: Record<string, string>;
}

export function describeVariant(
  route: RenderRoute,
  canonical: string,
  nowS: number,
): VariantDescription {
  const key = cacheKey(route.normalized, canonical);
  const etag = etagOf(key);
  const cacheControl = clampCacheControl(IMMUTABLE_CACHE_CONTROL, route.request.exp, nowS);
  const surrogateKey = surrogateKeyOf(canonical);
  const headers: Record<string, string> = {
    'content-type': contentTypeFor(route.options),
    'cache-control': cacheControl,
    etag,
    ...surrogateHeaders(surrogateKey),
  };
  if (route.options.download !== undefined) {
    headers['content-disposition'] = contentDisposition(route.options.download);
  }
  return { key, etag, cacheControl, surrogateKey, headers };
}

/**
 * The purge tag under the two names CDNs read: `Surrogate-Key` (Fastly, Varnish; a space list)
 * and `Cache-Tag` (Cloudflare, Bunny; a comma list). One token, so both lists are that token.
 */
export function surrogateHeaders(surrogateKey: string): Record<string, string> {
  return { 'surrogate-key': surrogateKey, 'cache-tag': surrogateKey };
}
