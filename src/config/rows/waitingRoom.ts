/**
 * Rows of the ticketed waiting room: whether it is on, how long a reservation and a heartbeat
 * last, how many tickets it holds, how many render slots it may take, and its cookie's `Secure`.
 *
 * ## Invariants
 * - **Off by default.** Its other rows are checked whether it is on or not (a typo is reported
 *   either way); the slot rule across variables applies only when it is on.
 * - **The slot share follows the effective `AP_MAX_CONCURRENCY`** (read before it in the table).
 *
 * Not here: the rule that the room leaves at least one render slot to requests without a ticket
 * (`cross.ts`), which needs the room on and both slot counts valid.
 */
import {
  DEFAULT_WAITING_ROOM_HEARTBEAT_S,
  DEFAULT_WAITING_ROOM_MAX_LENGTH,
  DEFAULT_WAITING_ROOM_RESERVATION_S,
  DEFAULT_WAITING_ROOM_SLOT_SHARE,
} from '../defaults.js';
import { boolean, integer } from '../parsers.js';
import { row, SECTIONS } from '../row.js';
import { RULE } from '../rules.js';

const section = SECTIONS.limits;

export const WAITING_ROOM_ROWS = [
  row({
    name: 'AP_WAITING_ROOM',
    field: 'waitingRoom',
    section,
    default: '`false`',
    rule: RULE.boolean,
    doc: 'Enables the ticketed waiting room (`POST /api/v1/queue/join`, `GET /api/v1/queue/status`, `DELETE /api/v1/queue/ticket`).',
    read: (v) => boolean(v, false),
  }),
  row({
    name: 'AP_WAITING_ROOM_RESERVATION_SECONDS',
    field: 'waitingRoomReservationS',
    section,
    default: `\`${DEFAULT_WAITING_ROOM_RESERVATION_S}\``,
    rule: RULE.timeout,
    doc: 'How long a ready ticket holds its render slot waiting for the session to claim it.',
    read: (v) => integer(v, DEFAULT_WAITING_ROOM_RESERVATION_S, 'timeout'),
  }),
  row({
    name: 'AP_WAITING_ROOM_HEARTBEAT_SECONDS',
    field: 'waitingRoomHeartbeatS',
    section,
    default: `\`${DEFAULT_WAITING_ROOM_HEARTBEAT_S}\``,
    rule: RULE.timeout,
    doc: 'A queued ticket whose holder has not polled its status for this long is dropped.',
    read: (v) => integer(v, DEFAULT_WAITING_ROOM_HEARTBEAT_S, 'timeout'),
  }),
  row({
    name: 'AP_WAITING_ROOM_MAX_LENGTH',
    field: 'waitingRoomMaxLength',
    section,
    default: `\`${DEFAULT_WAITING_ROOM_MAX_LENGTH}\``,
    rule: RULE.positive,
    doc: 'Tickets the room holds; a join beyond it is a 429 with `Retry-After`.',
    read: (v) => integer(v, DEFAULT_WAITING_ROOM_MAX_LENGTH, 'positive'),
  }),
  row({
    name: 'AP_WAITING_ROOM_SLOTS',
    field: 'waitingRoomSlots',
    section,
    default: 'half the effective `AP_MAX_CONCURRENCY`, rounded down',
    rule: `${RULE.positive}, at most \`AP_MAX_CONCURRENCY\` − 1 when the room is on`,
    doc: 'Render slots the waiting room may hold for tickets (reserved or running); the rest always serve signed requests without a ticket. The room needs `AP_MAX_CONCURRENCY` ≥ 2.',
    read: (v) =>
      integer(v, Math.floor(v.get('maxConcurrency') * DEFAULT_WAITING_ROOM_SLOT_SHARE), 'positive'),
  }),
  row({
    name: 'AP_COOKIE_SECURE',
    field: 'cookieSecure',
    section,
    default: '`false`',
    rule: RULE.boolean,
    doc: "Marks the waiting room's `ap_session` cookie `Secure` (sent over HTTPS only). Turn it on whenever clients reach the proxy over TLS, a TLS-terminating proxy included.",
    read: (v) => boolean(v, false),
  }),
] as const;
