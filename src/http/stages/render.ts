/**
 * Stage 9, the render: a slot (or the one a ready waiting-room ticket reserved), the coordinator
 * for the variant key (a MISS starts one, a COALESCED request joins it), and the stream, which
 * the delivery chart owns from here (`http/delivery.ts`, `machines/delivery.ts`).
 *
 * ## Invariants
 * - **Every waiting-room claim is ended once**: a claimed session (implicitly or not) gets one
 *   `runEnded` when the delivery settles, `cancelled` if the response was torn down.
 *
 * ## Races
 * See `http/delivery.ts`.
 *
 * ## Events
 * See `http/delivery.ts`.
 */
import type { RenderRequest } from '../../core/request.js';
import { deliver } from '../delivery.js';
import { type Exchange, type StageContext, sessionOf } from '../exchange.js';

/** Renders and streams `request` (its slot adoption filled in here); settles when it has ended. */
export async function renderStage(
  x: Exchange,
  ctx: StageContext,
  request: RenderRequest,
  headers: Record<string, string>,
): Promise<void> {
  const room = ctx.services.waitingRoom;
  // A ready waiting-room ticket hands its reserved slot over; every claim, implicit ones (no
  // reservation) included, is ended by the `finally` below.
  const session = room ? sessionOf(x.req) : undefined;
  const claimed = session ? await room!.claim(session) : null;
  const adoptSlotId = claimed?.adoptSlotId;
  try {
    await deliver(x, ctx, adoptSlotId ? { ...request, adoptSlotId } : request, headers);
  } finally {
    if (session && claimed) room!.runEnded(session, x.res.destroyed);
  }
}
