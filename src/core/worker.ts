/**
 * The contract between the main thread and a worker thread, and between the render chart and
 * the worker actor that the render service provides it: what a task carries, what a run answers,
 * the messages that cross, and the time and byte budgets both sides count on. Like Piscina's
 * own `common.ts`, it is the one file both sides import; neither imports the other's code.
 *
 * ## Invariants
 * - A task's outcome is `RenderOutcome` / `ProbeTaskOutcome`: settled only once ffmpeg is dead.
 * - `TERM_GRACE_MS + KILL_WAIT_MS` bounds every kill: the render chart's watchdog adds them to
 *   the task's own timeout before the main thread steps in.
 * - A worker stops reading ffmpeg's stdout at `HIGH_WATER_BYTES` unacknowledged and sends at most
 *   `BATCH_BYTES` per message, at least every `FLUSH_MS`.
 *
 * Imports nothing of the project but other `core/` files.
 */

import type { MessagePort } from 'node:worker_threads';
import type { ProcessFailureClass } from './failure.js';
import type { OpenSource } from './source.js';

/** How long ffmpeg gets to exit after SIGTERM; it flushes its muxer and exits well within this. */
export const TERM_GRACE_MS = 2_000; // the original's grace; longer only delays a stuck kill

/** How long to wait for the process to disappear after SIGKILL before giving up and logging. */
export const KILL_WAIT_MS = 1_000; // SIGKILL is not catchable; only a D-state process outlives it

export type KillOutcome = 'already_dead' | 'terminated' | 'killed' | 'survived';

/**
 * A render's silence limit when `AP_RENDER_TIMEOUT` is unset, in seconds: long masters take
 * minutes to encode on one core. Config's default and the semaphore chart's Retry-After ceiling.
 */
export const DEFAULT_RENDER_TIMEOUT_S = 300;

/**
 * Largest chunk sent to the main thread. Every chunk is a message each way (Comlink's call and
 * its answer) and, on the main thread, one event through the render chart, the coordinator,
 * every subscriber's delivery and the tee, and one store write: the cost is per chunk, not per
 * byte. bench/cpu.ts's MISS renders (mp3 128k of 60 s, 938 KiB) went out in 16–29 chunks at
 * 64 KiB / 50 ms (the count followed the machine's load), in 5–8 at 256 KiB / 250 ms, and each
 * chunk left out saved ≈ 1.2–2.3 ms of proxy CPU (docs/performance.md, "Where the CPU goes").
 * 256 KiB is 16 s of a 128 kb/s mp3, 1.5 s of CD-rate WAV.
 */
export const BATCH_BYTES = 256 * 1024;

/**
 * Longest a byte waits in the worker before it is sent (the first read goes at once, so time to
 * first byte is ffmpeg's). Every message wakes both threads: bench/workers.ts (4 concurrent mp3
 * encodes, ~800-byte pipe reads then) measured the node process's CPU vs a main-thread spawn at
 * ≈ 3.2× unbatched, ≈ 2× at 5 ms, 1.15–1.7× at 20 ms, 1.04–1.4× at 50 ms. At 50 ms a fast
 * render's chunk count followed the wall time it took, so a loaded machine paid more per render
 * (see `BATCH_BYTES`); at 250 ms a 60 s mp3 is mostly full batches. A listener is not starved
 * by it: an encode runs ≫ 1× real time, so the first read alone (ffmpeg's 16 KiB block: 1 s of a
 * 128 kb/s mp3, 0.4 s at 320 kb/s) outlasts the wait for the next, and an uncompressed output
 * fills a batch long before the deadline.
 */
export const FLUSH_MS = 250;

