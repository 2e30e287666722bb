/**
 * `resolveRemote`: the one entry point the handler calls for a source that is not on local disk,
 * dispatching by scheme to `s3.ts` and `https.ts`. What it returns names the source and knows
 * how to `open` it: the proxy fetches the bytes into a spool (`spool.ts`) and ffmpeg reads that
 * descriptor, never a URL.
 *
 * ## Invariants
 * - **Authorisation is re-checked here** (the allowlist, host and port), so a caller that
 *   skipped it still cannot reach an unlisted origin.
 * - **Outcomes are data**: a `ResolvedSource`, or a `Failure` the error table maps (404, 413,
 *   500 `not_configured`, 502 `upstream_unavailable`). Nothing here throws for client input.
 *
 * ## Races
 * See the two resolvers.
 *
 * ## Events
 * None.
 */
import type { Config } from '../config/index.js';
import type { Failure } from '../core/failure.js';
import type { ResolvedSource, Source } from '../core/source.js';
import { type ResolveHttpsOptions, resolveHttpsSource } from './https.js';
import { resolveS3Source } from './s3.js';

export type { ResolveHttpsOptions } from './https.js';
export type { ResolveRemoteOptions } from './s3.js';

/** A remote source → its findings and opener, or the failure to answer. Local is a TypeError. */
export function resolveRemote(
  source: Source,
  canonical: string,
  config: Config,
  options: ResolveHttpsOptions = {},
): Promise<ResolvedSource | { failure: Failure }> {
  switch (source.scheme) {
    case 's3':
      return resolveS3Source(source, canonical, config, options);
    case 'https':
      return resolveHttpsSource(source, canonical, config, options);
    default:
      throw new TypeError(`resolveRemote: ${source.scheme}:// sources are resolved locally`);
  }
}
