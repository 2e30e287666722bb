/**
 * Structured JSON logs (pino) at `AP_LOG_LEVEL`, plus the handler that turns render telemetry
 * into one log line per finished request.
 *
 * `AP_LOG_LEVEL` speaks the original's vocabulary (`debug`, `info`, `warning`, `error`); pino
 * calls the third one `warn`. Render failure details can quote ffmpeg's stderr, which may quote
 * a presigned source URL, so query strings are redacted before they are logged.
 *
 * An unexpected exception anywhere on the request path (`audio_proxy.internal_error`) is one
 * error-level line: `stage`, `req` (`method`, `path` redacted, `id` from `x-request-id`) and
 * `err` (the cause, with its stack).
 */
import diagnostics from 'node:diagnostics_channel';
import { type DestinationStream, type Logger, pino } from 'pino';
import { type InternalErrorRequest, RENDER_CHANNELS } from './channels.js';

export type LogLevel = 'debug' | 'info' | 'warning' | 'error';

export function createLogger(level: LogLevel = 'info', destination?: DestinationStream): Logger {
  const pinoLevel = level === 'warning' ? 'warn' : level;
  const options = { level: pinoLevel, base: { service: 'audio-proxy' } };
  return destination ? pino(options, destination) : pino(options);
}

/** Strips query strings from URLs inside free text (presigned credentials live there). */
export function redact(text: string): string {
  return text.replace(/(https?:\/\/[^\s?"']+)\?[^\s"']*/g, '$1?<redacted>');
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
