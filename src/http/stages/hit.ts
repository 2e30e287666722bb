/**
 * Stage 6, the variant store HIT: looked up before the source is touched, so a HIT takes no slot
 * and no probe and survives the source's deletion. Served by `hit.ts` (a 302 to a presigned URL,
 * or the bytes with ranges); an entry that vanished between lookup and read falls through to the
 * render path with nothing written.
 *
 * ## Invariants
 * - **No actor is started for a HIT**: the delivery chart is the render path's only.
 * - **`x-audio-proxy: HIT` is recorded before serving**, since the response may close before
 *   `serveHit` resolves (the access log reads it at close).
 *
 * ## Races
 * - *Entry deleted between lookup and read*: `miss`, nothing written, the render path answers.
 *
 * ## Events
 * See `hit.ts`.
 */
import {
  ANSWERED,
  type Answered,
  type Exchange,
  nextStage,
  type StageContext,
} from '../exchange.js';
import { lookupVariant, serveHit } from '../hit.js';
import { type RenderRoute, surrogateHeaders, type VariantDescription } from './variant.js';

/** `ANSWERED` when the stored variant was served, else undefined (no store, or a miss). */
export async function hitStage(
  x: Exchange,
  ctx: StageContext,
  route: RenderRoute,
  variant: VariantDescription,
  nowS: number,
): Promise<Answered | undefined> {
  const { store } = ctx.services;
  if (!store) return undefined;
  const head = await lookupVariant(store, variant.key);
  const turn = nextStage(x);
  if (turn) await turn;
  if (!head) return undefined;
  x.cache = 'HIT'; // set before: the response may close before serveHit resolves
  const outcome = await serveHit(x.req, x.res, {
    store,
    key: variant.key,
    head,
    cacheControl: variant.cacheControl,
    etag: variant.etag,
    extraHeaders: surrogateHeaders(variant.surrogateKey),
    corsHeaders: x.cors,
    serveMode: ctx.config.serveMode,
    presignTtlS: ctx.config.presignTtlS,
    exp: route.request.exp,
    nowS,
    format: route.options.format,
  });
  if (outcome === 'served') return ANSWERED;
  x.cache = undefined; // the stored copy could not be served: the render path answers
  return undefined;
}
