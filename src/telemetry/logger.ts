/**
 * Structured JSON logs (pino) at `AP_LOG_LEVEL`, plus the handler that turns render telemetry
 * into one log line per finished request.
 *
 * `AP_LOG_LEVEL` speaks the original's vocabulary (`debug`, `info`, `warning`, `error`); pino
 * calls the third one `warn`. Render failure details can quote ffmpeg's stderr, which may quote
 * a presigned source URL, so query strings are redacted before they are logged.
 *
 * With `AP_ACCESS_LOG` (on by default), every public request is one `access` line too.
 *
 * An unexpected exception anywhere on the request path (`audio_proxy.internal_error`) is one
 * error-level line: `stage`, `req` (`method`, `path` redacted, `id` from `x-request-id`) and
 * `err` (the cause, with its stack).
 *
 * A bounded file store logs its first variant too large to keep (`variant_store.oversize`, warn;
 * later ones are only counted) and each eviction at debug.
 */
import diagnostics from 'node:diagnostics_channel';
import { type DestinationStream, type Logger, pino } from 'pino';
import type { LogLevel } from '../config/index.js';
import {
  type InternalErrorRequest,
  RENDER_CHANNELS,
  VARIANT_STORE_CHANNELS,
  type VariantStoreOversize,
} from './channels.js';

export function createLogger(level: LogLevel = 'info', destination?: DestinationStream): Logger {
  const pinoLevel = level === 'warning' ? 'warn' : level;
  const options = { level: pinoLevel, base: { service: 'audio-proxy' } };
  return destination ? pino(options, destination) : pino(options);
}

/** Strips query strings from URLs inside free text (presigned credentials live there). */
export function redact(text: string): string {
  return text.replace(/(https?:\/\/[^\s?"']+)\?[^\s"']*/g, '$1?<redacted>');
}

/** What `audio_proxy.http.request` carries when a public-listener response closes. */
interface HttpRequestMessage {
  readonly status: number;
  readonly method: string;
  readonly url: string;
  readonly ms: number;
  readonly bytes: number;
  readonly cache?: unknown;
  readonly complete: boolean;
}

/**
 * The access log: one `info` line per public-listener request (`event: 'access'`), with the
 * path but never its query (an expiry or a presigned credential may live there), the status,
 * bytes on the wire (headers included), milliseconds to the close, the cache status, and
 * `complete: false` for a response torn down before its end. Returns the detach function.
 */
export function attachAccessLog(logger: Logger): () => void {
  const onRequest = (m: unknown) => {
    const r = m as HttpRequestMessage;
    const q = r.url.indexOf('?');
    logger.info(
      {
        event: 'access',
        method: r.method,
        path: q === -1 ? r.url : `${r.url.slice(0, q)}?<redacted>`,
        status: r.status,
        bytes: r.bytes,
        ms: Math.round(r.ms * 10) / 10,
        ...(typeof r.cache === 'string' ? { cache: r.cache } : {}),
        ...(r.complete ? {} : { complete: false }),
      },
      'access',
    );
  };
  diagnostics.subscribe(RENDER_CHANNELS.httpRequest, onRequest);
  return () => diagnostics.unsubscribe(RENDER_CHANNELS.httpRequest, onRequest);
}

/** Subscribes `logger` to the render events; returns the function that detaches it. */
export function attachRenderLog(logger: Logger): () => void {
  const handlers: Array<[string, (m: unknown) => void]> = [
    [
      RENDER_CHANNELS.stop,
      (m) => logger.info({ event: 'render.stop', ...(m as object) }, 'render delivered'),
    ],
    [
      RENDER_CHANNELS.exception,
      (m) => {
        const e = m as Record<string, unknown>;
        const detail = typeof e.detail === 'string' ? redact(e.detail) : undefined;
        logger.warn({ event: 'render.exception', ...e, detail }, 'render failed');
      },
    ],
    [
      RENDER_CHANNELS.internalError,
      (m) => {
        const e = m as { stage?: unknown; error?: unknown; req?: InternalErrorRequest };
        const req = e.req ? { ...e.req, path: redact(e.req.path) } : undefined;
        const err = e.error instanceof Error ? e.error : new Error(String(e.error));
        logger.error(
          { event: 'internal_error', stage: e.stage, ...(req ? { req } : {}), err },
          'internal error',
        );
      },
    ],
    [
      VARIANT_STORE_CHANNELS.oversize,
      (m) => {
        const o = m as VariantStoreOversize;
        if (!o.first) return;
        logger.warn(
          { event: 'variant_store.oversize', key: o.key, bytes: o.bytes, maxBytes: o.maxBytes },
          'a variant larger than AP_VARIANT_STORE_MAX_BYTES was not stored; later ones are only counted (audio_proxy_variant_store_oversize_total)',
        );
      },
    ],
    [
      VARIANT_STORE_CHANNELS.eviction,
      (m) => logger.debug({ event: 'variant_store.eviction', ...(m as object) }, 'variant evicted'),
    ],
    [
      RENDER_CHANNELS.writeFailure,
      (m) =>
        logger.error(
          { event: 'variant_store.write_failure', ...(m as object) },
          'store write failed',
        ),
    ],
  ];
  for (const [name, h] of handlers) diagnostics.subscribe(name, h);
  return () => {
    for (const [name, h] of handlers) diagnostics.unsubscribe(name, h);
  };
}
