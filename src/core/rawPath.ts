/**
 * The raw request path as bytes: the one representation the signature, the cache key and the
 * source decoder all agree on.
 *
 * Node hands the request target over in `req.url` as a *byte string*: one UTF-16 code unit per
 * byte, decoded as latin1. (Node 20's parser refuses request targets carrying bytes >= 0x80 with
 * `HPE_INVALID_URL`, so in practice every path that reaches us is ASCII, and percent-escapes are
 * how anything else travels.) This module is where that convention is written down once.
 *
 * ## Invariants
 * - **A raw path is a byte string.** Every code unit is <= 0xFF. A string carrying anything wider
 *   did not come off the wire; passing one is a programmer error and throws `TypeError`.
 * - **Bytes are never re-encoded.** `rawBytes` maps code units to bytes one to one, so a path
 *   signed as bytes verifies as the same bytes.
 * - **What is signed is what is sent.** `toUrlPath` turns text into the ASCII path a client sends
 *   (percent-encoding everything outside `pchar`); signing that path is what `audio-proxy sign`
 *   does, so a path with spaces or non-ASCII verifies.
 *
 * ## Races
 * None: pure functions.
 *
 * ## Events
 * None.
 */

const WIDER_THAN_A_BYTE = /[\u0100-\uffff]/;

/** True when every code unit of `s` fits in a byte. */
export function isByteString(s: string): boolean {
  return !WIDER_THAN_A_BYTE.test(s);
}

/** The bytes of a raw path (a byte string). Throws `TypeError` for wider code units. */
export function rawBytes(s: string): Buffer {
  if (typeof s !== 'string' || !isByteString(s)) {
    throw new TypeError(
      'raw path must be a byte string (one code unit per byte, as in req.url); use toRawPath() for text',
    );
  }
  return Buffer.from(s, 'latin1');
}

/**
 * Text (e.g. typed on a command line) → the byte string a client would send for it, byte for byte:
 * UTF-8 encoded, one code unit per byte. ASCII text is returned unchanged.
 */
export function toRawPath(text: string): string {
  return Buffer.from(text, 'utf8').toString('latin1');
}

/**
 * What a URL path may carry as is (RFC 3986 `pchar` and `/`). Everything else is percent-encoded
 * by `toUrlPath`: space, `%`, `?` and `#` (which would end the path), `\` (which WHATWG clients
 * turn into `/`), quotes, brackets, controls and every non-ASCII character.
 */
const URL_PATH_SAFE = /[A-Za-z0-9\-._~!$&'()*+,;=:@/]/;

/**
 * Text (e.g. a path typed on a command line, `/f:opus/plain/local://my song.flac`) → the ASCII
 * path a client sends for it: UTF-8, then every byte outside `pchar` and `/` percent-encoded.
 * The server decodes the source segment exactly once (sources/parse.ts), so the source it sees
 * is the text given here; a literal `%` becomes `%25`. Sign this, not the text.
 */
export function toUrlPath(text: string): string {
  let out = '';
  for (const ch of text) {
    if (URL_PATH_SAFE.test(ch)) {
      out += ch;
      continue;
    }
    for (const byte of Buffer.from(ch, 'utf8')) {
      out += `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
    }
  }
  return out;
}

/** An already-encoded path a client can send as is: `pchar`, `/` and well-formed escapes only. */
export const ENCODED_URL_PATH = /^(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]|%[0-9A-Fa-f]{2})*$/;
