/**
 * What a failed ffmpeg/ffprobe run means, read from its exit status and the tail of its stderr.
 *
 * The process owner keeps the last `STDERR_TAIL_BYTES` of stderr with `appendTail` (bounded,
 * whatever ffmpeg prints) and, only when the exit is not clean, asks `classifyFailure` which of
 * the three client-visible classes it was. Timeouts and cancellations are decided by the owner's
 * timer and cancel path, never here.
 *
 * ## Invariants
 * - **A clean exit is never a failure**, whatever stderr says: `exitOutcome(0, …)` is ok, and
 *   `classifyFailure(0, …)` is a programmer error (RangeError).
 * - **`not_found` wins over `undecodable`**: a missing input is reported as missing even if a
 *   later line also complains about data.
 * - **The tail is bytes, bounded at `max`**, and keeps the newest bytes: the cause ffmpeg prints
 *   last is the one kept.
 * - Matching is case-insensitive (ffmpeg capitalises "Could not find codec parameters").
 *
 * ## Races
 * None: pure functions.
 *
 * ## Events
 * | Class | Pattern in the tail (non-zero exit only) |
 * |---|---|
 * | `not_found` | `No such file or directory`, `Server returned 403/404`, `HTTP error 403/404`, `403 Forbidden`, `404 Not Found` |
 * | `undecodable` | `Invalid data found when processing input`, `could not find codec parameters`, `Format … not on whitelist` (a demuxer outside `AUDIO_DEMUXERS`), `/proc/self/fd/N: Invalid argument` (the input, opened by the proxy, refused by the demuxer: random bytes taken for mp3), `Decoder (codec none) not found` (a stream header naming no codec) |
 * | `render_failed` | anything else, including a death by signal (status `null`) |
 */

/** The stderr kept per process: enough for ffmpeg's last few error lines, bounded whatever it prints. */
export const STDERR_TAIL_BYTES = 4096;

export type StderrFailureClass = 'not_found' | 'undecodable' | 'render_failed';

export type ExitOutcome =
  | { readonly ok: true }
  | { readonly ok: false; readonly class: StderrFailureClass };

export const NOT_FOUND_PATTERN =
  /No such file or directory|Server returned 40[34]|HTTP error 40[34]|40[34] (Not Found|Forbidden)/i;
export const UNDECODABLE_PATTERN =
  /Invalid data found when processing input|could not find codec parameters|not on whitelist|\/proc\/self\/fd\/\d+: Invalid argument|Decoder \(codec [^)]*\) not found/i;

const EMPTY = Buffer.alloc(0);

/** The last `max` bytes of `tail` followed by `chunk`, as a new buffer that aliases neither. */
export function appendTail(
  tail: Uint8Array,
  chunk: Uint8Array,
  max: number = STDERR_TAIL_BYTES,
): Buffer {
  if (!Number.isInteger(max) || max < 0) {
    throw new RangeError(`max must be a non-negative integer, got ${max}`);
  }
  if (max === 0) return EMPTY;
  if (chunk.byteLength >= max) {
    return Buffer.from(chunk.subarray(chunk.byteLength - max));
  }
  const keep = Math.min(tail.byteLength, max - chunk.byteLength);
  const out = Buffer.allocUnsafe(keep + chunk.byteLength);
  out.set(tail.subarray(tail.byteLength - keep), 0);
  out.set(chunk, keep);
  return out;
}

/** The class of a non-clean exit. `exitStatus` is `null` when the process died by a signal. */
export function classifyFailure(
  exitStatus: number | null,
  stderrTail: string | Uint8Array,
): StderrFailureClass {
  if (exitStatus === 0) {
    throw new RangeError('a clean exit (status 0) is not a failure; use exitOutcome');
  }
  const text = typeof stderrTail === 'string' ? stderrTail : latin1(stderrTail);
  if (NOT_FOUND_PATTERN.test(text)) return 'not_found';
  if (UNDECODABLE_PATTERN.test(text)) return 'undecodable';
  return 'render_failed';
}

/** Success for status 0, whatever stderr says; otherwise the failure class. */
export function exitOutcome(
  exitStatus: number | null,
  stderrTail: string | Uint8Array,
): ExitOutcome {
  if (exitStatus === 0) return { ok: true };
  return { ok: false, class: classifyFailure(exitStatus, stderrTail) };
}

/** Byte-for-byte text: a tail cut mid-character still matches its ASCII error lines. */
function latin1(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1');
}
