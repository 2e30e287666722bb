/**
 * `/info`: what ffprobe says about an authorised source, as JSON. Local sources carry an ETag
 * (from size and mtime), so a client can revalidate (304) without a probe; remote ones are
 * cached briefly instead. A HEAD stops before the probe.
 *
 * ## Invariants
 * - **No size bound**: `/info` describes a source of any size (`enforceSize: false`).
 * - **The stat's size wins** over the probe's in the body (the proxy's own reading).
 *
 * ## Races
 * - *The file changes between stat and probe*: the body may mix both; the ETag is the stat's,
 *   so the next revalidation sees the change.
 *
 * ## Events
 * None.
 */
import { localEtagMaterial } from '../../sources/local.js';
import { resolveSource } from '../../sources/resolve.js';
import { ifNoneMatchMatches, infoEtag } from '../cacheKey.js';
import { type Exchange, fail, json, type StageContext, send } from '../exchange.js';
import { type AuthorisedSource, remoteOf } from './source.js';

/** /info cache lifetimes: with an ETag the answer can be revalidated, without one keep it short. */
const INFO_CACHE_CONTROL = 'public, max-age=3600';
const INFO_CACHE_CONTROL_NO_ETAG = 'public, max-age=60';

/** Answers `/info` for `authorised` (200, 304, or the stat's or probe's failure). */
export async function infoStage(
  x: Exchange,
  ctx: StageContext,
  authorised: AuthorisedSource,
): Promise<void> {
  const { source, canonical } = authorised;
  const resolved = await resolveSource(ctx.config, source, canonical, {
    enforceSize: false,
    remote: remoteOf(ctx.services),
  });
  if ('failure' in resolved) {
    fail(x, resolved.failure);
    return;
  }
  const material =
    resolved.size !== undefined && resolved.mtimeMs !== undefined
      ? localEtagMaterial(resolved.size, resolved.mtimeMs)
      : undefined;
  const headers: Record<string, string> = {
    'content-type': 'application/json; charset=utf-8',
    'cache-control': material ? INFO_CACHE_CONTROL : INFO_CACHE_CONTROL_NO_ETAG,
  };
  if (material) headers.etag = infoEtag(canonical, material);
  const inm = x.req.headers['if-none-match'];
  if (headers.etag && typeof inm === 'string' && ifNoneMatchMatches(inm, headers.etag)) {
    x.res.writeHead(304, {
      etag: headers.etag,
      'cache-control': headers['cache-control']!,
      ...x.cors,
    });
    x.res.end();
    return;
  }
  if (x.head) {
    x.res.writeHead(200, { ...headers, ...x.cors });
    x.res.end();
    return;
  }
  const probe = await ctx.services.probe(resolved);
  if (!probe.ok) {
    fail(x, probe.failure);
    return;
  }
  const body = { ...probe.info };
  if (resolved.size !== undefined) body.size = resolved.size;
  send(x, 200, headers, json(body));
}
