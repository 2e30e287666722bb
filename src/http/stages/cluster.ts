/**
 * Stage 7b, cluster mode only: one render per key across nodes. Before this node probes and
 * renders a MISS it claims the key; when a peer already holds the claim, that peer's answer is
 * relayed to the client instead and this request ends here.
 *
 * ## Invariants
 * - **A claim is released when the response closes** (`done`), whatever ended it.
 * - **Never fails**: Redis trouble is a `local` claim (see cluster/cluster.ts).
 *
 * ## Races
 * - *Client leaves while relayed*: the relay's own business; nothing here is held.
 *
 * ## Events
 * None.
 */
import { ANSWERED, type Answered, type Exchange, type StageContext } from '../exchange.js';
import type { BeforeRenderOutcome } from '../services.js';

export type LocalClaim = Extract<BeforeRenderOutcome, { type: 'local' }>;

/** This node's claim (null outside cluster mode), or `ANSWERED` when a peer's answer was relayed. */
export async function claimStage(
  x: Exchange,
  ctx: StageContext,
  key: string,
): Promise<LocalClaim | null | Answered> {
  const { cluster } = ctx.services;
  if (!cluster) return null;
  const routed = await cluster.beforeRender(x.req, x.res, key);
  if (routed.type === 'relayed') return ANSWERED;
  x.res.once('close', () => routed.done());
  return routed;
}
