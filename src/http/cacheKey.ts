/**
 * Variant identity and its validators: the cache key, the render ETag, `If-None-Match`, and the
 * `/info` ETag.
 *
 * A variant is exactly its normalised options plus the source it was rendered from, so the key is
 * `lowercase-hex(SHA-256(normalised ‖ "\n" ‖ canonical-source))`. The render ETag is that key in
 * double quotes: a pure function of the URL, which is why a revalidation can be answered before
 * any storage access and why a client can compute it without asking.
 *
 * ## Invariants
 * - **The two halves cannot bleed into each other.** A normalised options string never contains a
 *   newline (control bytes are refused by the grammar), so `\n` separates them unambiguously.
 * - **Bytes hashed are the bytes the URL carried.** The options half is a raw-path byte string
 *   (hashed byte for byte); the canonical source is decoded text (hashed as UTF-8).
 * - **`*` never matches.** Answering it would need to know the variant exists, which is the
 *   storage access a 304 exists to skip.
 *
 * ## Races
 * None: pure functions.
 *
 * ## Events
 * None.
 */
import { createHash } from 'node:crypto';
import { rawBytes } from '../core/rawPath.js';

const SEPARATOR = Buffer.from('\n');

/** The variant's cache key: 64 lowercase hex characters. */
export function cacheKey(normalized: string, canonicalSource: string): string {
  if (normalized.includes('\n')) {
    throw new RangeError('normalised options cannot contain a newline');
  }
  return createHash('sha256')
    .update(rawBytes(normalized))
    .update(SEPARATOR)
    .update(Buffer.from(canonicalSource, 'utf8'))
    .digest('hex');
}

/** The render ETag: the key, quoted (an entity-tag is a quoted-string). */
export function etagOf(key: string): string {
  return `"${key}"`;
}

/**
 * The ETag of an answer streamed from a render whose stored variant will differ from it inside
 * one header frame (an mp3: its Xing/Info frame is completed at commit, `workers/xingFrame.ts`):
 * the same key, marked weak (RFC 9110 §8.8.1: a strong tag promises identical bytes). A weak tag
 * still matches `If-None-Match` (weak comparison), never `If-Range` (strong comparison), so a
 * client may revalidate its streamed copy but never splice ranges of it with the HIT's.
 */
export function weakEtagOf(etag: string): string {
  return etag.startsWith('W/') ? etag : `W/${etag}`;
}

/** Whether a render of `format` streams bytes that differ from its stored variant's (`weakEtagOf`). */
export function streamsWeakEtag(format: string): boolean {
  return format === 'mp3';
}

/**
 * Whether an `If-None-Match` header (a comma list, possibly repeated) names `etag`. The weak
 * prefix `W/` is stripped (weak comparison); `*` is ignored.
 */
export function ifNoneMatchMatches(
  header: string | readonly string[] | undefined,
  etag: string,
): boolean {
  if (header === undefined) return false;
  const values = typeof header === 'string' ? [header] : header;
  for (const value of values) {
    for (const raw of value.split(',')) {
      const candidate = raw.trim();
      const tag = candidate.startsWith('W/') ? candidate.slice(2) : candidate;
      if (tag === etag) return true;
    }
  }
  return false;
}

/**
 * The `/info` ETag: `"sha256hex(canonical ‖ "\n" ‖ material)"`, quoted. `material` is the
 * backend's version marker (for local files, `localEtagMaterial` in `sources/local.ts`).
 */
export function infoEtag(canonicalSource: string, material: string): string {
  const digest = createHash('sha256')
    .update(Buffer.from(canonicalSource, 'utf8'))
    .update(SEPARATOR)
    .update(Buffer.from(material, 'utf8'))
    .digest('hex');
  return `"${digest}"`;
}
