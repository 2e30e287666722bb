/**
 * Prefetch of a trim continuing a trim (issue #19), opt-in (`AP_PREFETCH_NEXT_TRIM`): a MISS of
 * `t:S:D` (a bounded trim spelled in the URL) predicts that the listener asks for `t:S+D:D`
 * next, and hands that variant to the warm service at `low`. The prediction is built from the
 * request's own options path with the trim segment replaced, through the same options stage, so
 * it is exactly the variant a GET of that path would render; it is the server's own prediction,
 * so no signature is asked for it (it renders nothing a signed URL of the same source could not).
 *
 * ## Invariants
 * - **Never delays a listener**: started after the listener's own render was asked for (the
 *   next loop turn), at `low`, as a background render: preempted by any waiting listener,
 *   displaced by any live arrival into a full queue, its ffmpeg at niceness 19.
 * - **Only what continues**: a trim without a duration, one from a preset, or one that would
 *   start at or past the source's end (as probed) predicts nothing.
 * - **Never fails the request**: a prediction that does not parse, or a warm service that
 *   refuses it, is dropped silently; the status view (`/debug/warm`, reason `prefetch`) shows
 *   the ones taken.
 *
 * ## Races
 * None of its own: the warm service owns the prediction once handed over (one job per key).
 *
 * ## Events
 * None.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RenderRequest } from '../../core/request.js';
import { renderNumber } from '../../core/variant.js';
import { ANSWERED, type Exchange, type StageContext } from '../exchange.js';
import { optionsStage } from './options.js';
import type { RenderRoute } from './variant.js';
import { describeVariant } from './variant.js';

/** A response nobody reads: the options stage's refusal of a prediction is just dropped. */
const DISCARD = {
  writeHead() {
    return this;
  },
  setHeader() {
    return this;
  },
  end() {
    return this;
  },
} as unknown as ServerResponse;

/** The options path with its `t:S:D` segment moved on by D, or undefined when none continues. */
export function nextTrimPath(rest: string, durationS: number | undefined): string | undefined {
  const segments = rest.split('/');
  const at = segments.findIndex((s) => /^t:[^:/]+:[^:/]+$/.test(s));
  if (at < 0) return undefined;
  const [, start, length] = segments[at]!.split(':').map(Number) as [number, number, number];
  if (!(Number.isFinite(start) && Number.isFinite(length) && length > 0)) return undefined;
  const next = start + length;
  if (durationS !== undefined && next >= durationS) return undefined;
  segments[at] = `t:${renderNumber(next)}:${renderNumber(length)}`;
  return segments.join('/');
}

/** Hands the predicted next trim of a MISS to the warm service, on the next loop turn. */
export function prefetchNextTrim(
  x: Exchange,
  ctx: StageContext,
  rest: string,
  route: RenderRoute,
  request: RenderRequest,
  canonical: string,
): void {
  const warm = ctx.services.warm;
  if (!warm?.prefetch || !ctx.config.prefetchNextTrim) return;
  const trim = route.options.trim;
  if (trim?.duration === undefined) return;
  const next = nextTrimPath(rest, request.media?.duration);
  if (next === undefined) return;
  setImmediate(() => {
    const ex: Exchange = {
      req: { url: next, method: 'GET', headers: {} } as IncomingMessage,
      res: DISCARD,
      head: false,
      cors: {},
      endpoint: 'render',
      turns: x.turns,
      stage: 'request',
    };
    const parsed = optionsStage(ex, next, ctx);
    if (parsed === ANSWERED || parsed.endpoint !== 'render') return;
    const nowS = Math.floor(ctx.services.nowMs() / 1000);
    const variant = describeVariant(parsed, canonical, nowS);
    const predicted: RenderRequest = {
      key: variant.key,
      options: parsed.options,
      source: request.source,
      ...(request.media ? { media: request.media } : {}),
    };
    warm.prefetch!(predicted, next).catch(() => {});
  });
}
