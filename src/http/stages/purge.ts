/**
 * The operator's purge: `DELETE /{signature}/purge/{options}/plain/{source}` deletes that variant
 * from the variant store and this node's hot cache, then tells the other nodes of a cluster to
 * do the same (`ClusterEndpoints.purge`, Redis pub/sub). The answer names the variant key and
 * the source's surrogate key, which a CDN purges every variant of the source by.
 *
 * The signature covers `/purge/…`, so it is not the render URL's: a client holding a render URL
 * cannot purge it, only someone with a key can sign one (`audio-proxy sign /purge/…`). An
 * `insecure` signature is refused even where `AP_ALLOW_INSECURE` lets it render.
 *
 * ## Invariants
 * - **The key is the render's**: the same option grammar (presets, the canonical order) and the
 *   same canonical source make the same `cacheKey`, so a purge URL names exactly the variant its
 *   render URL serves. The options' `exp` is a request option, not part of the key.
 * - **The source is parsed, never read or authorised**: a purge of a file already deleted, or of
 *   a host no longer allowed, still purges.
 * - **Idempotent**: purging an absent variant answers 200 as well.
 * - A store that cannot delete answers 502 `upstream_unavailable`; nothing is broadcast then.
 *
 * ## Races
 * - *A render of the same key is streaming into the store while it is purged*: its commit lands
 *   after the delete and the variant is back (its bytes are the same, unless the source changed
 *   under the render). Purge after replacing a source, not while its renders run.
 *
 * ## Events
 * The request is logged and counted like every request (`endpoint: purge`).
 */
import { parseSource } from '../../sources/parse.js';
import { cacheKey, surrogateKeyOf } from '../cacheKey.js';
import {
  ANSWERED,
  type Exchange,
  fail,
  JSON_NO_STORE,
  json,
  type StageContext,
  send,
} from '../exchange.js';
import { optionsStage } from './options.js';

/** The first segment of a purge's signed path. */
export const PURGE_SEGMENT = 'purge';

/** What a purge answers (200). */
export interface PurgeAnswer {
  /** The variant key (the render's ETag without quotes). */
  readonly key: string;
  /** The source's `Surrogate-Key` / `Cache-Tag`: purge it at the CDN for every variant. */
  readonly surrogate_key: string;
  /** The store it was deleted from (`file`, `s3`), or null without a variant store. */
  readonly store: string | null;
  /** Other nodes told to purge it (0 outside cluster mode); null when Redis did not answer. */
  readonly nodes: number | null;
}

/** Answers a DELETE whose signature verified; `rest` is the signed path after the signature. */
export async function purgeStage(x: Exchange, ctx: StageContext, rest: string): Promise<void> {
  x.endpoint = 'purge';
  const prefix = `/${PURGE_SEGMENT}/`;
  if (!rest.startsWith(prefix)) {
    fail(x, { type: 'not_found', scope: 'route' }); // DELETE of anything else: no such resource
    return;
  }
  const parsed = optionsStage(x, rest.slice(prefix.length - 1), ctx);
  if (parsed === ANSWERED) return;
  if (parsed.endpoint !== 'render') {
    fail(x, { type: 'not_found', scope: 'route' }); // /info keeps no variant
    return;
  }
  const source = parseSource(parsed.source);
  if (!source.ok) {
    fail(x, { type: 'not_found' });
    return;
  }
  const key = cacheKey(parsed.normalized, source.canonical);
  const { store, cluster } = ctx.services;
  if (store) {
    try {
      await store.delete(key);
    } catch {
      fail(x, { type: 'upstream_unavailable' });
      return;
    }
  }
  const nodes = store && cluster?.purge ? await cluster.purge(key) : 0;
  const answer: PurgeAnswer = {
    key,
    surrogate_key: surrogateKeyOf(source.canonical),
    store: store?.kind ?? null,
    nodes: nodes ?? null,
  };
  send(x, 200, { ...JSON_NO_STORE }, json(answer));
}
