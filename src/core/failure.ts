/**
 * One failure taxonomy, in three layers that refine each other:
 *
 * - `ProcessFailureClass` / `ProcessFailure`: how one ffmpeg run ended (the worker's verdict).
 * - `FailureClass` / `RenderFailure`: how a render ended for its subscribers (a process failure,
 *   or `queue_full` when no slot came in time).
 * - `Failure` / `FailureCode`: every way a request can fail, one per row of the error table
 *   (`http/errors.ts` turns a `Failure` into a status, headers and body; nothing else does).
 *
 * `ProbeFailureClass` is the probe's own subset of `FailureCode`. The mapping from a render's
 * failure to a request's is `renderFailureToHttp` in `http/errors.ts`.
 *
 * Imports nothing of the project.
 */

/** How one ffmpeg run ended badly, as the worker classifies it. */
export type ProcessFailureClass =
  | 'timeout'
  | 'cancelled'
  | 'not_found'
  | 'undecodable'
  | 'render_failed';

/** How a render failed, as its subscribers hear it: a process failure, or no slot in time. */
export type FailureClass = ProcessFailureClass | 'queue_full';

/** A render's failure as the coordinator reports it to every subscriber. */
export interface RenderFailure {
  readonly class: FailureClass;
  readonly exitStatus?: number | null;
  readonly detail?: string;
  readonly stderrTail?: string;
  readonly retryAfterS?: number;
}

/** A finished render: ffmpeg exited 0 after `bytes` bytes. */
export interface RenderInfo {
  readonly exitStatus: 0;
  readonly bytes: number;
}

/** One ffmpeg run's failure, as the render chart reports it: the exit and stderr are known. */
export interface ProcessFailure extends RenderFailure {
  readonly class: ProcessFailureClass;
  readonly exitStatus: number | null;
  readonly stderrTail: string;
}

/** Why a probe gave no verdict; each is also a `FailureCode`. */
export type ProbeFailureClass =
  | 'not_found'
  | 'probe_timeout'
  | 'probe_failed'
  /** The source could not be opened: its origin failed (502) or its credentials did (500). */
  | 'upstream_unavailable'
  | 'not_configured';

/** Every way a signed request can fail, as data. */
export type Failure =
  | { readonly type: 'invalid_signature' }
  /** `scope: 'route'` is the router's own miss (`No such resource`); default is a source. */
  | { readonly type: 'not_found'; readonly scope?: 'source' | 'route' }
  | { readonly type: 'expired' }
  | { readonly type: 'source_too_large' }
  | { readonly type: 'source_too_long' }
  | { readonly type: 'undecodable_source' }
  | { readonly type: 'video_source' }
  | { readonly type: 'range_not_satisfiable'; readonly size: number }
  | { readonly type: 'invalid_options'; readonly message: string }
  /** A valid option this node's ffmpeg cannot honour; `message` names it and the missing part. */
  | { readonly type: 'unsupported_option'; readonly message: string }
  | { readonly type: 'queue_full'; readonly retryAfterS: number }
  | { readonly type: 'render_failed' }
  | { readonly type: 'probe_failed' }
  | { readonly type: 'not_configured' }
  | { readonly type: 'upstream_unavailable' }
  /** `close()` has begun: this node takes no new work (see proxy.ts). */
  | { readonly type: 'shutting_down'; readonly retryAfterS: number }
  | { readonly type: 'render_timeout' }
  | { readonly type: 'probe_timeout' };

/** A row of the error table: one per way a request can fail. */
export type FailureCode = Failure['type'];
