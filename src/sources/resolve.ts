/**
 * `resolveSource`: the one call the request path makes to turn an authorised source into a
 * `ResolvedSource` (stat, size bound, and the opener ffmpeg's descriptor will come from), for
 * local and remote sources alike. Local files are resolved under `AP_LOCAL_ROOT` here
 * (`local.ts`); remote ones by the resolver the caller holds (`remote.ts` in the proxy: s3 and
 * https, with presigning), so a process without remote access answers them 404.
 *
 * ## Invariants
 * - **Outcomes are data**: a `ResolvedSource`, or a `Failure` the error table maps (404, 413,
 *   and for remote sources 500 `not_configured`, 502 `upstream_unavailable`). Nothing throws
 *   for client input.
 * - **`enforceSize` bounds the source by `AP_MAX_SRC_BYTES`** at stat and again at open (a
 *   render); without it (`/info`) any size is described.
 * - **Every local refusal is the same 404**, whatever the reason (see `local.ts`).
 *
 * ## Races
 * - *The file changes between stat and open*: the opener re-checks what it opened (`openLocal`),
 *   and the size bound is applied to the opened file too.
 *
 * ## Events
 * None.
 */
import type { Config } from '../config/index.js';
import type { Failure } from '../core/failure.js';
import type { ResolvedSource, Source } from '../core/source.js';
import { openLocal, resolveLocal } from './local.js';

/** A remote source → its findings and opener, or the failure to answer. */
export type RemoteResolver = (
  source: Source,
  canonical: string,
  options: { enforceSize: boolean },
) => Promise<ResolvedSource | { failure: Failure }>;

export interface ResolveSourceOptions {
  /** Bound the source by `AP_MAX_SRC_BYTES` (a render), or not (`/info`). */
  readonly enforceSize: boolean;
  /** How remote sources are resolved; absent, every remote source is a 404. */
  readonly remote?: RemoteResolver | undefined;
}

export async function resolveSource(
  config: Pick<Config, 'localRoot' | 'maxSrcBytes'>,
  source: Source,
  canonical: string,
  options: ResolveSourceOptions,
): Promise<ResolvedSource | { failure: Failure }> {
  const { enforceSize, remote } = options;
  if (source.scheme === 'local') {
    const limit = enforceSize ? { maxSrcBytes: config.maxSrcBytes } : {};
    const r = await resolveLocal(config.localRoot, source.path, limit);
    if (!r.ok)
      return {
        failure: { type: r.reason === 'source_too_large' ? 'source_too_large' : 'not_found' },
      };
    return {
      source,
      canonical,
      input: { url: r.path, kind: 'local' },
      open: () => openLocal(config.localRoot, r.path, limit),
      size: r.size,
      mtimeMs: r.mtimeMs,
    };
  }
  if (!remote) return { failure: { type: 'not_found' } };
  return remote(source, canonical, { enforceSize });
}
