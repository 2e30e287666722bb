/**
 * What a render URL's answer is, before anything is looked up: its variant key, ETag, the
 * success headers (type, `Cache-Control` clamped to the URL's expiry, disposition). Every later
 * stage (304, HIT, HEAD, render) answers with these.
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
import { cacheKey, etagOf } from '../cacheKey.js';
import { clampCacheControl } from '../expiry.js';
import type { ParsedRoute } from './options.js';

export type RenderRoute = Extract<ParsedRoute, { endpoint: 'render' }>;

export interface VariantDescription {
  readonly key: string;
  readonly etag: string;
  readonly cacheControl: string;
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
  const headers: Record<string, string> = {
    'content-type': contentTypeFor(route.options),
    'cache-control': cacheControl,
    etag,
  };
  if (route.options.download !== undefined) {
    headers['content-disposition'] = contentDisposition(route.options.download);
  }
  return { key, etag, cacheControl, headers };
}
