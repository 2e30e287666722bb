/**
 * The headers that describe a variant itself (identical on GET and HEAD, MISS and HIT): its
 * content type, the immutable cache policy, and the download disposition built from `dl`.
 *
 * ## How `dl` becomes a filename
 * `dl` is carried in the path, so a client percent-escapes it (`dl:my%20song.mp3`), and the grammar
 * keeps it still escaped (that spelling is what the cache key hashes). For the header it is
 * percent-decoded **once**, as UTF-8; a value that does not decode (a malformed escape, invalid
 * UTF-8) is used exactly as written. The original AudioProxy put the still-escaped value in the
 * header (`filename="my%20song.mp3"`), which no user wants to save; decoding once is what the
 * documented "filename (URL-escaped)" means and is what makes the non-ASCII rule reachable.
 *
 * ## Invariants
 * - **The header value is printable ASCII.** Every character outside 0x20–0x7E (control bytes a
 *   decoded `%0A` could introduce included) becomes `_` in the quoted `filename`; `"` and `\` are
 *   backslash-escaped so the parameter cannot end early.
 * - **`filename*=UTF-8''…` appears exactly when the quoted name lost something**, carrying the
 *   decoded name with every byte outside RFC 3986 unreserved percent-encoded. Escaping is not
 *   loss, so a quote alone does not add it.
 *
 * ## Races
 * None: pure functions.
 *
 * ## Events
 * None.
 */
import type { Format, PeaksFormat } from './variant.js';

/** A rendered variant's URL describes its bytes completely, so it never goes stale. */
export const IMMUTABLE_CACHE_CONTROL = 'public, max-age=31536000, immutable, no-transform';

/** An HLS playlist (RFC 8216 §4); its init section and segments are fragmented MP4. */
export const HLS_PLAYLIST_CONTENT_TYPE = 'application/vnd.apple.mpegurl';

const AUDIO_CONTENT_TYPES: Readonly<Record<Exclude<Format, 'peaks'>, string>> = {
  mp3: 'audio/mpeg',
  opus: 'audio/ogg',
  ogg: 'audio/ogg',
  aac: 'audio/aac',
  m4a: 'audio/mp4',
  flac: 'audio/flac',
  wav: 'audio/wav',
  hls: 'audio/mp4',
};
const PEAKS_CONTENT_TYPES: Readonly<Record<PeaksFormat, string>> = {
  json: 'application/json',
  dat: 'application/octet-stream',
};

/** The `Content-Type` of a variant. Peaks default to JSON; `f:hls` without a part is the playlist. */
export function contentTypeFor(options: {
  readonly format: Format;
  readonly peaksFormat?: PeaksFormat;
  readonly hlsPart?: string | number;
}): string {
  if (options.format === 'peaks') return PEAKS_CONTENT_TYPES[options.peaksFormat ?? 'json'];
  if (options.format === 'hls' && options.hlsPart === undefined) return HLS_PLAYLIST_CONTENT_TYPE;
  const type = AUDIO_CONTENT_TYPES[options.format];
  if (type === undefined) throw new TypeError(`unknown format ${JSON.stringify(options.format)}`);
  return type;
}

/** The filename `dl` names: percent-decoded once as UTF-8, or as written if that fails. */
export function downloadFilename(dl: string): string {
  try {
    return decodeURIComponent(dl);
  } catch {
    return dl;
  }
}

/** RFC 8187 value-chars: unreserved stays, every other UTF-8 byte is `%XX`. */
function extValue(name: string): string {
  let out = '';
  for (const byte of Buffer.from(name, 'utf8')) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9\-._~]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** `Content-Disposition` for a `dl` value (still percent-encoded, as the options carry it). */
export function contentDisposition(dl: string): string {
  const name = downloadFilename(dl);
  const ascii = name.replace(/[^\x20-\x7e]/gu, '_');
  const quoted = ascii.replace(/[\\"]/g, (c) => `\\${c}`);
  const base = `attachment; filename="${quoted}"`;
  return ascii === name ? base : `${base}; filename*=UTF-8''${extValue(name)}`;
}
