/**
 * What the Render chart is handed for one request: the ffmpeg executable, the argv built from
 * the request's options and the probe's media facts, the deadline, the source's opener and the
 * pool the task runs in. The render service calls this once the semaphore has admitted the
 * request (a refusal never builds it) and gives the slot back if it throws.
 *
 * ## Invariants
 * - **ffmpeg never sees the source's path or URL.** The argv names `FD_INPUT` (the descriptor the
 *   child inherits as fd 3); the proxy opens the source at submission through `openInput`. A
 *   source with no opener is refused with a `TypeError` (its slot given back).
 * - **An exact WAV is sized before it runs** (`exactWavLayout`): the proxy's header goes first,
 *   and the worker fails a render whose output is not exactly the announced length. A flac of a
 *   known sample count carries it in its STREAMINFO from the first byte (`flacTotalSamples`).
 * - **Peaks decode at the probed rate**, or at `PEAKS_FALLBACK_RATE_HZ` when the probe named
 *   none; the frame budget comes from the probed duration (0 when unknown).
 */
import { MAX_NICE } from '../config/defaults.js';
import type { Config } from '../config/index.js';
import type { RenderRequest } from '../core/request.js';
import type { RenderWorkerInput } from '../core/worker.js';
import {
  buildPeaksDecodeArgv,
  buildRenderArgv,
  exactSamples,
  exactWavLayout,
  FD_INPUT_PATH,
  hlsDecodeTimeShiftS,
  outputBytesPerSecondBound,
} from '../workers/argv.js';
import { peaksFrameBudget } from '../workers/peaks.js';
import type { WorkerPool } from '../workers/pool.js';
import { wavHeader } from '../workers/wavHeader.js';

/** What every ffmpeg/ffprobe run reads: the source descriptor the child inherits as fd 3. */
export const FD_INPUT = { url: FD_INPUT_PATH, kind: 'local' } as const;

/** Peaks of a source whose probe named no rate are decoded at this one. */
export const PEAKS_FALLBACK_RATE_HZ = 44_100;

/** The Render's input, plus the label the live view shows for it (the argv names only fd 3). */
export type RenderInputSpec = RenderWorkerInput<WorkerPool> & { readonly source: string };

/** What the argv builders are told about `request`'s input (the same for every caller). */
function argvInputOf(request: RenderRequest, config: Config) {
  return { ...FD_INPUT, ...request.media, maxDurationS: config.maxDurationS };
}

/**
 * The exact byte length `request`'s render will have, when it is known before the render (an
 * exact WAV, `exactWavLayout`); the same layout `renderInputFor` sizes the render with.
 */
export function exactLengthOf(request: RenderRequest, config: Config): number | undefined {
  // Asked of every render request before it is admitted: only a WAV can be exact, so no other
  // format pays for the argv input.
  if (request.options.format !== 'wav') return undefined;
  return exactWavLayout(request.options, argvInputOf(request, config))?.totalBytes;
}

/** Builds the Render's input for `request` under the current `config`. */
export function renderInputFor(
  request: RenderRequest,
  config: Config,
  ffmpegPath: string,
  pool: WorkerPool,
): RenderInputSpec {
  const { options, source } = request;
  // ffmpeg reads the descriptor the proxy opens at submission, never `source.input`'s path/URL.
  const input = argvInputOf(request, config);
  const media = request.media;
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
    const exact = exactWavLayout(options, input);
    const samples = options.format === 'flac' ? exactSamples(options, input)?.samples : undefined;
    const sized = exact
      ? { prefix: wavHeader(exact), exactBytes: exact.totalBytes }
      : samples !== undefined
        ? { flacTotalSamples: samples }
        : options.format === 'mp3'
          ? { mp3InfoFrame: true }
          : {};
    const shift = hlsDecodeTimeShiftS(options);
    const rate = outputBytesPerSecondBound(options, input);
    return {
      spec: {
        ...spec,
        ...sized,
        argv: buildRenderArgv(options, input),
        // The worker holds a partial batch while the listener is far enough ahead (its lead rule).
        ...(rate === undefined ? {} : { outputBytesPerSecond: rate }),
        ...(shift === undefined ? {} : { decodeTimeShiftS: shift }),
      },
      pool,
      source: label,
    };
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
