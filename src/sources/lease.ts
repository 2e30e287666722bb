/**
 * Open sources: the descriptor the proxy opened for a source (a local file, or the private spool
 * of a remote one), lent to ffmpeg/ffprobe runs and closed exactly once.
 *
 * A `SharedHandle` wraps one `FileHandle`. Each run takes a `SourceLease` (`acquire`) and gives
 * it back (`release`, idempotent) once its task has settled; the handle closes when the last
 * lease is back and `lingerMs` has passed with no new one (0: at once). The child never shares
 * the proxy's file offset: it inherits the descriptor as fd 3 and opens `/proc/self/fd/3`, a new
 * open file description of the same inode, so concurrent readers of one handle do not interfere.
 *
 * ## Invariants
 * - **One close per handle**, after every lease was released and never while one is out.
 * - **A lease is released at most once**; a second `release` is a no-op.
 * - **`acquire` after the close is a programmer error** (TypeError): owners drop a closed handle
 *   from their maps in `onClosed` before anyone can ask it again.
 *
 * ## Races
 * - *A lease is taken during the linger*: the pending close is cancelled.
 *
 * ## Events
 * `onClosed` (constructor option): called once, right after the close began.
 */
import type { FileHandle } from 'node:fs/promises';
import type { SourceLease } from '../core/source.js';

export class SharedHandle {
  readonly #handle: FileHandle;
  readonly #size: number;
  readonly #lingerMs: number;
  readonly #onClosed: (() => void) | undefined;
  #leases = 0;
  #closed = false;
  #timer: NodeJS.Timeout | null = null;

  constructor(
    handle: FileHandle,
    size: number,
    options: { readonly lingerMs?: number; readonly onClosed?: () => void } = {},
  ) {
    this.#handle = handle;
    this.#size = size;
    this.#lingerMs = options.lingerMs ?? 0;
    this.#onClosed = options.onClosed;
  }

  /** Bytes in the file. */
  get size(): number {
    return this.#size;
  }

  get closed(): boolean {
    return this.#closed;
  }

  acquire(): SourceLease {
    if (this.#closed) throw new TypeError('SharedHandle.acquire after close');
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    this.#leases += 1;
    let released = false;
    return {
      fd: this.#handle.fd,
      size: this.#size,
      release: () => {
        if (released) return;
        released = true;
        this.#leases -= 1;
        if (this.#leases === 0) this.#idle();
      },
    };
  }

  /** Closes now if no lease is out (for an owner that gives up before lending it). */
  discard(): void {
    if (this.#leases === 0) this.#close();
  }

  #idle(): void {
    if (this.#lingerMs <= 0) {
      this.#close();
      return;
    }
    this.#timer = setTimeout(() => {
      this.#timer = null;
      if (this.#leases === 0) this.#close();
    }, this.#lingerMs);
    this.#timer.unref();
  }

  #close(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    this.#onClosed?.();
    this.#handle.close().catch(() => {});
  }
}

/** A lease on a handle of its own, closed at release (a local file: each run opens afresh). */
export function soleLease(handle: FileHandle, size: number): SourceLease {
  return new SharedHandle(handle, size).acquire();
}
