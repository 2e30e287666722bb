/**
 * `https://` sources: hosts (and ports) named in `AP_SOURCE_ALLOWLIST`, checked with one HEAD
 * before anything is probed or rendered, then read by the proxy itself into a spool
 * (`spool.ts`) that ffmpeg gets as a descriptor. ffmpeg never sees the URL.
 *
 * The host is resolved once per resolution (`address.ts`): the address is judged (loopback,
 * private, link-local… refused unless `AP_SOURCE_ALLOW_PRIVATE`) and pinned, so the HEAD and the
 * GET connect to the address that was judged, and a name that re-resolves cannot move the read.
 *
 * Trust: Node's root store, or the PEM bundle in `AP_S3_CA_BUNDLE` when it is set (one bundle
 * for every outbound TLS connection of the source side; a private CA usually signs both the
 * object store and the media hosts). Only the proxy speaks TLS: ffmpeg reads a local spool.
 *
 * ## Invariants
 * - **Unlisted means 404**, and so do a host on an unlisted port, a host resolving to a
 *   non-public address, missing (404/410), forbidden (401/403/451) and any redirect, on the HEAD
 *   and on the GET alike: a redirect would leave the allowlisted origin, so it is never followed.
 * - **Only the origin's health is a 502**: connection refused or reset, DNS failure, TLS failure,
 *   timeout, or a 5xx answer.
 * - **A server that does not do HEAD (405/501) is not refused**: the size is then unknown and
 *   the spool's byte counter decides.
 * - **Every byte read is counted against `AP_MAX_SRC_BYTES`** (413), whatever HEAD or
 *   `Content-Length` claimed; a declared size over it is a 413 before any GET (renders only; the
 *   spool's counter applies to `/info` too, since the proxy stores what it reads).
 * - **No credentials or cookies are ever sent**: the request carries a fixed `User-Agent` only.
 *
 * ## Races
 * - *Content changes between HEAD and GET*: the GET's bytes are what is probed and rendered; the
 *   URL names the source, not a version of it. A probe and its render share one GET when the
 *   render starts within `SPOOL_LINGER_MS`.
 *
 * ## Events
 * None.
 */
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import type { Config } from '../config/index.js';
import type { Failure } from '../core/failure.js';
import type { ResolvedSource, Source } from '../core/source.js';
import { type PinnedAddress, pinAddress, pinnedLookup } from './address.js';
import { authorizeRemote } from './parse.js';
import type { ResolveRemoteOptions } from './s3.js';
import { type FillOutcome, openSpooled, type SpoolSink } from './spool.js';

/** The HEAD's whole budget, in ms: a media host slower than this will not stream well either. */
export const HTTPS_HEAD_TIMEOUT_MS = 5_000;
/** Sockets per origin for HEAD checks and spool GETs. */
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

function head(
  url: string,
  agent: Agent,
  pinned: PinnedAddress,
  timeoutMs: number,
): Promise<HeadResult> {
  return new Promise((resolve) => {
    const req = request(
      url,
      {
        method: 'HEAD',
        agent,
        lookup: pinnedLookup(pinned),
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

/** The answer to a spool GET that is not 200, as a refusal (the HEAD's rules). */
function refusalOf(status: number): FillOutcome {
  return status >= 500
    ? { ok: false, refusal: 'upstream_unavailable', detail: `GET answered ${status}` }
    : { ok: false, refusal: 'not_found', detail: `GET answered ${status}` };
}

/** GETs `url` from the pinned address into `sink`: no redirect followed, every byte counted. */
function fetchInto(
  url: string,
  agent: Agent,
  pinned: PinnedAddress,
  maxBytes: number,
  sink: SpoolSink,
  signal: AbortSignal,
): Promise<FillOutcome> {
  return new Promise((resolve) => {
    const req = request(
      url,
      {
        method: 'GET',
        agent,
        lookup: pinnedLookup(pinned),
        headers: { 'user-agent': USER_AGENT, accept: '*/*', 'accept-encoding': 'identity' },
        signal,
      },
      (res) => {
        const status = res.statusCode ?? 0;
        if (status !== 200) {
          res.resume();
          resolve(refusalOf(status));
          return;
        }
        const length = res.headers['content-length'];
        if (typeof length === 'string' && /^\d+$/.test(length) && Number(length) > maxBytes) {
          res.destroy();
          resolve({ ok: false, refusal: 'source_too_large' });
          return;
        }
        void (async () => {
          try {
            for await (const chunk of res) {
              if (!(await sink.write(chunk as Buffer))) {
                res.destroy();
                resolve({ ok: false, refusal: 'source_too_large' });
                return;
              }
            }
            // A body cut short of its declared length is the origin failing, not a source.
            if (!res.complete) {
              resolve({ ok: false, refusal: 'upstream_unavailable', detail: 'body cut short' });
              return;
            }
            resolve({ ok: true });
          } catch (error) {
            resolve({ ok: false, refusal: 'upstream_unavailable', detail: String(error) });
          }
        })();
      },
    );
    req.on('error', (error: NodeJS.ErrnoException) => {
      resolve({ ok: false, refusal: 'upstream_unavailable', detail: error.code ?? error.name });
    });
    req.end();
  });
}

/** An `https://` source → its HEAD's findings and how to spool it, or the failure to answer. */
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
  // One DNS answer for this resolution; the HEAD and the GET both connect to it.
  const pin = await pinAddress(source.host, config.sourceAllowPrivate);
  if (!pin.ok) return failure(pin.reason === 'non_public' ? 'not_found' : 'upstream_unavailable');
  const { pinned } = pin;
  const r = await head(source.url, agent, pinned, options.timeoutMs ?? HTTPS_HEAD_TIMEOUT_MS);
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
  const version = `${canonical}\n${size ?? ''}\n${mtimeMs ?? ''}`;
  const limits = { maxBytes: config.maxSrcBytes, timeoutMs: config.renderTimeoutS * 1000 };
  return {
    source,
    canonical,
    input: { url: source.url, kind: 'https' },
    open: (abandon) =>
      openSpooled(
        version,
        (sink, signal) => fetchInto(source.url, agent, pinned, limits.maxBytes, sink, signal),
        limits,
        abandon,
      ),
    ...(size !== undefined ? { size } : {}),
    ...(mtimeMs !== undefined ? { mtimeMs } : {}),
  };
}
