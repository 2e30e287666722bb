/**
 * Who may use the waiting room over HTTP: the credential a join must carry, and the session
 * cookie that names a ticket afterwards.
 *
 * **The join credential is a signed render path.** `POST /api/v1/queue/join?path=<P>`, where `P`
 * is the percent-encoded path of the render the ticket is for (`/<signature>/<options>/<source>`,
 * exactly as it would be requested). `P` is verified as the render itself would be: signature
 * (401 `invalid_signature`, the dev literal `insecure` only under `AP_ALLOW_INSECURE`), options
 * (422), then `exp` (410). A render URL is already what the operator mints for a listener, so
 * nothing new is signed, stored or rotated; and a query parameter keeps the join a CORS "simple"
 * request (no preflight, no custom header). The credential proves the operator wants that render
 * served, not who is asking: a signed URL is as public as the page that embeds it. What bounds the
 * harm of a leaked one is the room's share of the slots (`AP_WAITING_ROOM_SLOTS`), not this check.
 *
 * **The session id is the server's.** A cookie value is `<id>.<tag>`: 18 random bytes, and a
 * 128-bit HMAC of the id under a key drawn at process start. Only a value this process minted
 * names a session; anything else (a client-chosen id, an old process's cookie, a tampered tag) is
 * read as no session at all, so a join issues a fresh one instead of adopting it. The handler
 * goes further: a join that does not find the cookie's session holding a ticket mints a new
 * session for the new ticket, so a planted cookie never names the joiner's ticket. The key never
 * leaves memory: a restart ends every session, as it ends the in-memory room.
 *
 * ## Invariants
 * - **No ticket without a verified credential**: `joinCredential` is the only gate, and every
 *   refusal is a `Failure` from the error table (401/422/410).
 * - **A session id is never chosen by a client**: `read` returns an id only when its tag verifies
 *   (constant-time comparison over equal-length buffers).
 * - **The cookie is `HttpOnly; SameSite=Lax; Path=/`**, plus `Secure` when `AP_COOKIE_SECURE`.
 *
 * ## Races
 * None: pure functions and one immutable key.
 *
 * ## Events
 * None.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Failure } from '../core/failure.js';
import { isExpired } from './expiry.js';
import { NO_PRESETS, type OptionGrammar, parseRoute } from './options.js';
import type { SignatureConfig } from './signature.js';
import { splitPath, verifySignature } from './signature.js';

/** The waiting room's session cookie. */
export const SESSION_COOKIE = 'ap_session';
/** Random bytes in a session id: 144 bits, unguessable, 24 url-safe characters. */
const SESSION_ID_BYTES = 18;
/** Bytes of the HMAC tag kept: 128 bits is beyond forging by trial, 22 characters. */
const SESSION_TAG_BYTES = 16;
/** Bytes of the process's session key (HMAC-SHA256's block-size-safe 256 bits). */
const SESSION_KEY_BYTES = 32;
const COOKIE_VALUE = /^([A-Za-z0-9_-]{24})\.([A-Za-z0-9_-]{22})$/;

/** The query parameter that carries the join credential. */
export const JOIN_CREDENTIAL_PARAM = 'path';

export type JoinCredential =
  | { readonly ok: true }
  | { readonly ok: false; readonly failure: Failure };

const NOT_A_RENDER: JoinCredential = Object.freeze({
  ok: false,
  failure: { type: 'invalid_options', message: '`path` must be a signed render path' },
} as const);
const UNSIGNED: JoinCredential = Object.freeze({
  ok: false,
  failure: { type: 'invalid_signature' },
} as const);

/**
 * Checks the join credential in a raw request target (`/api/v1/queue/join?path=…`): the signed
 * render path, verified like the render (signature, options with `grammar`'s presets, `exp` at
 * `nowS`).
 */
export function joinCredential(
  rawUrl: string,
  signing: SignatureConfig,
  nowS: number,
  grammar: OptionGrammar = NO_PRESETS,
): JoinCredential {
  const q = rawUrl.indexOf('?');
  const path =
    q === -1 ? null : new URLSearchParams(rawUrl.slice(q + 1)).get(JOIN_CREDENTIAL_PARAM);
  if (!path) return UNSIGNED;
  const split = splitPath(path);
  if (!split.ok) return UNSIGNED;
  if (!verifySignature(split.signature, split.rest, signing).ok) return UNSIGNED;
  const parsed = parseRoute(split.rest, grammar);
  if (!parsed.ok) {
    return parsed.error === 'not_found'
      ? NOT_A_RENDER
      : { ok: false, failure: { type: 'invalid_options', message: parsed.message } };
  }
  if (parsed.endpoint !== 'render') return NOT_A_RENDER;
  if (isExpired(parsed.request.exp, nowS)) return { ok: false, failure: { type: 'expired' } };
  return { ok: true };
}

/** Mints and reads session cookies under one process-local key. */
export class SessionCookies {
  readonly #key: Buffer;

  constructor(key: Uint8Array = randomBytes(SESSION_KEY_BYTES)) {
    if (!(key instanceof Uint8Array) || key.length === 0) {
      throw new TypeError('key must be non-empty bytes');
    }
    this.#key = Buffer.from(key);
  }

  #tag(id: string): Buffer {
    return createHmac('sha256', this.#key).update(id).digest().subarray(0, SESSION_TAG_BYTES);
  }

  /** A fresh session id and the cookie value that names it. */
  mint(): { readonly session: string; readonly value: string } {
    const session = randomBytes(SESSION_ID_BYTES).toString('base64url');
    return { session, value: `${session}.${this.#tag(session).toString('base64url')}` };
  }

  /** The session a `Cookie` header names, if this process minted it; otherwise undefined. */
  read(cookieHeader: string | undefined): string | undefined {
    if (!cookieHeader) return undefined;
    for (const part of cookieHeader.split(';')) {
      const eq = part.indexOf('=');
      if (eq === -1 || part.slice(0, eq).trim() !== SESSION_COOKIE) continue;
      const match = COOKIE_VALUE.exec(part.slice(eq + 1).trim());
      if (!match) return undefined;
      const given = Buffer.from(match[2]!, 'base64url');
      const expected = this.#tag(match[1]!);
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
      // Re-encoding refuses the spellings that decode to the same bytes (as signatures do).
      return given.toString('base64url') === match[2] ? match[1] : undefined;
    }
    return undefined;
  }
}

/** The `Set-Cookie` value for a session cookie. */
export function sessionSetCookie(value: string, secure: boolean): string {
  return `${SESSION_COOKIE}=${value}; Path=/; HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}`;
}
