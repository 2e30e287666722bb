/**
 * The source segment: its two encodings, decoding exactly once, dispatch by scheme, canonical
 * identity, and authorisation.
 *
 * `plain/{source}` carries the source percent-escaped; `enc/{base64url(source)}` carries it
 * base64url-encoded (padded or not) so nested URLs never need escaping by hand. Both decode to one
 * source string, and from there share one path: vet, split the scheme, hand the body to its type.
 * Both spellings of one source therefore produce the same typed source and the same canonical
 * string, which is the second half of the cache key.
 *
 * ## Invariants
 * - **Decode fully, then interpret, exactly once.** `%2E%2E` is judged as `..`, and a literal `%`
 *   is written `%25`. A malformed escape is refused rather than passed through (passing it through
 *   would give one source two spellings and one variant two keys). `+` is a literal plus.
 * - **Every refusal is the same `NOT_FOUND` value**: empty, invalid UTF-8, control/format/separator
 *   code points (by Unicode category: NUL, U+0085, U+2028, U+202E…), unknown schemes (`http://`,
 *   `ftp://`), userinfo, over-long names, a disallowed bucket, or a host on a port its allowlist
 *   entry does not name. No refusal is an oracle.
 * - **Canonical strings fold spellings, never objects.** `local://` drops empty and `.` segments
 *   (never `..`, never the root); `s3://` keeps the key's bytes exactly; `https://` folds case, a
 *   trailing root dot, `:443`, an empty path, an empty query, the fragment and IPv6 spelling, but
 *   never the URL's own percent-encoding or dot segments (only the origin knows those).
 *
 * ## Races
 * Parsing is pure. `authorizeSource` reads the filesystem for local sources; see `local.ts`.
 *
 * ## Events
 * None.
 */
import { isIPv6 } from 'node:net';
import { rawBytes } from '../core/rawPath.js';
import type { ParsedSource, Source } from '../core/source.js';
import { isAllowed } from './allowlist.js';
import { authorizeLocal } from './local.js';

/** The one refusal value. */
export const SOURCE_NOT_FOUND = Object.freeze({ ok: false, error: 'not_found' } as const);

const MAX_BUCKET_BYTES = 63; // S3's own maximum bucket name
const MAX_KEY_BYTES = 1024; // S3's own maximum key
const MAX_URL_BYTES = 2048; // the de-facto interoperable URL maximum
const MAX_HOST_BYTES = 253; // DNS's limit on a name
const HTTPS_DEFAULT_PORT = 443;
const MAX_PORT = 65_535;

const MALFORMED_ESCAPE = /%(?![0-9A-Fa-f]{2})/;
const BASE64URL = /^([A-Za-z0-9_-]*)(={0,2})$/;
const CONTROL_CLASS = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u;
const SCHEME_PREFIX = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//;
const REG_NAME = /^[A-Za-z0-9\-._~!$&'()*+,;=]+$/;
/** RFC 3986 path/query/fragment characters, with well-formed escapes. */
const URI_TAIL = /^(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})*$/;
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

function utf8(bytes: Uint8Array): string | undefined {
  try {
    return UTF8.decode(bytes);
  } catch {
    return undefined;
  }
}

function hexValue(code: number): number {
  if (code >= 0x30 && code <= 0x39) return code - 0x30;
  return (code | 0x20) - 0x61 + 10;
}

/** Percent-decodes a raw byte string once. Undefined on a malformed escape or invalid UTF-8. */
export function percentDecodeOnce(raw: string): string | undefined {
  if (MALFORMED_ESCAPE.test(raw)) return undefined;
  const input = rawBytes(raw);
  const out = Buffer.allocUnsafe(input.length);
  let n = 0;
  for (let i = 0; i < input.length; i++) {
    const b = input[i]!;
    if (b === 0x25) {
      out[n++] = (hexValue(input[i + 1]!) << 4) | hexValue(input[i + 2]!);
      i += 2;
    } else {
      out[n++] = b;
    }
  }
  return utf8(out.subarray(0, n));
}

