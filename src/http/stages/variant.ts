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

/**
 * An `f:hls` playlist's `Cache-Control`: its part URLs are signed with the current key, so a
 * cache keeps it an hour, not a year (a rotated-out key would leave it linking 401s).
 */
export const PLAYLIST_CACHE_CONTROL = 'public, max-age=3600, no-transform';

/** Whether `route` names an `f:hls` playlist (written, not rendered) rather than a variant. */
export function isPlaylist(route: RenderRoute): boolean {
  return route.options.format === 'hls' && route.options.hlsPart === undefined;
}

/** A playlist's ETag: its body carries the `exp` in every link, so the tag does too. */
export function playlistEtag(key: string, exp: number | undefined): string {
  return etagOf(exp === undefined ? key : cacheKey(`exp:${exp}`, key));
}

/** The last source's surrogate key: a burst's requests mostly name one source (one hash saved). */
let lastSurrogate: { readonly canonical: string; readonly key: string } | undefined;

function surrogateKeyOfCached(canonical: string): string {
  if (lastSurrogate?.canonical !== canonical)
    lastSurrogate = { canonical, key: surrogateKeyOf(canonical) };
  return lastSurrogate.key;
}

export function describeVariant(
  route: RenderRoute,
  canonical: string,
  nowS: number,
): VariantDescription {
  const key = cacheKey(route.normalized, canonical);
  const playlist = isPlaylist(route);
  const etag = playlist ? playlistEtag(key, route.request.exp) : etagOf(key);
  const cacheControl = clampCacheControl(
    playlist ? PLAYLIST_CACHE_CONTROL : IMMUTABLE_CACHE_CONTROL,
    route.request.exp,
    nowS,
  );
  const surrogateKey = surrogateKeyOfCached(canonical);
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
