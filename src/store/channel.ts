/**
 * ChunkChannel: a push-to-pull bridge from the Tee (which is handed chunks as the coordinator
 * broadcasts them) to `VariantStore.put` (which pulls an `AsyncIterable<Buffer>`).
 *
 * ## Invariants
 * - **Never throttles the producer.** `push` always accepts: the render runs at full speed and
 *   the writer lags. What is queued are references to the coordinator's own chunk buffers, which
 *   its backlog holds anyway, bounded by `AP_MAX_VARIANT_BYTES`: no copy is made here.
 * - **Exactly one ending.** `end()` or `fail(error)`, whichever comes first; later calls and
 *   later pushes are ignored.
 * - **Order is kept**, and every chunk pushed before `end()` is yielded before the iteration ends.
 *   After `fail()`, queued chunks are dropped and the next pull throws.
 *
 * ## Races
 * - *Pull waiting when the producer ends*: the pending pull is settled by `end`/`fail` itself.
 * - *Consumer stops early* (`return()` from `for await … break`): the channel is closed and
 *   its queue dropped, so a producer that keeps pushing holds nothing.
 *
 * ## Events
 * None.
 */
import { StoreError } from './types.js';

type Waiter = {
  resolve: (r: IteratorResult<Buffer>) => void;
  reject: (e: unknown) => void;
};

export class ChunkChannel implements AsyncIterable<Buffer> {
  readonly #queue: Buffer[] = [];
  #head = 0;
  #waiter: Waiter | null = null;
  #state: 'open' | 'ended' | 'failed' = 'open';
  #error: unknown = undefined;
  #bytes = 0;

  /** Bytes pushed so far. */
  get bytes(): number {
    return this.#bytes;
  }

  get closed(): boolean {
    return this.#state !== 'open';
  }

  push(chunk: Buffer): void {
    if (this.#state !== 'open' || chunk.length === 0) return;
    this.#bytes += chunk.length;
    const waiter = this.#waiter;
    if (waiter) {
      this.#waiter = null;
      waiter.resolve({ value: chunk, done: false });
      return;
    }
    this.#queue.push(chunk);
  }

  end(): void {
    if (this.#state !== 'open') return;
    this.#state = 'ended';
    const waiter = this.#waiter;
    if (waiter && this.#head >= this.#queue.length) {
      this.#waiter = null;
      waiter.resolve({ value: undefined, done: true });
    }
  }

  fail(error: unknown): void {
    if (this.#state !== 'open') return;
    this.#state = 'failed';
    this.#error = error;
    this.#queue.length = 0;
    this.#head = 0;
    const waiter = this.#waiter;
    if (waiter) {
      this.#waiter = null;
      waiter.reject(error);
    }
  }

  #next(): Promise<IteratorResult<Buffer>> {
    if (this.#state === 'failed') return Promise.reject(this.#error);
    if (this.#head < this.#queue.length) {
      const value = this.#queue[this.#head]!;
      this.#queue[this.#head++] = undefined as unknown as Buffer;
      if (this.#head === this.#queue.length) {
        this.#queue.length = 0;
        this.#head = 0;
      }
      return Promise.resolve({ value, done: false });
    }
    if (this.#state === 'ended') return Promise.resolve({ value: undefined, done: true });
    if (this.#waiter) return Promise.reject(new TypeError('ChunkChannel has one reader'));
    return new Promise((resolve, reject) => {
      this.#waiter = { resolve, reject };
    });
  }

  [Symbol.asyncIterator](): AsyncIterator<Buffer> {
    return {
      next: () => this.#next(),
      return: () => {
        if (this.#state === 'open') {
          this.#state = 'ended';
          this.#queue.length = 0;
          this.#head = 0;
        }
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
}

/**
 * Iterates `chunks` for a store's `put`, ending the wait with `ERR_STORE_ABORTED` as soon as
 * `signal` aborts (even if the iterable never yields again). An error thrown by the iterable
 * itself means its producer gave up, and is reported as `ERR_STORE_ABORTED` too.
 */
export async function* pullChunks(
  chunks: AsyncIterable<Buffer>,
  signal?: AbortSignal,
): AsyncGenerator<Buffer> {
  const it = chunks[Symbol.asyncIterator]();
  const abortedError = (cause: unknown) =>
    new StoreError('ERR_STORE_ABORTED', 'aborted', 'variant write abandoned', { cause });
  let onAbort: (() => void) | undefined;
  const abortedP = signal
    ? new Promise<never>((_, reject) => {
        onAbort = () => reject(abortedError(signal.reason));
        if (signal.aborted) onAbort();
        else signal.addEventListener('abort', onAbort, { once: true });
      })
    : undefined;
  abortedP?.catch(() => {}); // raced below; never an unhandled rejection
  let finished = false;
  try {
    while (true) {
      let step: IteratorResult<Buffer>;
      try {
        step = await (abortedP ? Promise.race([it.next(), abortedP]) : it.next());
      } catch (error) {
        throw error instanceof StoreError ? error : abortedError(error);
      }
      if (step.done) {
        finished = true;
        return;
      }
      yield step.value;
    }
  } finally {
    if (onAbort) signal?.removeEventListener('abort', onAbort);
    if (!finished) void it.return?.()?.catch?.(() => {});
  }
}
