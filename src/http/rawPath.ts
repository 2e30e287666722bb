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
