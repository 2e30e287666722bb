/**
 * The probe gate's one question, asked of ffprobe: open the source, let ffprobe read its
 * descriptor in the probe pool, and turn the answer into a `ProbeResult` (the `/info` body, the
 * media facts renders are built from, or a refusal shared like a result) or a `ProbeError` (a
 * failure the coordinator shares only with the waiters already present).
 *
 * `probeLogic` is the ProbeCoordinator's `probe` actor (`probeService.ts` provides it);
 * `judgeProbe` is its verdict on a finished ffprobe task, pure so it is tested on its own.
 *
 * ## Invariants
 * - **ffprobe reads a descriptor, never a path or URL**: the proxy opens the source and the
 *   lease is released only once `runProbe` settled (ffprobe reaped).
 * - **A verdict about the bytes is a result**: over `AP_MAX_SRC_BYTES` while opening
 *   (`source_too_large`), bytes ffprobe cannot read as media (`undecodable_source`, including
 *   an ffprobe that exited with a status of its own), a video stream (`video_source`).
 * - **What this ffmpeg cannot read is undecodable too**: a demuxer or an audio codec missing
 *   from the listing read at boot (`workers/capabilities.ts`; ffprobe may be another build) is
 *   `undecodable_source` here, before a render takes a slot to find out.
 * - **Everything else is a `ProbeError`** whose `class` is one of the probe's failure classes
 *   (`machines/probeCoordinator.ts` `toFailure` reads `class` and `detail`).
 */
import { fromPromise } from 'xstate';
import type { ConfigProvider } from '../config/index.js';
import type { ProbeFailureClass } from '../core/failure.js';
import type { ResolvedSource } from '../core/source.js';
import type { ProbeTaskOutcome } from '../core/worker.js';
import type { EncoderCapabilities } from '../workers/capabilities.js';
import type { WorkerPool } from '../workers/pool.js';
import { buildProbeArgv, infoBody, parseProbe, probeVerdict } from '../workers/probe.js';
import { runProbe } from '../workers/renderClient.js';
import type { ProbeResult } from './probeService.js';
import { FD_INPUT } from './renderInput.js';

/** Why a probe gave no verdict: `class` is what the waiters are told, `detail` why. */
export class ProbeError extends Error {
  override readonly name = 'ProbeError';
  readonly class: ProbeFailureClass;
  readonly detail: string;
  constructor(failureClass: ProbeFailureClass, detail: string) {
    super(`probe failed (${failureClass})${detail ? `: ${detail}` : ''}`);
    this.class = failureClass;
    this.detail = detail;
  }
}

export interface ProbeLogicOptions {
  readonly config: ConfigProvider;
  /** The pool ffprobe runs in (the proxy's supervised probe pool). */
  readonly pool: WorkerPool;
  readonly ffprobePath: string;
  /** What the render's ffmpeg can demux and decode; absent: whatever ffprobe reads passes. */
  readonly capabilities?: Pick<EncoderCapabilities, 'canRead'>;
}

/** The ProbeCoordinator's `probe` actor: one ffprobe of `input`, judged by `judgeProbe`. */
export function probeLogic(options: ProbeLogicOptions) {
  return fromPromise<ProbeResult, ResolvedSource>(async ({ input, signal }) => {
    const c = options.config.get();
    // The proxy opens the source; ffprobe reads the descriptor (never a path or URL).
    const opened = input.open
      ? await input.open(signal)
      : ({ ok: false, refusal: 'not_found', detail: 'nothing to open' } as const);
    if (!opened.ok) {
      // Over AP_MAX_SRC_BYTES while reading is a verdict about the bytes, shared like one.
      if (opened.refusal === 'source_too_large') return { ok: false, refusal: 'source_too_large' };
      throw new ProbeError(opened.refusal, opened.detail ?? '');
    }
    let outcome: ProbeTaskOutcome;
    try {
      outcome = await runProbe(
        options.pool,
        {
          executable: options.ffprobePath,
          argv: buildProbeArgv(FD_INPUT),
          timeoutMs: c.probeTimeoutS * 1000,
          nice: c.ffmpegNice,
          inputFd: opened.lease.fd,
        },
        { signal },
      );
    } finally {
      opened.lease.release(); // runProbe settles only once ffprobe is reaped
    }
    return judgeProbe(outcome, options.capabilities);
  });
}

/**
 * A finished ffprobe task as the gate's result; throws `ProbeError` for a failure. A source the
 * render's ffmpeg cannot demux or decode (`capabilities`) is `undecodable_source`.
 */
export function judgeProbe(
  outcome: ProbeTaskOutcome,
  capabilities?: Pick<EncoderCapabilities, 'canRead'>,
): ProbeResult {
  if (outcome.type !== 'ok') {
    // ffprobe refusing the bytes is a verdict about the source (415), shared like a result.
    // Its one input is a regular file the proxy opened, so an ffprobe that exits with a
    // status of its own (not killed, not timed out) failed to read those bytes as media,
    // whatever words its stderr used (crafted Ogg pages, truncated FLAC, WAVs with no layout).
    if (outcome.class === 'undecodable' || exitedOnTheBytes(outcome)) {
      return { ok: false, refusal: 'undecodable_source' };
    }
    const cls =
      outcome.class === 'timeout'
        ? 'probe_timeout'
        : outcome.class === 'not_found'
          ? 'not_found'
          : 'probe_failed';
    throw new ProbeError(cls, outcome.stderrTail);
  }
  const parsed = parseProbe(outcome.stdout);
  const verdict = probeVerdict(parsed, { requireDuration: false });
  if (!verdict.ok) {
    if (verdict.reason === 'render_failed') {
      throw new ProbeError('probe_failed', 'unparseable probe output');
    }
    return { ok: false, refusal: verdict.reason };
  }
  if (parsed.ok && capabilities && !capabilities.canRead(parsed)) {
    return { ok: false, refusal: 'undecodable_source' };
  }
  const media = verdict.info;
  return {
    ok: true,
    info: infoBody(parsed) as Record<string, unknown>,
    media: {
      ...(media.sampleRate !== undefined ? { sampleRate: media.sampleRate } : {}),
      ...(media.channels !== undefined ? { channels: media.channels } : {}),
      ...(media.bitDepth !== undefined ? { bitDepth: media.bitDepth } : {}),
      ...(media.duration !== undefined ? { duration: media.duration } : {}),
    },
  };
}

/** ffprobe ended by itself with a failure status: its verdict on the bytes it was handed. */
function exitedOnTheBytes(outcome: { class: string; exitStatus: number | null }): boolean {
  return outcome.class === 'render_failed' && outcome.exitStatus !== null && outcome.exitStatus > 0;
}
