/**
 * What the Render chart is handed for one request: the ffmpeg executable, the argv built from
 * the request's options and the probe's media facts, the deadline, the source's opener and the
 * pool the task runs in. The render service calls this before it asks the semaphore, so a throw
 * here holds nothing.
 *
 * ## Invariants
 * - **ffmpeg never sees the source's path or URL.** The argv names `FD_INPUT` (the descriptor the
 *   child inherits as fd 3); the proxy opens the source at submission through `openInput`. A
 *   source with no opener is refused with a `TypeError`, before any slot is asked for.
 * - **Peaks decode at the probed rate**, or at `PEAKS_FALLBACK_RATE_HZ` when the probe named
 *   none; the frame budget comes from the probed duration (0 when unknown).
 */
import { MAX_NICE } from '../config/defaults.js';
import type { Config } from '../config/index.js';
import type { RenderRequest } from '../core/request.js';
import type { RenderWorkerInput } from '../core/worker.js';
import { buildPeaksDecodeArgv, buildRenderArgv, FD_INPUT_PATH } from '../workers/argv.js';
import { peaksFrameBudget } from '../workers/peaks.js';
import type { WorkerPool } from '../workers/pool.js';

/** What every ffmpeg/ffprobe run reads: the source descriptor the child inherits as fd 3. */
export const FD_INPUT = { url: FD_INPUT_PATH, kind: 'local' } as const;

/** Peaks of a source whose probe named no rate are decoded at this one. */
export const PEAKS_FALLBACK_RATE_HZ = 44_100;

/** The Render's input, plus the label the live view shows for it (the argv names only fd 3). */
export type RenderInputSpec = RenderWorkerInput<WorkerPool> & { readonly source: string };

/** Builds the Render's input for `request` under the current `config`. */
export function renderInputFor(
  request: RenderRequest,
  config: Config,
  ffmpegPath: string,
  pool: WorkerPool,
): RenderInputSpec {
  const { options, source, media } = request;
  // ffmpeg reads the descriptor the proxy opens at submission, never `source.input`'s path/URL.
  const input = { ...FD_INPUT, ...media, maxDurationS: config.maxDurationS };
  const open = source.open;
  if (open === undefined) throw new TypeError('renderInputFor: the source has no opener');
  // What the live view shows as the input: the argv only names the descriptor.
  const label = source.canonical;
  const spec = {
    executable: ffmpegPath,
    timeoutMs: config.renderTimeoutS * 1000,
    // Warm work yields the CPU too, not only its slot: the weakest niceness Linux knows.
    nice: request.background ? MAX_NICE : config.ffmpegNice,
    openInput: open,
  };
  if (options.format !== 'peaks') {
    return { spec: { ...spec, argv: buildRenderArgv(options, input) }, pool, source: label };
  }
  // Peaks: ffmpeg decodes to PCM at the source's rate; the worker reduces it to one chunk.
  const sampleRate = media?.sampleRate ?? PEAKS_FALLBACK_RATE_HZ;
  const channels = options.channels ?? 1;
  return {
    spec: {
      ...spec,
      argv: buildPeaksDecodeArgv(options, input, { sampleRate, channels }),
      peaks: {
        channels,
        pts: options.pts ?? 800,
        totalFrames: peaksFrameBudget(media?.duration ?? 0, sampleRate, options.trim),
        sampleRate,
        format: options.peaksFormat ?? 'json',
      },
    },
    pool,
    source: label,
  };
}