/**
 * A partial batch waits past `FLUSH_MS` only while the listener is this far ahead: when the
 * render says how many bytes a second of its audio takes at most (`outputBytesPerSecond`), the
 * worker knows a lower bound of the audio already sent, and so of how long the listener can play
 * before it needs more. While that lead exceeds this, a partial batch is held (up to
 * `MAX_HOLD_MS`); once it falls to this, the time rule (`FLUSH_MS`) applies again. Why: with
 * the time rule alone, the chunk count of a render followed its wall time, so a render slowed by
 * other work on the machine (ffmpeg runs niced) cost the proxy several times the CPU per render
 * (bench/cpu.ts: 6 writes per listener on a quiet machine, 36 under two busy loops). With it,
 * a render faster than real time is cut by its bytes, whatever the machine's load.
 */
export const LISTENER_LEAD_MS = 2_000;

/** Longest a partial batch is ever held by the lead rule (a range join may wait for its bytes). */
export const MAX_HOLD_MS = 4_000;

/** Unacknowledged bytes at which stdout is paused. */
export const HIGH_WATER_BYTES = 1_048_576; // the original's mark; the coordinator acks at once

/** What to run and for how long. */
export interface ProcessSpec {
  readonly executable: string;
  readonly argv: readonly string[];
  /** Bounds the process's run, from spawn to exit. */
  readonly timeoutMs: number;
  /** Output beyond this many bytes fails the task (`render_failed`). */
  readonly maxBytes?: number;
  /**
   * The output's announced length (an exact WAV's `Content-Length`): a byte more, or a clean
   * exit short of it, fails the task (`render_failed`), so nothing else is ever kept or ended.
   */
  readonly exactBytes?: number;
  /** Bytes sent before ffmpeg's own (the proxy-written header of an exact WAV). */
  readonly prefix?: Uint8Array;
  /**
   * A flac render's exact sample count: written into its STREAMINFO (which ffmpeg, writing to a
   * pipe, leaves at 0) before the first byte leaves the worker, so streamed and stored agree.
   */
  readonly flacTotalSamples?: number;
  /**
   * An mp3 render: the worker puts the info frame's placeholder (`workers/xingFrame.ts`) after
   * ffmpeg's ID3v2 tag, before the first frame; the tee completes it at commit.
   */
  readonly mp3InfoFrame?: boolean;
  /**
   * Niceness to run the process at (`AP_FFMPEG_NICE`), set right after the spawn; 0 or absent
   * leaves it at the proxy's own. Encodes are batch work, the event loop serves every client.
   */
  readonly nice?: number;
  /**
   * A descriptor open in this process (the source the proxy opened) that the child inherits as
   * its fd 3 (`INPUT_FD`), read as `file:/proc/self/fd/3`. Worker threads share the process's
   * descriptor table; the owner on the main thread keeps it open until the task has settled.
   */
  readonly inputFd?: number;
}

/** Reduce ffmpeg's s16le PCM to waveform peaks in this thread; the output is one chunk. */
export interface PeaksSpec {
  readonly channels: 1 | 2;
  readonly pts: number;
  /** Frames the decode should produce (`peaksFrameBudget` from the probed duration). */
  readonly totalFrames: number;
  /** The decode's rate, written into the header. */
  readonly sampleRate: number;
  readonly format: 'json' | 'dat';
}

export interface RenderTask extends ProcessSpec {
  readonly kind: 'render';
  /** When set, stdout is PCM to reduce, not output to stream; `maxBytes` bounds the result. */
  readonly peaks?: PeaksSpec;
  /** One end of a MessageChannel, transferred; the main thread holds the other. */
  readonly port: MessagePort;
  /** An `f:hls` segment's start in seconds: every fragment's `tfdt` is moved by it. */
  readonly decodeTimeShiftS?: number;
  /**
   * Overrides for bench/workers.ts only. `batchBytes: 0` forwards every pipe read as its own
   * message: the unbatched baseline the batching is measured against.
   */
  readonly batchBytes?: number;
  readonly flushMs?: number;
  /**
   * At most how many output bytes one second of the render's audio takes (an over-estimate is
   * safe: it under-estimates the listener's lead, so bytes go out sooner). Enables the lead rule
   * (`LISTENER_LEAD_MS`); without it only the time rule holds a partial batch.
   */
  readonly outputBytesPerSecond?: number;
}

