/**
 * Prefetch (issue #19): where the next request is predictable, a MISS (or a COALESCED join) hands
 * the predicted variant to the warm service at `low`. Two predictions:
 * - **The next HLS segments** (`AP_PREFETCH_HLS_SEGMENTS`, default 1): a MISS of `f:hls`
 *   segment `hls_seg:N` predicts `hls_seg:N+1` … `hls_seg:N+count`, a player's next asks.
 * - **A trim continuing a trim** (opt-in, `AP_PREFETCH_NEXT_TRIM`): a MISS of `t:S:D` (a bounded
 *   trim spelled in the URL, not an HLS part) predicts `t:S+D:D`.
 * A prediction is built from the request's own options path with one segment replaced, through
 * the same options stage, so it is exactly the variant a GET of that path would render; it is
 * the server's own prediction, so no signature is asked for it (it renders nothing a signed URL
 * of the same source could not: the playlist links every segment with the same options).
 *
 * ## Invariants
 * - **Never delays a listener**: started after the listener's own render was asked for (the
 *   next loop turn), at `low`, as a background render: preempted by any waiting listener,
 *   displaced by any live arrival into a full queue, its ffmpeg at niceness 19.
 * - **Only with a store**: the warm service exists only with one (`services.warm`); without it
 *   nothing is predicted.
 * - **Only what exists**: a segment past the playlist's last (counted from the probe's duration
 *   and the trim, as the playlist is written: `segmentDurations`) and the init part are never
 *   predicted; a source without a probed duration predicts no segment. A trim without a
 *   duration, one from a preset, or one that would start at or past the source's end predicts
 *   nothing.
 * - **Never fails the request**: a prediction that does not parse, or a warm service that
 *   refuses it, is dropped silently; the status view (`/debug/warm`, reason `prefetch`) shows
 *   the ones taken.
 *
 * ## Races
 * None of its own: the warm service owns the prediction once handed over (one job per key, so
 * two listeners predicting the same segment make one job, and a segment already stored is a
 * `hit` there, not a render).
 *
 * ## Events
 * None.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RenderRequest } from '../../core/request.js';
import { type HLS_INIT_PART, renderNumber } from '../../core/variant.js';
import { ANSWERED, type Exchange, type StageContext } from '../exchange.js';
import { segmentDurations } from '../hls.js';
import { HLS_PART_KEY } from '../optionTable.js';
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

/**
 * The options paths of the `count` segments after `hls_seg:part` (never past segment
 * `total - 1`), or none when `rest` names no numbered segment.
 */
export function nextSegmentPaths(
  rest: string,
  part: typeof HLS_INIT_PART | number | undefined,
  count: number,
  total: number,
): string[] {
  if (typeof part !== 'number') return [];
  const segments = rest.split('/');
  const at = segments.indexOf(`${HLS_PART_KEY}:${part}`);
  if (at < 0) return [];
  const out: string[] = [];
  for (let next = part + 1; next <= part + count && next < total; next++) {
    segments[at] = `${HLS_PART_KEY}:${next}`;
    out.push(segments.join('/'));
  }
  return out;
}

/** The paths this MISS predicts: the next HLS segments, or the trim continuing this one. */
function predictions(
  ctx: StageContext,
  rest: string,
  route: RenderRoute,
  request: RenderRequest,
): string[] {
  const options = route.options;
  if (options.format === 'hls') {
    const count = ctx.config.prefetchHlsSegments;
    const durationS = request.media?.duration;
    if (count <= 0 || durationS === undefined) return [];
    const total = segmentDurations(options, durationS).length;
    return nextSegmentPaths(rest, options.hlsPart, count, total);
  }
  if (!ctx.config.prefetchNextTrim || options.trim?.duration === undefined) return [];
  const next = nextTrimPath(rest, request.media?.duration);
  return next === undefined ? [] : [next];
}

/** Hands what a MISS predicts to the warm service at `low`, on the next loop turn. */
export function prefetchPredicted(
  x: Exchange,
  ctx: StageContext,
  rest: string,
  route: RenderRoute,
  request: RenderRequest,
  canonical: string,
): void {
  const warm = ctx.services.warm;
  if (!warm?.prefetch) return;
  const paths = predictions(ctx, rest, route, request);
  if (paths.length === 0) return;
  setImmediate(() => {
    for (const next of paths) {
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
      if (parsed === ANSWERED || parsed.endpoint !== 'render') continue;
      const nowS = Math.floor(ctx.services.nowMs() / 1000);
      const variant = describeVariant(parsed, canonical, nowS);
      const predicted: RenderRequest = {
        key: variant.key,
        options: parsed.options,
        source: request.source,
        ...(request.media ? { media: request.media } : {}),
      };
      warm.prefetch!(predicted, next).catch(() => {});
    }
  });
}
