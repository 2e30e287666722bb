/**
 * One operation per key at a time: callers asking for a key whose operation is still running get
 * that operation's promise instead of starting another (what Go's singleflight does). Used where a
 * burst of identical requests would otherwise repeat the same file-system round trips: resolving
 * a local source, looking a variant up in the store.
 *
 * ## Invariants
 * - **At most one operation per key is running.** The entry is removed when its promise settles,
 *   so the next caller after that starts afresh: nothing is cached beyond the operation's life.
 * - **A joiner sees a result no older than its own arrival minus one operation's duration**, the
 *   same window a caller of its own operation would have between the check and the use.
 * - **Failures are shared too**: a rejected operation rejects every joiner, and is forgotten.
 *
 * ## Races
 * - *An operation settles while a caller is joining*: both happen on the one thread; a caller
 *   either finds the entry (and gets the settled promise's value) or does not (and starts anew).
 */
export class InFlight<K, V> {
  readonly #running = new Map<K, Promise<V>>();

  /** The running operation for `key`, or `start()`'s, registered until it settles. */
  run(key: K, start: () => Promise<V>): Promise<V> {
    const running = this.#running.get(key);
    if (running !== undefined) return running;
    const p = start();
    this.#running.set(key, p);
    const forget = () => {
      if (this.#running.get(key) === p) this.#running.delete(key);
    };
    p.then(forget, forget);
    return p;
  }

  /** Operations running now. */
  get size(): number {
    return this.#running.size;
  }
}
