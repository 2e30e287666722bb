/**
 * The source's nouns: where an input lives (`Source`), a source that passed authorisation and
 * stat (`ResolvedSource`), and how one ffmpeg/ffprobe run gets its bytes (`OpenSource`, a lease
 * on a descriptor the proxy opened itself).
 *
 * Parsing and authorising a source string is `sources/parse.ts`; resolving local and remote
 * sources is `sources/`; handing the descriptor to ffmpeg is the worker's. ffmpeg never opens a
 * path or URL of its own: it reads the descriptor of the lease.
 *
 * Imports nothing of the project.
 */

/** Where an input lives, as the URL named it (already decoded and normalised). */
export type Source =
  | { readonly scheme: 'local'; readonly path: string }
  | { readonly scheme: 's3'; readonly bucket: string; readonly key: string }
  /** `host` is the normalised, bracketless host the allowlist matches. */
  | { readonly scheme: 'https'; readonly url: string; readonly host: string };

/** A source string's parse: the source and its canonical spelling (half of the cache key). */
export type ParsedSource =
  | { readonly ok: true; readonly source: Source; readonly canonical: string }
  | { readonly ok: false; readonly error: 'not_found' };

/** Why a source could not be opened, as the error table spells it. */
export type OpenRefusal =
  | 'not_found'
  | 'source_too_large'
  | 'upstream_unavailable'
  | 'not_configured';

/** One run's claim on an open source. */
export interface SourceLease {
  /** The process-wide descriptor number; valid until `release`. */
  readonly fd: number;
  /** Bytes in the opened file (fstat at open, or the spool's final length). */
  readonly size: number;
  release(): void;
}

/** Opening a source for one run: a lease, or why not. */
export type OpenOutcome =
  | { readonly ok: true; readonly lease: SourceLease }
  | { readonly ok: false; readonly refusal: OpenRefusal; readonly detail?: string };

/** Opens a resolved source for one run. `signal` abandons a fetch in progress. */
export type OpenSource = (signal?: AbortSignal) => Promise<OpenOutcome>;

/** A source that passed authorisation and stat, as ffmpeg will read it. */
export interface ResolvedSource {
  readonly source: Source;
  readonly canonical: string;
  /** Where the bytes come from (for logs): the resolved path, or the source URL. */
  readonly input: {
    readonly url: string;
    readonly kind: 'local' | 's3' | 'https';
  };
  /**
   * Opens the source for one ffmpeg/ffprobe run: the proxy reads, ffmpeg gets the descriptor
   * (`sources/lease.ts`). Absent only in tests that never spawn.
   */
  readonly open?: OpenSource;
  readonly size?: number;
  readonly mtimeMs?: number;
}
