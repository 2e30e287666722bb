/**
 * URL signatures: splitting the raw path at the signature segment, verifying it, and signing.
 *
 * A signed URL is `/{signature}{rest}`. The signature is
 * `base64url(HMAC-SHA256(key, salt ‖ rest))` where `rest` is the raw request path after the
 * signature segment, leading `/` included, still percent-encoded, byte for byte. The query string
 * is not part of the path, so it is neither signed nor used.
 *
 * ## Invariants
 * - **The signed bytes are the wire bytes.** `splitPath` slices the raw path; nothing here decodes
 *   percent-escapes, re-encodes, or collapses `//` (`local://` contains one).
 * - **Exactly two spellings verify:** the 43 unpadded characters, or those 43 plus one `=`. The
 *   decoded MAC must re-encode to the supplied characters, which refuses over-padding and the three
 *   non-canonical final characters that decode to the same 32 bytes.
 * - **Every failure is the same failure.** A tampered path, a wrong key, malformed base64url, a
 *   missing key or salt and a refused `insecure` all return the one `INVALID_SIGNATURE` value.
 * - **The MAC comparison is constant-time** (`crypto.timingSafeEqual` over two 32-byte buffers).
 * - **Rotation: every configured pair verifies, the first alone signs** (`AP_KEY`/`AP_SALT` list
 *   several, imgproxy's model). A well-formed signature is checked against *every* pair, each
 *   with `timingSafeEqual`, and the verdicts are OR-ed without an early exit, so the time spent
 *   depends on how many pairs are configured (which an observer may learn; it is not secret in
 *   any useful sense) and never on which pair matched or on how much of a MAC did.
 * - **`insecure` passes only when allowed**, and allowing it never weakens a real signature.
 *
 * ## Races
 * None: pure functions over their arguments; the key material is passed in, never read globally.
 *
 * ## Events
 * None. Callers count outcomes.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Config } from '../config/index.js';
import { rawBytes } from '../core/rawPath.js';

/** Characters of an unpadded base64url HMAC-SHA256 (32 bytes → 43 characters). */
const SIGNATURE_CHARS = 43;
/** Bytes of an HMAC-SHA256. */
const MAC_BYTES = 32;
/** The development-only literal accepted when `AP_ALLOW_INSECURE` is truthy. */
export const INSECURE_SIGNATURE = 'insecure';

const BASE64URL_43 = /^[A-Za-z0-9_-]{43}$/;

/**
 * Key material, hex-decoded from `AP_KEY`/`AP_SALT`: the signing pair, and the rotated pairs that
 * still verify. Either half of the signing pair absent means nothing verifies.
 */
export interface SignatureConfig {
  readonly key: Uint8Array | undefined;
  readonly salt: Uint8Array | undefined;
  /** The pairs after the first (`Config.rotatedKeys`): they verify, never sign. */
  readonly rotated?: readonly { readonly key: Uint8Array; readonly salt: Uint8Array }[];
  readonly allowInsecure: boolean;
}

/** What `verifySignature` needs of a loaded configuration: every pair, and `insecure`. */
export function signatureConfigOf(config: Config): SignatureConfig {
  const { key, salt, rotatedKeys, allowInsecure } = config;
  return { key, salt, rotated: rotatedKeys, allowInsecure };
}

export type SplitPathResult =
  | { readonly ok: true; readonly signature: string; readonly rest: string }
  /** `no_route`: the path has no segment at all (`/`): the router's 404. */
  | { readonly ok: false; readonly reason: 'no_route' }
  /** `invalid_signature`: a single segment (`/nope`): a signature with nothing signed, a 401. */
  | { readonly ok: false; readonly reason: 'invalid_signature' };

export type VerifyResult =
  | { readonly ok: true; readonly insecure: boolean }
  | { readonly ok: false; readonly error: 'invalid_signature' };

