/**
 * Stage 4, the source: the source string parsed and authorised (the allowlist, `AP_LOCAL_ROOT`),
 * before any conditional request or store access; and later, on the render path only, its
 * stat (`statStage`: 404 for a missing source, 413 past `AP_MAX_SRC_BYTES`).
 *
 * ## Invariants
 * - **The 404 is blind**: an unparseable source and an unauthorised one answer the same bytes,
 *   and neither touches the file system or the network beyond authorisation.
 * - **Local and remote resolve through one call** (`sources/resolve.ts`).
 *
 * ## Races
 * - *Client leaves during the stat*: the answer goes to a closed response; nothing is held.
 *
 * ## Events
 * None.
 */
import type { ResolvedSource, Source } from '../../core/source.js';
import { authorizeSource, parseSource } from '../../sources/parse.js';
import { type RemoteResolver, resolveSource } from '../../sources/resolve.js';
import {
  ANSWERED,
  type Answered,
  type Exchange,
  fail,
  nextStage,
  type StageContext,
} from '../exchange.js';
import type { HandlerServices } from '../services.js';

/** A source that parsed and is authorised, with its canonical spelling (half of the cache key). */
export interface AuthorisedSource {
  readonly source: Source;
  readonly canonical: string;
}

/** The authorised source, or `ANSWERED` (404). */
export async function sourceStage(
  x: Exchange,
  ctx: StageContext,
  sourceString: string,
): Promise<AuthorisedSource | Answered> {
  const src = parseSource(sourceString);
  if (!src.ok) {
    fail(x, { type: 'not_found' });
    return ANSWERED;
  }
  const authorised = await authorizeSource(src.source, {
    allowlist: ctx.config.sourceAllowlist,
    localRoot: ctx.config.localRoot,
  });
  if (!authorised.ok) {
    fail(x, { type: 'not_found' });
    return ANSWERED;
  }
  return { source: src.source, canonical: src.canonical };
}

/** The services' remote resolver as a plain function, if there is one. */
export function remoteOf(services: HandlerServices): RemoteResolver | undefined {
  const { resolveRemote } = services;
  return resolveRemote
    ? (source, canonical, o) => resolveRemote.call(services, source, canonical, o)
    : undefined;
}

/** The render path's stat: the resolved source (size-bounded), or `ANSWERED` (404, 413, 5xx). */
export async function statStage(
  x: Exchange,
  ctx: StageContext,
  authorised: AuthorisedSource,
): Promise<ResolvedSource | Answered> {
  const resolved = await resolveSource(ctx.config, authorised.source, authorised.canonical, {
    enforceSize: true,
    remote: remoteOf(ctx.services),
  });
  const turn = nextStage(x);
  if (turn) await turn;
  if ('failure' in resolved) {
    fail(x, resolved.failure);
    return ANSWERED;
  }
  return resolved;
}
