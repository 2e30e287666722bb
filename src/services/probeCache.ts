/**
 * Probe verdicts kept per source version, so the second variant of a source does not run ffprobe
 * again. A source version is its canonical name plus the size and modification time its
 * resolution reported; a source that reports either as unknown is never cached (a host without
 * `Last-Modified` could change under the same name).
 *
 * ## Invariants
 * - **Only verdicts about the bytes are kept**: a parsed probe, or the refusals that follow from
 *   the content (`video_source`, `undecodable_source`). Timeouts, a missing file and probe
 *   failures are about the moment, never cached.
 * - **Bounded**: at most `capacity` entries; the least recently used goes first.
 * - **A changed file is a new key**: size or mtime differ, so a stale verdict is unreachable and
 *   ages out.
 *
 * ## Races
 * - *Two probes of one version finish together*: the registry in `probeService.ts` lets only one
 *   run per source; a second `set` for the same key only refreshes it.
 */
import type { ResolvedSource } from '../core/source.js';

/**
 * Default bound. A verdict is about 1 KiB (the /info body and media fields), so this is about
 * 2 MiB at most: enough for a working set of sources, cheap beside one render.
 */
export const PROBE_CACHE_ENTRIES = 2_048;

export class ProbeCache<V> {
  readonly #entries = new Map<string, V>();
  hits = 0;
  misses = 0;

  constructor(readonly capacity: number = PROBE_CACHE_ENTRIES) {
    if (!Number.isInteger(capacity) || capacity < 0) {
      throw new RangeError(`capacity must be an integer >= 0, got ${capacity}`);
    }
  }

  /** The cache key of a source version, or `undefined` when the version is not known. */
  static keyOf(source: Pick<ResolvedSource, 'canonical' | 'size' | 'mtimeMs'>): string | undefined {
    const { size, mtimeMs } = source;
    if (size === undefined || mtimeMs === undefined) return undefined;
    return `${source.canonical}\n${size}\n${mtimeMs}`;
  }

  get size(): number {
    return this.#entries.size;
  }

  get(key: string | undefined): V | undefined {
    if (key === undefined) return undefined;
    const value = this.#entries.get(key);
    if (value === undefined) {
      this.misses += 1;
      return undefined;
    }
    // Re-insert: Map iteration order is insertion order, so the front is the least recent.
    this.#entries.delete(key);
    this.#entries.set(key, value);
    this.hits += 1;
    return value;
  }

  set(key: string | undefined, value: V): void {
    if (key === undefined || this.capacity === 0) return;
    this.#entries.delete(key);
    this.#entries.set(key, value);
    if (this.#entries.size > this.capacity) {
      const oldest = this.#entries.keys().next().value as string;
      this.#entries.delete(oldest);
    }
  }
}
