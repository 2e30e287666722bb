/**
 * The waiting room's endpoints (`/api/v1/queue/join|status|ticket`), present when
 * `AP_WAITING_ROOM` is on. A join takes a ticket only with the operator's credential (a signed
 * render path, see roomAccess.ts); sessions are named only by cookies this process minted.
 *
 * ## Invariants
 * - **A new ticket always gets a new session**: a planted cookie never names the joiner's ticket.
 * - **A repeated join is the same ticket** (and, as a poll, refreshes its heartbeat).
 * - **Every answer is `no-store` JSON**, but the 204 of a leave (no body).
 *
 * ## Races
 * - *Two joins of one session at once*: the room's chart orders them; both get its answer.
 *
 * ## Events
 * None.
 */
import {
  type Exchange,
  fail,
  JSON_NO_STORE,
  json,
  type StageContext,
  send,
  sessionOf,
  sessions,
} from '../exchange.js';
import { optionGrammarOf } from '../presets.js';
import { joinCredential, sessionSetCookie } from '../roomAccess.js';
import { signatureConfigOf } from '../signature.js';

const NO_SUCH_TICKET = { error: 'not_found', message: 'No such ticket' } as const;

/** Answers one waiting-room call (404 route for a path or method it does not know). */
export async function queueStage(
  x: Exchange,
  ctx: StageContext,
  path: string,
  method: string,
): Promise<void> {
  const { config, services } = ctx;
  const room = services.waitingRoom!;
  let session = sessionOf(x.req);
  const headers: Record<string, string> = { ...JSON_NO_STORE };
  if (path === '/api/v1/queue/join' && method === 'POST') {
    // Only the operator's credential (a signed render path) takes a ticket: see roomAccess.ts.
    const credential = joinCredential(
      x.req.url ?? '',
      signatureConfigOf(config),
      Math.floor(services.nowMs() / 1000),
      optionGrammarOf(config),
    );
    if (!credential.ok) {
      fail(x, credential.failure);
      return;
    }
    if (session) {
      // A repeated join is the same ticket (as a poll, it also refreshes the heartbeat).
      const held = await room.status(session);
      if (held.type === 'ticket') {
        send(x, 200, headers, json(held.ticket));
        return;
      }
    }
    // A new ticket always gets a new session: a planted cookie never names the joiner's ticket.
    const minted = sessions.mint();
    session = minted.session;
    headers['set-cookie'] = sessionSetCookie(minted.value, config.cookieSecure);
    const r = await room.join(session);
    if (r.type === 'full') {
      send(
        x,
        429,
        { ...headers, 'retry-after': String(Math.max(1, r.retryAfterS)) },
        json({ error: 'queue_full', message: 'Waiting room is full' }),
      );
      return;
    }
    send(x, 200, headers, json(r.ticket));
    return;
  }
  if (path === '/api/v1/queue/status' && (method === 'GET' || method === 'HEAD')) {
    const r = session ? await room.status(session) : ({ type: 'unknown' } as const);
    if (r.type === 'unknown') {
      send(x, 404, headers, json(NO_SUCH_TICKET));
      return;
    }
    send(x, 200, headers, json(r.ticket));
    return;
  }
  if (path === '/api/v1/queue/ticket' && method === 'DELETE') {
    const r = session ? await room.leave(session) : ({ type: 'unknown' } as const);
    if (r.type === 'unknown') {
      send(x, 404, headers, json(NO_SUCH_TICKET));
      return;
    }
    x.res.writeHead(204, { 'cache-control': 'no-store', ...x.cors });
    x.res.end();
    return;
  }
  fail(x, { type: 'not_found', scope: 'route' });
}
