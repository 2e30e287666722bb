/**
 * The `f:hls` playlist: an HLS VOD media playlist (RFC 8216) over one source and one set of
 * options, whose init section and segments are signed URLs of ordinary variants of the same
 * source and options (`hls_seg:init`, `hls_seg:N`). The playlist is written, never rendered: it
 * is a function of the URL, the signing key and the probe's duration.
 *
 * ## Invariants
 * - **A part URL is the playlist URL plus one option.** Its options are the playlist's own
 *   segments as the URL spelled them (presets, `exp` and all), then `hls_seg:PART`, then the
 *   source as given; so a part has the playlist's options, key rules and expiry, and a URL that
 *   expires keeps its `exp` in every part.
 * - **Signed like the request.** An `insecure` playlist links `insecure` parts; a signed one links
 *   parts signed with the current key (`AP_KEY`'s first), whatever key signed the playlist.
 * - **URIs are relative** (`../` up to the proxy's root), so the playlist works under whatever
 *   path prefix a CDN or a reverse proxy mounts the proxy at.
 * - **Durations come from the probe**, windowed by the trim: segment `i` covers
 *   `[start + i·len, min(start + (i+1)·len, end))`; the last is what remains. A trim past the
 *   source's end is one segment of the ~10 ms of silence any such trim renders.
 * - **VOD**: `#EXT-X-PLAYLIST-TYPE:VOD` and `#EXT-X-ENDLIST`; `#EXT-X-TARGETDURATION` is `len`,
 *   which no segment exceeds.
 *
 * ## Races
 * None: pure functions.
 *
 * ## Events
 * None.
 */
import { DEFAULT_HLS_SEGMENT_S, HLS_INIT_PART, type RenderOptions } from '../core/variant.js';
import { HLS_PART_KEY, MAX_HLS_SEGMENTS } from './optionTable.js';
import { INSECURE_SIGNATURE, sign } from './signature.js';

/** `#EXT-X-VERSION`: 7 is what fragmented-MP4 segments with `#EXT-X-MAP` ask for. */
export const HLS_PLAYLIST_VERSION = 7;
/** What a part of a trim past the source's end plays (the trim pad of `workers/argv.ts`). */
const EMPTY_WINDOW_S = 0.01;

/** How a part's path is signed: the request's `insecure`, or the current key and salt. */
export type PartSigner =
  | { readonly insecure: true }
  | { readonly insecure: false; readonly key: Uint8Array; readonly salt: Uint8Array };

export interface PlaylistInput {
  /** The request's path (no query): its depth sets how many `../` reach the proxy's root. */
  readonly requestPath: string;
  /** The playlist URL's option segments, as spelled (still escaped). */
  readonly optionSegments: readonly string[];
  /** The source from its marker on (`plain/…` or `enc/…`), still escaped. */
  readonly source: string;
  readonly options: RenderOptions;
  /** The source's duration in seconds (the probe's). */
  readonly durationS: number;
  readonly signer: PartSigner;
}

/** The segments' durations in seconds (each with millisecond precision), in order. */
export function segmentDurations(options: RenderOptions, durationS: number): number[] {
  const lenMs = (options.hlsSegmentS ?? DEFAULT_HLS_SEGMENT_S) * 1000;
  const startMs = Math.round((options.trim?.start ?? 0) * 1000);
  const sourceEndMs = Math.floor(durationS * 1000);
  const trimEndMs =
    options.trim?.duration === undefined
      ? sourceEndMs
      : Math.min(sourceEndMs, startMs + Math.round(options.trim.duration * 1000));
  const totalMs = trimEndMs - startMs;
  if (totalMs <= 0) return [EMPTY_WINDOW_S];
  const out: number[] = [];
  for (let at = 0; at < totalMs; at += lenMs) out.push(Math.min(lenMs, totalMs - at) / 1000);
  return out;
}

/** The relative URI of one part (`init` or a segment index). */
export function partUri(input: PlaylistInput, part: typeof HLS_INIT_PART | number): string {
  // A quoted-string in a playlist may not hold `"` (RFC 8216 §4.2): a source spelled with one
  // would end `#EXT-X-MAP:URI="…"` early. Percent-encoded it names the same source.
  const parts = [...input.optionSegments, `${HLS_PART_KEY}:${part}`, input.source];
  const rest = `/${parts.join('/')}`.replaceAll('"', '%22');
  const signature = input.signer.insecure
    ? INSECURE_SIGNATURE
    : sign(rest, input.signer.key, input.signer.salt);
  // The request's directory is every segment but the last; one `../` per segment climbs to `/`.
  const depth = input.requestPath.split('/').length - 2;
  return `${'../'.repeat(depth)}${signature}${rest}`;
}

/** Too many segments for one playlist (`MAX_HLS_SEGMENTS`): the caller answers 413. */
export class PlaylistTooLong extends Error {
  constructor(readonly segments: number) {
    super(`a playlist of ${segments} segments is longer than ${MAX_HLS_SEGMENTS}`);
  }
}

/** The playlist's text. Throws `PlaylistTooLong` past `MAX_HLS_SEGMENTS` segments. */
export function writePlaylist(input: PlaylistInput): string {
  const durations = segmentDurations(input.options, input.durationS);
  if (durations.length > MAX_HLS_SEGMENTS) throw new PlaylistTooLong(durations.length);
  const lines = [
    '#EXTM3U',
    `#EXT-X-VERSION:${HLS_PLAYLIST_VERSION}`,
    `#EXT-X-TARGETDURATION:${input.options.hlsSegmentS ?? DEFAULT_HLS_SEGMENT_S}`,
    '#EXT-X-MEDIA-SEQUENCE:0',
    '#EXT-X-PLAYLIST-TYPE:VOD',
    '#EXT-X-INDEPENDENT-SEGMENTS',
    `#EXT-X-MAP:URI="${partUri(input, HLS_INIT_PART)}"`,
  ];
  durations.forEach((d, i) => {
    lines.push(`#EXTINF:${d.toFixed(3)},`, partUri(input, i));
  });
  lines.push('#EXT-X-ENDLIST', '');
  return lines.join('\n');
}
