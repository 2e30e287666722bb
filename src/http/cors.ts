/**
 * CORS for the main listener, gated on `AP_ALLOW_ORIGIN`: the headers every response carries when
 * it is set, the preflight answer, and the boot-time validation of the value.
 *
 * Unset, this module contributes nothing: no `Access-Control-*` header anywhere, and `OPTIONS`
 * stays the 404 every non-GET method is. Set, every main-listener response, errors included, names
 * the origin and exposes the headers a page needs to act on (`Retry-After` on a 429 is useless to
 * a page the CORS filter hides it from).
 *
 * ## Invariants
 * - **`*` never varies.** A response identical for every origin must not teach a cache to key on
 *   `Origin`; an exact origin always adds `Vary: Origin`, merged into any existing `Vary`.
 * - **The preflight echoes only what is a header name.** `Access-Control-Request-Headers` entries
 *   that are not RFC 9110 tokens are dropped; none left, no `Allow-Headers`.
 * - **The preflight does not look at the signature.** It carries no credentials, and answering it
 *   confirms only what the operator already said by naming the origin.
 * - **The configured origin is an origin:** a lowercase scheme and host, no path, no trailing
 *   slash, no default port; checked once at boot, never per request.
 *
 * ## Races
 * None: pure functions of configuration and request headers.
 *
 * ## Events
 * None.
 */

/** What a reading page may see beyond the CORS-safelisted response headers. */
export const EXPOSE_HEADERS = 'x-audio-proxy, retry-after, accept-ranges, content-range, etag';
/** The methods the signed URL space answers; OPTIONS is the question, not an answer. */
export const ALLOW_METHODS = 'GET, HEAD';
const PREFLIGHT_MAX_AGE_S = 86_400; // a day: Chromium's ceiling; the answer only changes on reboot
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const ORIGIN = /^([a-z][a-z0-9+.-]*):\/\/([a-z0-9.-]+|\[[0-9a-f:.]+\])(?::(\d{1,5}))?$/;
const DEFAULT_PORTS: Readonly<Record<string, string>> = { http: '80', https: '443' };

/** Adds `field` to a `Vary` value unless it (or `*`) is already there. */
export function mergeVary(existing: string | undefined, field: string): string {
  const current = existing?.trim() ?? '';
  if (current === '') return field;
  const entries = current.split(',').map((e) => e.trim().toLowerCase());
  if (entries.includes('*') || entries.includes(field.toLowerCase())) return current;
  return `${current}, ${field}`;
}

/**
 * The headers to add to a main-listener response (errors included). Empty when CORS is off.
 * `existingVary` is the response's own `Vary`, if any; the returned `vary` replaces it.
 */
export function corsHeaders(
  allowOrigin: string | undefined,
  existingVary?: string,
): Record<string, string> {
  if (allowOrigin === undefined) return {};
  const headers: Record<string, string> = {
    'access-control-allow-origin': allowOrigin,
    'access-control-expose-headers': EXPOSE_HEADERS,
  };
  if (allowOrigin !== '*') headers.vary = mergeVary(existingVary, 'Origin');
  return headers;
}

/** The token-valid entries of `Access-Control-Request-Headers`, joined with `, `. */
export function allowedRequestHeaders(
  requested: string | readonly string[] | undefined,
): string | undefined {
  if (requested === undefined) return undefined;
  const values = typeof requested === 'string' ? [requested] : requested;
  const tokens = values
    .flatMap((v) => v.split(','))
    .map((e) => e.trim())
    .filter((e) => TOKEN.test(e));
  return tokens.length === 0 ? undefined : tokens.join(', ');
}

export interface PreflightResponse {
  readonly status: 204;
  readonly headers: Readonly<Record<string, string>>;
}

/**
 * The answer to `OPTIONS` on any path: 204, no body. `undefined` when CORS is off (the caller
 * answers the ordinary 404).
 */
export function preflightResponse(
  allowOrigin: string,
  requestHeaders: string | readonly string[] | undefined,
): PreflightResponse;
export function preflightResponse(
  allowOrigin: string | undefined,
  requestHeaders: string | readonly string[] | undefined,
): PreflightResponse | undefined;
export function preflightResponse(
  allowOrigin: string | undefined,
  requestHeaders: string | readonly string[] | undefined,
): PreflightResponse | undefined {
  if (allowOrigin === undefined) return undefined;
  const headers: Record<string, string> = {
    ...corsHeaders(allowOrigin),
    'access-control-allow-methods': ALLOW_METHODS,
    'access-control-max-age': String(PREFLIGHT_MAX_AGE_S),
  };
  const allowed = allowedRequestHeaders(requestHeaders);
  if (allowed !== undefined) headers['access-control-allow-headers'] = allowed;
  return { status: 204, headers };
}

/**
 * Boot validation of `AP_ALLOW_ORIGIN`. Unset or blank → CORS off. `*` or an exact origin →
 * accepted as written. Anything else → a reason naming what is wrong.
 */
export function parseAllowOrigin(
  raw: string | undefined,
): { ok: true; value: string | undefined } | { ok: false; reason: string } {
  if (raw === undefined || raw.trim() === '') return { ok: true, value: undefined };
  if (raw === '*') return { ok: true, value: '*' };
  const m = ORIGIN.exec(raw);
  if (m === null) {
    return {
      ok: false,
      reason: `AP_ALLOW_ORIGIN must be "*" or an origin like https://app.example.com (lowercase scheme and host, no path or trailing slash), got ${JSON.stringify(raw)}`,
    };
  }
  const [, scheme, , port] = m;
  if (port !== undefined) {
    const n = Number(port);
    if (n < 1 || n > 65_535 || String(n) !== port) {
      return { ok: false, reason: `AP_ALLOW_ORIGIN has an invalid port: ${JSON.stringify(raw)}` };
    }
    if (DEFAULT_PORTS[scheme!] === port) {
      return {
        ok: false,
        reason: `AP_ALLOW_ORIGIN must omit the default port (a browser's Origin never carries it): ${JSON.stringify(raw)}`,
      };
    }
  }
  return { ok: true, value: raw };
}
