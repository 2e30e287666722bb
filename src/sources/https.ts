/**
 * `https://` sources: hosts named in `AP_SOURCE_ALLOWLIST`, checked with one HEAD before anything
 * is probed or rendered, then handed to ffmpeg as the canonical URL.
 *
 * Trust: the system store, or the PEM bundle in `AP_S3_CA_BUNDLE` when it is set (one bundle for
 * every outbound TLS connection of the source side; a private CA usually signs both the object
 * store and the media hosts). ffmpeg and ffprobe verify against the same roots (`sources/trust.ts`:
 * `-tls_verify 1 -ca_file …`), so the HEAD and the read trust alike.
 *
 * ## Invariants
 * - **Unlisted means 404**, and so do missing (404/410), forbidden (401/403/451) and any redirect:
 *   a redirect would leave the allowlisted host, so it is never followed.
 * - **Only the origin's health is a 502**: connection refused or reset, DNS failure, TLS failure,
 *   timeout, or a 5xx answer.
 * - **A server that does not do HEAD (405/501) is not refused**: the size is then unknown and
 *   ffmpeg's own read decides.
 * - **A declared size over `AP_MAX_SRC_BYTES` is a 413** for renders (`enforceSize`).
 * - **No credentials or cookies are ever sent**: the request carries a fixed `User-Agent` only.
 *
 * ## Races
 * - *Content changes between HEAD and ffmpeg's GET*: ffmpeg reads what is there then; the URL
 *   names the source, not a version of it.
 *
 * ## Events
 * None.
 */
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import type { Config } from '../config.js';
import type { Failure } from '../http/errors.js';
import type { ResolvedSource } from '../http/handler.js';
import { authorizeRemote, type Source } from './parse.js';
import type { ResolveRemoteOptions } from './s3.js';
import { caFileFor, caFileInput } from './trust.js';

/** The HEAD's whole budget, in ms: a media host slower than this will not stream well either. */
export const HTTPS_HEAD_TIMEOUT_MS = 5_000;
/** Sockets per origin for HEAD checks; ffmpeg opens its own. */
const HTTPS_MAX_SOCKETS = 16;
const USER_AGENT = 'audio-proxy';

export type HttpsSource = Extract<Source, { scheme: 'https' }>;

export interface ResolveHttpsOptions extends ResolveRemoteOptions {
  /** PEM bundle replacing the system trust store. @default config.s3.caBundle */
  readonly caBundle?: string;
  /** @default HTTPS_HEAD_TIMEOUT_MS */
  readonly timeoutMs?: number;
}

const agents = new Map<string, Agent>();
const SYSTEM_TRUST = '';

function agentFor(caBundle: string | undefined): Agent {
  const id = caBundle ?? SYSTEM_TRUST;
  let agent = agents.get(id);
  if (agent === undefined) {
    agent = new Agent({
      keepAlive: true,
      maxSockets: HTTPS_MAX_SOCKETS,
      ...(caBundle !== undefined ? { ca: readFileSync(caBundle) } : {}),
    });
    agents.set(id, agent);
  }
  return agent;
}

type HeadResult =
  | { readonly type: 'status'; readonly status: number; readonly headers: Record<string, unknown> }
  | { readonly type: 'unreachable'; readonly reason: string };

function head(url: string, agent: Agent, timeoutMs: number): Promise<HeadResult> {
  return new Promise((resolve) => {
    const req = request(
      url,
      {
        method: 'HEAD',
        agent,
        headers: { 'user-agent': USER_AGENT, accept: '*/*' },
        signal: AbortSignal.timeout(timeoutMs),
      },
      (res) => {
        res.resume();
        resolve({ type: 'status', status: res.statusCode ?? 0, headers: res.headers });
      },
    );
    req.on('error', (error: NodeJS.ErrnoException) => {
      resolve({ type: 'unreachable', reason: error.code ?? error.name });
    });
    req.end();
  });
}

function failure(type: Failure['type']): { failure: Failure } {
  return { failure: { type } as Failure };
}

/** An `https://` source → the URL ffmpeg opens, or the failure to answer. */
export async function resolveHttpsSource(
  source: HttpsSource,
  canonical: string,
  config: Config,
  options: ResolveHttpsOptions = {},
): Promise<ResolvedSource | { failure: Failure }> {
  if (!authorizeRemote(source, config.sourceAllowlist)) return failure('not_found');
  const caBundle = options.caBundle ?? config.s3.caBundle;
  let agent: Agent;
  try {
    agent = agentFor(caBundle);
  } catch {
    return failure('not_configured'); // the bundle became unreadable after boot
  }
  const r = await head(source.url, agent, options.timeoutMs ?? HTTPS_HEAD_TIMEOUT_MS);
  if (r.type === 'unreachable') return failure('upstream_unavailable');
  const { status } = r;
  if (status >= 500) return failure('upstream_unavailable');
  const headOnly = status === 405 || status === 501;
  if (!headOnly && (status < 200 || status >= 300)) return failure('not_found');
  let size: number | undefined;
  let mtimeMs: number | undefined;
  if (!headOnly) {
    const length = r.headers['content-length'];
    if (typeof length === 'string' && /^\d+$/.test(length)) size = Number(length);
    const modified = r.headers['last-modified'];
    if (typeof modified === 'string') {
      const t = Date.parse(modified);
      if (Number.isFinite(t)) mtimeMs = t;
    }
  }
  if ((options.enforceSize ?? true) && size !== undefined && size > config.maxSrcBytes) {
    return failure('source_too_large');
  }
  return {
    source,
    canonical,
    input: { url: source.url, kind: 'https', ...caFileInput(caFileFor(caBundle)) },
    ...(size !== undefined ? { size } : {}),
    ...(mtimeMs !== undefined ? { mtimeMs } : {}),
  };
}
