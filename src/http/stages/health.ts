/**
 * `/health` and `/ready` on the public listener: liveness (version; ffmpeg, with the options it
 * cannot honour as `missing`, see `services/encoderReport.ts`; the worker pools' state) and
 * readiness (the render queue's depth against `AP_READY_QUEUE_THRESHOLD`, with hysteresis: see
 * machines/readiness.ts). Both are `no-store` JSON.
 *
 * A missing option does not make `/health` fail: the node serves everything else, and the
 * boot log and `missing` say what to install.
 *
 * ## Invariants
 * - **`/health` is 200 while the process serves**, a pool restart in progress included; only
 *   shutdown (answered by the router, before this) makes it 503.
 * - **`/ready` is 503 only when the latch is tripped**; every uncertainty reads ready.
 *
 * ## Races
 * None of their own.
 *
 * ## Events
 * None.
 */
import { type Exchange, JSON_NO_STORE, json, type StageContext, send } from '../exchange.js';

export function healthStage(x: Exchange, ctx: StageContext): void {
  const { services } = ctx;
  x.endpoint = 'health';
  send(
    x,
    200,
    { ...JSON_NO_STORE },
    json({
      status: 'ok',
      version: services.version,
      ffmpeg: services.ffmpeg(),
      ...(services.pools ? { pools: services.pools() } : {}),
    }),
  );
}

export async function readyStage(x: Exchange, ctx: StageContext): Promise<void> {
  x.endpoint = 'ready';
  const r = await ctx.services.ready();
  send(
    x,
    r.ready ? 200 : 503,
    { ...JSON_NO_STORE },
    json({ status: r.ready ? 'ready' : 'not_ready', queued: r.queued, threshold: r.threshold }),
  );
}
