/**
 * The `f:hls` playlist's answer, after the probe gate (`hls.ts` writes it): 200 with the
 * playlist, its length, its own ETag and a short `Cache-Control`, or 413 `source_too_long` when
 * it would list more than `MAX_HLS_SEGMENTS` segments. No slot, no render, nothing stored: the
 * parts it links are the variants, rendered when a player asks for them.
 *
 * ## Invariants
 * - **Its ETag is the key's and the `exp`'s** (`playlistEtag`): two URLs that differ only in
 *   `exp` share the variant key but not the body (every part URL carries the `exp`), so they must
 *   not share an entity tag.
 * - **It never outlives its links' signing key for long**: `PLAYLIST_CACHE_CONTROL` is an hour
 *   (clamped to the URL's expiry), not a year, since the parts are signed with the current key.
 *
 * ## Races
 * None of its own: the probe is shared per source (`probeService`).
 *
 * ## Events
 * None.
 */

import { type Exchange, fail, type StageContext, send } from '../exchange.js';
import { type PartSigner, PlaylistTooLong, writePlaylist } from '../hls.js';
import { splitOptionsAndSource } from '../options.js';
import { INSECURE_SIGNATURE, splitPath } from '../signature.js';
import type { ProbeFindings } from './probeGate.js';
import type { RenderRoute, VariantDescription } from './variant.js';

/** Answers the playlist of `route` for the request's raw URL. */
export function playlistStage(
  x: Exchange,
  ctx: StageContext,
  route: RenderRoute,
  rawUrl: string,
  probe: ProbeFindings,
  variant: VariantDescription,
): void {
  const split = splitPath(rawUrl);
  if (!split.ok) throw new Error('playlistStage: the signature stage passed an unsplittable path');
  const parts = splitOptionsAndSource(split.rest);
  if (!parts.ok) throw new Error('playlistStage: the options stage passed a path without source');
  const { key, salt } = ctx.config;
  const insecure = split.signature === INSECURE_SIGNATURE;
  if (!insecure && (key === undefined || salt === undefined)) {
    throw new Error('playlistStage: a verified signature without a key');
  }
  const signer: PartSigner = insecure ? { insecure } : { insecure, key: key!, salt: salt! };
  let body: string;
  try {
    body = writePlaylist({
      requestPath: rawUrl.split('?', 1)[0]!,
      optionSegments: parts.optionSegments,
      source: parts.source,
      options: route.options,
      durationS: probe.media?.duration ?? 0,
      signer,
    });
  } catch (error) {
    if (!(error instanceof PlaylistTooLong)) throw error;
    fail(x, { type: 'source_too_long' });
    return;
  }
  x.cache = 'MISS';
  send(x, 200, { ...variant.headers, 'x-audio-proxy': 'MISS' }, body);
}