/** The one failure value every refusal returns. */
export const INVALID_SIGNATURE: VerifyResult = Object.freeze({
  ok: false,
  error: 'invalid_signature',
} as const);

const NO_ROUTE: SplitPathResult = Object.freeze({ ok: false, reason: 'no_route' } as const);
const SINGLE_SEGMENT: SplitPathResult = Object.freeze({
  ok: false,
  reason: 'invalid_signature',
} as const);

/**
 * Splits a raw request target (as in `req.url`; the query, if any, is dropped) into the signature
 * segment and the signed rest. `/sig/a//b` → `{ signature: 'sig', rest: '/a//b' }`.
 */
export function splitPath(rawPath: string): SplitPathResult {
  if (typeof rawPath !== 'string') throw new TypeError('rawPath must be a string');
  const q = rawPath.indexOf('?');
  const path = q === -1 ? rawPath : rawPath.slice(0, q);
  // Only origin-form targets reach a route; `/`, `//` and `` name no resource at all.
  if (!path.startsWith('/') || /^\/*$/.test(path)) return NO_ROUTE;
  const end = path.indexOf('/', 1);
  if (end === -1) return SINGLE_SEGMENT;
  return { ok: true, signature: path.slice(1, end), rest: path.slice(end) };
}

function mac(rest: string, key: Uint8Array, salt: Uint8Array): Buffer {
  return createHmac('sha256', key).update(salt).update(rawBytes(rest)).digest();
}

/**
 * Signs `rest` (a raw byte-string path starting with `/`), returning unpadded base64url.
 * Throws `TypeError` for a rest without its leading `/`: it could never verify.
 */
export function sign(rest: string, key: Uint8Array, salt: Uint8Array): string {
  if (typeof rest !== 'string' || !rest.startsWith('/')) {
    throw new TypeError('rest must start with "/" (everything after the signature segment)');
  }
  if (!(key instanceof Uint8Array) || key.length === 0) {
    throw new TypeError('key must be non-empty bytes');
  }
  if (!(salt instanceof Uint8Array)) throw new TypeError('salt must be bytes');
  return mac(rest, key, salt).toString('base64url');
}

/** Strict decode: the two accepted spellings only, canonical final character, 32 bytes. */
function decodeSignature(signature: string): Buffer | undefined {
  let body = signature;
  if (body.length === SIGNATURE_CHARS + 1) {
    if (!body.endsWith('=')) return undefined;
    body = body.slice(0, SIGNATURE_CHARS);
  }
  if (!BASE64URL_43.test(body)) return undefined;
  const bytes = Buffer.from(body, 'base64url');
  if (bytes.length !== MAC_BYTES) return undefined;
  // Node's decoder ignores the unused low bits of the last character; re-encoding is what
  // refuses the three other characters that decode to the same bytes.
  if (bytes.toString('base64url') !== body) return undefined;
  return bytes;
}

/**
 * Verifies `signature` over `rest` with the configured key material: the signing pair, then each
 * rotated pair, all of them checked (no early exit), so which pair matched leaves no trace in
 * the time taken.
 */
export function verifySignature(
  signature: string,
  rest: string,
  config: SignatureConfig,
): VerifyResult {
  if (signature === INSECURE_SIGNATURE) {
    return config.allowInsecure ? { ok: true, insecure: true } : INVALID_SIGNATURE;
  }
  const { key, salt } = config;
  if (key === undefined || salt === undefined || key.length === 0) return INVALID_SIGNATURE;
  const provided = decodeSignature(signature);
  if (provided === undefined) return INVALID_SIGNATURE;
  let matched = Number(timingSafeEqual(provided, mac(rest, key, salt)));
  for (const pair of config.rotated ?? []) {
    // A bitwise OR, not `||`: every pair is computed and compared, whichever one matched.
    matched |= Number(timingSafeEqual(provided, mac(rest, pair.key, pair.salt)));
  }
  return matched === 1 ? { ok: true, insecure: false } : INVALID_SIGNATURE;
}
