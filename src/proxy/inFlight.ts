/**
 * The responses the proxy's handler has begun and not yet closed, so `close()` can let them
 * finish before it cancels what is left.
 *
 * ## Invariants
 * - **A response counts from `track` until its `close` event**, whichever way it ends (finished,
 *   torn down, the client gone).
 * - **`drain(ms)` resolves when none is left, or after `ms`**, whichever comes first; at once
 *   when none is in flight or `ms` is 0. It never rejects.
 */
import type { ServerResponse } from 'node:http';

export class ResponsesInFlight {
  readonly #open = new Set<ServerResponse>();
  #onDrained: (() => void) | undefined;

  /** Responses begun and not yet closed. */
  get size(): number {
    return this.#open.size;
  }

  track(res: ServerResponse): void {
    this.#open.add(res);
    res.once('close', () => {
      this.#open.delete(res);
      if (this.#open.size === 0) this.#onDrained?.();
    });
  }

  /** Resolves when no response is in flight, or after `ms`. */
  drain(ms: number): Promise<void> {
    if (this.#open.size === 0 || ms <= 0) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.#onDrained = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}