/** Decodes base64url with or without padding, strictly. Undefined when it is not base64url. */
function base64urlDecode(payload: string): string | undefined {
  const m = BASE64URL.exec(payload);
  if (m === null) return undefined;
  const [, body, padding] = m as unknown as [string, string, string];
  if (padding !== '' && (body.length + padding.length) % 4 !== 0) return undefined;
  if (body.length % 4 === 1) return undefined;
  return utf8(Buffer.from(body, 'base64url'));
}

/** `plain/…` or `enc/…` → the decoded source string, or undefined. */
export function decodeSourceString(sourceString: string): string | undefined {
  if (sourceString.startsWith('plain/')) return percentDecodeOnce(sourceString.slice(6));
  if (sourceString.startsWith('enc/')) return base64urlDecode(sourceString.slice(4));
  return undefined;
}

function byteLength(s: string): number {
  return Buffer.byteLength(s, 'utf8');
}

function parseLocal(body: string): ParsedSource {
  // A leading `/` survives so an absolute path stays absolute and is refused by authorisation,
  // never quietly reinterpreted as relative.
  const path = body.startsWith('/')
    ? body
    : body
        .split('/')
        .filter((s) => s !== '' && s !== '.')
        .join('/');
  if (path === '') return SOURCE_NOT_FOUND;
  return { ok: true, source: { scheme: 'local', path }, canonical: `local://${path}` };
}

function parseS3(body: string): ParsedSource {
  const slash = body.indexOf('/');
  if (slash === -1) return SOURCE_NOT_FOUND;
  const bucket = body.slice(0, slash);
  const key = body.slice(slash + 1);
  if (bucket === '' || key === '') return SOURCE_NOT_FOUND;
  if (byteLength(bucket) > MAX_BUCKET_BYTES || byteLength(key) > MAX_KEY_BYTES) {
    return SOURCE_NOT_FOUND;
  }
  return { ok: true, source: { scheme: 's3', bucket, key }, canonical: `s3://${bucket}/${key}` };
}

/** Host and port of an authority, host normalised and bracketless. Undefined when invalid. */
function parseAuthority(authority: string): { host: string; port: string } | undefined {
  if (authority.includes('@')) return undefined; // userinfo: credentials in a URL end up in logs
  let host: string;
  let portText: string;
  if (authority.startsWith('[')) {
    const close = authority.indexOf(']');
    if (close === -1) return undefined;
    const literal = authority.slice(1, close);
    const after = authority.slice(close + 1);
    if (after !== '' && !after.startsWith(':')) return undefined;
    if (!isIPv6(literal) || literal.includes('%')) return undefined;
    host = new URL(`https://[${literal}]/`).hostname.slice(1, -1);
    portText = after.slice(1);
  } else {
    const colon = authority.lastIndexOf(':');
    const name = colon === -1 ? authority : authority.slice(0, colon);
    portText = colon === -1 ? '' : authority.slice(colon + 1);
    if (!REG_NAME.test(name)) return undefined;
    // Case folded, one trailing root dot stripped. Dotted quads stay as written: folding lenient
    // spellings (`01.2.3.4`) would let one allowlist entry admit two subjects.
    host = name.toLowerCase().replace(/\.$/, '');
    if (host === '' || byteLength(host) > MAX_HOST_BYTES) return undefined;
  }
  if (portText !== '') {
    if (!/^\d+$/.test(portText)) return undefined;
    const port = Number(portText);
    if (port > MAX_PORT) return undefined;
    portText = port === HTTPS_DEFAULT_PORT ? '' : String(port);
  }
  return { host, port: portText };
}

