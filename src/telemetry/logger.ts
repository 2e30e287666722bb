/**
 * Structured logs (pino) at `AP_LOG_LEVEL`, in `AP_LOG_FORMAT`, plus the handlers that turn the
 * request path's telemetry into log lines.
 *
 * `AP_LOG_LEVEL` speaks the original's vocabulary (`debug`, `info`, `warning`, `error`); pino
 * calls the third one `warn`. Render failure details can quote ffmpeg's stderr, which may quote
 * a presigned source URL, so query strings are redacted before they are logged.
 *
 * ## Formats
 * - **JSON** (the default): one object per line on stdout, for a log shipper.
 * - **Pretty** (`pino-pretty`): one line per record (`singleLine`; an error's stack follows it),
 *   the time of day, the level, the message and the remaining fields, for a person at a
 *   terminal. It runs as a stream in this thread, with synchronous writes, rather than as a pino
 *   transport: a transport is a worker thread, and its lines can be lost when the CLI calls
 *   `process.exit` before the thread has flushed. A terminal's volume makes the formatting cost
 *   on this thread irrelevant.
 * - **`auto`** is decided by whoever owns the terminal: the CLI passes `isTTY` (stdout is a
 *   terminal); the library never looks, so an embedded proxy's default logger is JSON unless its
 *   config says `pretty`.
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
import pinoPretty from 'pino-pretty';
import type { LogFormat, LogLevel } from '../config/index.js';
import {
  type InternalErrorRequest,
  RENDER_CHANNELS,
  VARIANT_STORE_CHANNELS,
  type VariantStoreOversize,
} from './channels.js';

/** `AP_LOG_FORMAT` resolved: `auto` is pretty only when the output is a terminal. */
export function resolveLogFormat(format: LogFormat, isTTY: boolean): Exclude<LogFormat, 'auto'> {
  if (format !== 'auto') return format;
  return isTTY ? 'pretty' : 'json';
}

export interface LoggerOptions {
  /** @default 'json' */
  readonly format?: LogFormat;
  /** Whether the output is a terminal, for `auto`; only the CLI knows. @default false */
  readonly isTTY?: boolean;
  /** Where lines go. @default stdout */
  readonly destination?: DestinationStream;
}

/** pino-pretty's settings for the pretty format (exported for the tests). */
export const PRETTY_OPTIONS = {
  singleLine: true,
  translateTime: 'SYS:HH:MM:ss.l',
  ignore: 'pid,hostname,service',
  sync: true,
} as const;

export function createLogger(level: LogLevel = 'info', options: LoggerOptions = {}): Logger {
  const pinoLevel = level === 'warning' ? 'warn' : level;
  const settings = { level: pinoLevel, base: { service: 'audio-proxy' } };
  const { destination } = options;
  if (resolveLogFormat(options.format ?? 'json', options.isTTY === true) === 'pretty') {
    return pino(
      settings,
      pinoPretty({ ...PRETTY_OPTIONS, ...(destination ? { destination } : {}) }),
    );
  }
  return destination ? pino(settings, destination) : pino(settings);
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

/**
 * Subscribes `logger` to the render events; returns the function that detaches it. A render's
 * `audio_proxy.render.stop` is "render delivered" when its outcome is `ok` (the client's
 * response finished: every byte handed to the kernel) and "render cancelled" when the client
 * left first; the event is `render.stop` either way.
 */
export function attachRenderLog(logger: Logger): () => void {
  const handlers: Array<[string, (m: unknown) => void]> = [
    [
      RENDER_CHANNELS.stop,
      (m) => {
        const e = m as { outcome?: unknown };
        const message = e.outcome === 'ok' ? 'render delivered' : 'render cancelled';
        logger.info({ event: 'render.stop', ...e }, message);
      },
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