export interface ProbeTask extends ProcessSpec {
  readonly kind: 'probe';
  /** Optional: enables `cancel` and the pid report, as for renders. */
  readonly port?: MessagePort;
}

export interface EchoTask {
  readonly kind: 'echo';
  readonly value: unknown;
}

export type WorkerTask = RenderTask | ProbeTask | EchoTask;

export interface TaskFailure {
  readonly type: 'error';
  readonly class: ProcessFailureClass;
  /** ffmpeg's exit code; null when it did not exit by itself (killed, never started). */
  readonly exitStatus: number | null;
  readonly stderrTail: string;
  /** Output bytes delivered before the failure. */
  readonly bytes: number;
  readonly detail?: string;
  /** How the worker stopped the process, when it had to (cancel, timeout, cap, consumer gone). */
  readonly kill?: WorkerKillReport;
}

export type RenderOutcome =
  | {
      readonly type: 'done';
      readonly exitStatus: 0;
      readonly bytes: number;
      readonly stderrTail: string;
    }
  | TaskFailure;

export type ProbeTaskOutcome =
  | { readonly type: 'ok'; readonly stdout: string; readonly stderrTail: string }
  | TaskFailure;

/** What the worker calls on the main thread. */
export interface ProcessSink {
  pid(pid: number): void;
  exited(exitStatus: number | null, signal: string | null): void;
  chunk(data: ArrayBuffer): void;
}

/** The worker's side of a kill, as reported to `cancel()`. */
export interface WorkerKillReport {
  readonly outcome: KillOutcome;
  readonly elapsedMs: number;
}

/** What the main thread calls on the worker. */
export interface ProcessControl {
  ack(bytes: number): void;
  cancel(): Promise<WorkerKillReport>;
}

export interface RenderSpec extends ProcessSpec {
  /**
   * Opens the source right before the task is submitted; its descriptor becomes `inputFd` and
   * the lease is released once the task is over (ffmpeg reaped or its thread gone). A refusal
   * settles the task as a failure without running anything.
   */
  readonly openInput?: OpenSource;
  /** Reduce the PCM ffmpeg writes to waveform peaks in the worker (one chunk comes back). */
  readonly peaks?: PeaksSpec;
  /** An `f:hls` segment's start in seconds (see `RenderTask`). */
  readonly decodeTimeShiftS?: number;
  /** Batching overrides, for bench/workers.ts only (see `RenderTask`). */
  readonly batchBytes?: number;
  readonly flushMs?: number;
  /** The output's byte rate bound, for the lead rule (see `RenderTask`). */
  readonly outputBytesPerSecond?: number;
}

export interface CancelReport {
  /** ffmpeg's pid, or null when it never started. */
  readonly pid: number | null;
  /** Who confirmed the death: the worker, this thread, or nobody needed to (already over). */
  readonly by: 'worker' | 'main' | 'none';
  readonly outcome: KillOutcome;
}

/** Events the `renderWorker` actor sends its parent (the Render machine). */
export type RenderWorkerEvent =
  | { readonly type: 'worker.pid'; readonly pid: number }
  | { readonly type: 'worker.chunk'; readonly data: Buffer }
  | { readonly type: 'worker.exited'; readonly exitStatus: number | null }
  | { readonly type: 'worker.settled'; readonly outcome: RenderOutcome }
  | { readonly type: 'worker.dead'; readonly report: CancelReport };

/** Events the `renderWorker` actor accepts. */
export type RenderWorkerCommand =
  | { readonly type: 'ack'; readonly bytes: number }
  | { readonly type: 'cancel' }
  | { readonly type: 'kill'; readonly reason: ProcessFailureClass };

/**
 * What the render chart hands its worker actor. The pool is opaque here: the chart only passes
 * it along, and the actor the render service provides knows it as a `WorkerPool`.
 */
export interface RenderWorkerInput<Pool = unknown> {
  readonly spec: RenderSpec;
  readonly pool: Pool;
}