function parseHttps(body: string): ParsedSource {
  if (byteLength(body) + 'https://'.length > MAX_URL_BYTES) return SOURCE_NOT_FOUND;
  // The resolver strips exactly one scheme; a second one would be read as a host named `http`.
  if (SCHEME_PREFIX.test(body)) return SOURCE_NOT_FOUND;
  const authorityEnd = body.search(/[/?#]/);
  const authority = authorityEnd === -1 ? body : body.slice(0, authorityEnd);
  const tail = authorityEnd === -1 ? '' : body.slice(authorityEnd);
  const parsed = parseAuthority(authority);
  if (parsed === undefined) return SOURCE_NOT_FOUND;

  const hash = tail.indexOf('#');
  const beforeFragment = hash === -1 ? tail : tail.slice(0, hash);
  const fragment = hash === -1 ? '' : tail.slice(hash + 1);
  const qmark = beforeFragment.indexOf('?');
  const path = qmark === -1 ? beforeFragment : beforeFragment.slice(0, qmark);
  const query = qmark === -1 ? '' : beforeFragment.slice(qmark + 1);
  if (!URI_TAIL.test(path) || !URI_TAIL.test(query) || !URI_TAIL.test(fragment)) {
    return SOURCE_NOT_FOUND;
  }
  const hostPart = parsed.host.includes(':') ? `[${parsed.host}]` : parsed.host;
  const url =
    `https://${hostPart}${parsed.port === '' ? '' : `:${parsed.port}`}` +
    `${path === '' ? '/' : path}${query === '' ? '' : `?${query}`}`;
  return { ok: true, source: { scheme: 'https', url, host: parsed.host }, canonical: url };
}

/**
 * Parses the raw source string (from the `plain`/`enc` marker on, still escaped, exactly the bytes
 * the signature covered) into a typed source and its canonical identity.
 */
export function parseSource(sourceString: string): ParsedSource {
  const decoded = decodeSourceString(sourceString);
  if (decoded === undefined || decoded === '' || CONTROL_CLASS.test(decoded)) {
    return SOURCE_NOT_FOUND;
  }
  const sep = decoded.indexOf('://');
  if (sep === -1) return SOURCE_NOT_FOUND;
  const scheme = decoded.slice(0, sep).toLowerCase();
  const body = decoded.slice(sep + 3);
  switch (scheme) {
    case 'local':
      return parseLocal(body);
    case 's3':
      return parseS3(body);
    case 'https':
      return parseHttps(body);
    default:
      return SOURCE_NOT_FOUND;
  }
}

/** What authorisation reads from configuration. */
export interface SourcePolicy {
  /** Parsed `AP_SOURCE_ALLOWLIST` (see `parseAllowlist`); empty when unset. */
  readonly allowlist: readonly string[];
  /** `AP_LOCAL_ROOT`; undefined disables local sources. */
  readonly localRoot: string | undefined;
}

/** The port a canonical `https://` source URL connects to (443 unless it names one). */
export function httpsPort(url: string): number {
  const port = new URL(url).port;
  return port === '' ? HTTPS_DEFAULT_PORT : Number(port);
}

/** The allowlist verdict for remote sources (synchronous; no I/O): bucket, or host and port. */
export function authorizeRemote(
  source: Exclude<Source, { scheme: 'local' }>,
  allowlist: readonly string[],
): boolean {
  return source.scheme === 's3'
    ? isAllowed('bucket', source.bucket, allowlist)
    : isAllowed('host', source.host, allowlist, httpsPort(source.url));
}

/**
 * May this source be served? Local: confinement under the root, independent of whether the file
 * exists. Remote: the allowlist. Every refusal is `SOURCE_NOT_FOUND`.
 */
export async function authorizeSource(
  source: Source,
  policy: SourcePolicy,
): Promise<{ readonly ok: true } | typeof SOURCE_NOT_FOUND> {
  if (source.scheme === 'local') {
    const verdict = await authorizeLocal(policy.localRoot, source.path);
    return verdict.ok ? { ok: true } : SOURCE_NOT_FOUND;
  }
  return authorizeRemote(source, policy.allowlist) ? { ok: true } : SOURCE_NOT_FOUND;
}
