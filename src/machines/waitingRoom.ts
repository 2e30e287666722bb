/**
 * The waiting room: a FIFO of tickets, one per session, in front of `slots` runners; each slot
 * is idle, reserved for one session until a deadline, or running one session's job. No I/O: the
 * clock is injected and read once per event; a `sweepInterval` delay expires what is due unasked.
 *
 * ## Invariants
 * - **A slot belongs to at most one session, and a session runs at most one job.**
 * - **An idle slot means an empty queue**: whatever frees a slot promotes the head into it.
 * - **Queued and ready tickets hold positions 1..n in join order**; running tickets hold 0.
 * - **Only queued tickets expire by heartbeat**, and only `status` is a heartbeat (not `join`).
 *
 * ## Races
 * - *Holder's late claim*: judged against its own window before any expiry pass, so the call
 *   that discovers the lapse is refused instead of finding the slot idle and walking in.
 * - *Promoted by its own claim*: refused like the seed (`busy`); its next claim takes the slot.
 * - *Run end vs next window*: `runEnded` comes after the job's cleanup and opens the next window
 *   only then, so a reservation never overlaps a job still cleaning up.
 * - *Freed slot vs outside waiters*: a freed slot is re-reserved in the same transition and the
 *   events say so (`handedTo`/`handedFrom`), so the proxy can pass its real slot on unreleased.
 * - *Silent head*: as in the seed, lapses and run ends promote before stale tickets are dropped,
 *   so a head silent since the last pass can be promoted; its window then lapses.
 *
 * ## The slot seam (the proxy holds one real semaphore slot per reserved room slot)
 * `reserved` → acquire one for `session` (or take `handedFrom`'s); `claimed`, `implicit: false`
 * → the render takes it over unreleased (1 → 1); `implicit: true` → nothing held, acquire as
 * usual; `released` / `finished` → give it back, or hand it to `handedTo`.
 * **Every `claimed` is answered by exactly one `runEnded` from the claimer**, implicit claims
 * included: a running slot leaves `running` only by `runEnded`, so a claim nobody ends keeps its
 * room slot for the life of the room. `slots` is the room's share of the runners (the proxy
 * passes `AP_WAITING_ROOM_SLOTS`, fewer than its render slots), not all of them.
 *
 * ## Events (emitted after the context is updated; `queued` is the queue length after)
 * | Event      | Fields besides `session`                      | When                          |
 * |------------|-----------------------------------------------|-------------------------------|
 * | `joined`   | ticketId, status, queued                      | a new ticket, ready or queued |
 * | `rejected` | retryAfterS, queued                           | a join finds the room full    |
 * | `reserved` | ticketId, slot, expiresInS, handedFrom        | a slot is booked              |
 * | `claimed`  | ticketId, slot, implicit                      | a job starts in a slot        |
 * | `released` | ticketId, slot, reason, handedTo              | a reservation ends unclaimed  |
 * | `finished` | slot, durationS, cancelled, counted, handedTo | `runEnded` frees a slot       |
 * | `dropped`  | ticketId, status, reason                      | a ticket goes, no slot freed  |
 * | `notify`   | `to` (the session), message `ready`/`expired` | its turn begins or ends       |
 */
import { randomBytes } from 'node:crypto';
import { assign, enqueueActions, raise, setup } from 'xstate';
import { type CallEnvelope, type NotifyEvent, type ReplyEvent, reply } from '../core/protocol.js';

/** Weight of the newest run in the estimate: follows a shift in load, shrugs off one outlier. */
export const ESTIMATE_ALPHA = 0.3;
/** Runs the estimate is recomputed over; an older run is forgotten outright, not faded. */
export const ESTIMATE_HISTORY_RUNS = 20;
/** A run cancelled sooner measures the listener's patience, not a run: it is not counted. */
export const CANCELLED_RUN_FLOOR_S = 5;
/** The seed's single runner. */
export const DEFAULT_SLOTS = 1;
/** Queued tickets a room holds; deeper, the ETA is too coarse to promise anything. */
export const DEFAULT_MAX_LENGTH = 100;
/** A lapsed reservation keeps its slot at most this long when nobody calls. */
export const SWEEP_INTERVAL_MS = 1_000;
/** `Retry-After` for a full room before any run was timed: short, so nobody waits on nothing. */
export const FULL_RETRY_AFTER_FALLBACK_S = 10;
/** Random bytes in a default ticket id: 96 bits, unguessable, 16 url-safe characters. */
const TICKET_ID_BYTES = 12;

export interface WaitingRoomInput {
  /** Runner slots behind the queue. @default 1 */
  readonly slots?: number;
  /** How long a ready ticket holds its slot waiting for the claim, in seconds. */
  readonly reservationSeconds: number;
  /** How long a queued ticket lives without a `status` poll, in seconds. */
  readonly heartbeatSeconds: number;
  /** Queued tickets (not ready or running ones) at which `join` answers `full`. @default 100 */
  readonly maxLength?: number;
  /** The clock, in milliseconds; read once per event. */
  readonly now: () => number;
  /** Opaque ticket ids. @default `q_` and 16 random url-safe characters */
  readonly newTicketId?: () => string;
  /** Period of the built-in sweep in ms; 0 leaves expiry to calls and `tick`. @default 1000 */
  readonly sweepMs?: number;
}

export type TicketStatus = 'queued' | 'ready' | 'running';

/** What a listener sees; field names are the wire format. Seconds are rounded half to even. */
export interface TicketView {
  readonly ticket_id: string;
  readonly status: TicketStatus;
  readonly position: number;
  readonly ahead: number;
  readonly eta_seconds: number | null;
  readonly reservation_expires_in_seconds: number | null;
  readonly runner: 'reserved' | 'running';
}

export type JoinOutcome =
  | { readonly type: 'ticket'; readonly ticket: TicketView }
  | { readonly type: 'full'; readonly retryAfterS: number };
export type StatusOutcome =
  | { readonly type: 'ticket'; readonly ticket: TicketView }
  | { readonly type: 'unknown' };
export type LeaveOutcome =
  | { readonly type: 'left'; readonly ticketId: string }
  | { readonly type: 'unknown' };
export type ClaimRefusal = 'reservation_expired' | 'busy' | 'already_running';
export type ClaimOutcome =
  | {
      readonly type: 'claimed';
      readonly ticketId: string;
      readonly slot: number;
      readonly implicit: boolean;
    }
  | { readonly type: 'refused'; readonly reason: ClaimRefusal };
export type RunEndedOutcome =
  | {
      readonly type: 'ended';
      readonly slot: number;
      readonly durationS: number;
      readonly counted: boolean;
    }
  | { readonly type: 'unknown' };
export type TickOutcome = { readonly type: 'ticked' };

/** The calls the room answers (see `src/actors/call.ts`); `tick` may also be cast. */
export type WaitingRoomEvent =
  | ({ readonly type: 'join'; readonly session: string } & CallEnvelope)
  | ({ readonly type: 'status'; readonly session: string } & CallEnvelope)
  | ({ readonly type: 'leave'; readonly session: string } & CallEnvelope)
  | ({ readonly type: 'claim'; readonly session: string } & CallEnvelope)
  | ({
      readonly type: 'runEnded';
      readonly session: string;
      readonly cancelled?: boolean;
    } & CallEnvelope)
  | ({ readonly type: 'tick' } & CallEnvelope);

/**
 * Raised by the room itself once the clock is read and expiry settled, so the room's current
 * state (open / busy / full) decides. Not for senders: sending one skips the settling.
 */
type SettledEvent = {
  readonly type: 'settled.join' | 'settled.claim' | 'settled.holderClaim';
  readonly session: string;
} & CallEnvelope;

/** A message to one session, delivered by `inbox(actor, session, handler)`. */
export type WaitingRoomMessage =
  | {
      readonly type: 'ready';
      readonly ticketId: string;
      readonly slot: number;
      readonly expiresInS: number;
    }
  | {
      readonly type: 'expired';
      readonly ticketId: string;
      readonly reason: 'reservation' | 'heartbeat';
    };

export const ADMISSION_QUEUE_EVENTS = [
  'joined',
  'rejected',
  'reserved',
  'claimed',
  'released',
  'finished',
  'dropped',
] as const;

export type WaitingRoomTelemetry =
  | {
      type: 'joined';
      session: string;
      ticketId: string;
      status: 'ready' | 'queued';
      queued: number;
    }
  | { type: 'rejected'; session: string; retryAfterS: number; queued: number }
  | {
      type: 'reserved';
      session: string;
      ticketId: string;
      slot: number;
      expiresInS: number;
      handedFrom: string | null;
    }
  | { type: 'claimed'; session: string; ticketId: string; slot: number; implicit: boolean }
  | {
      type: 'released';
      session: string;
      ticketId: string;
      slot: number;
      reason: 'expired' | 'late_claim' | 'left';
      handedTo: string | null;
    }
  | {
      type: 'finished';
      session: string;
      slot: number;
      durationS: number;
      cancelled: boolean;
      counted: boolean;
      handedTo: string | null;
    }
  | {
      type: 'dropped';
      session: string;
      ticketId: string;
      status: TicketStatus;
      reason: 'stale' | 'left';
    };

export type WaitingRoomEmitted =
  | WaitingRoomTelemetry
  | NotifyEvent<WaitingRoomMessage>
  | ReplyEvent;

/**
 * The life of one runner slot, as data. Every slot change in this file goes through `moveSlot`,
 * which refuses an edge that is not listed here; the docs draw their slot chart from it.
 */
export const SLOT_LIFECYCLE = {
  idle: { reserve: 'reserved', claimIdle: 'running' },
  reserved: { claim: 'running', lapse: 'idle' },
  running: { runEnded: 'idle' },
} as const;

type SlotEdge = {
  [P in keyof typeof SLOT_LIFECYCLE]: keyof (typeof SLOT_LIFECYCLE)[P];
}[keyof typeof SLOT_LIFECYCLE];

export type RoomSlot =
  | { readonly phase: 'idle' }
  | {
      readonly phase: 'reserved';
      readonly session: string;
      readonly ticketId: string;
      readonly expiresAtMs: number;
    }
  | {
      readonly phase: 'running';
      readonly session: string;
      readonly ticketId: string;
      readonly startedAtMs: number;
    };

export interface Ticket {
  readonly ticketId: string;
  readonly session: string;
  /** Join order; the queue and the ready tickets are both in serial order. */
  readonly serial: number;
  readonly lastSeenAtMs: number;
  readonly status: TicketStatus;
  /** The slot a ready or running ticket holds. */
  readonly slot: number | null;
}

export interface RoomSettings {
  readonly slots: number;
  readonly reservationMs: number;
  readonly heartbeatMs: number;
  readonly maxLength: number;
  readonly sweepMs: number;
  readonly now: () => number;
  readonly newTicketId: () => string;
}

export interface WaitingRoomContext {
  readonly settings: RoomSettings;
  /** The instant the current event is judged at. */
  readonly nowMs: number;
  readonly tickets: ReadonlyMap<string, Ticket>;
  /** Sessions whose tickets are queued, oldest first. */
  readonly queue: readonly string[];
  readonly slots: readonly RoomSlot[];
  /** The last `ESTIMATE_HISTORY_RUNS` counted run durations, oldest first. */
  readonly durationsS: readonly number[];
  readonly meanS: number | null;
  readonly nextSerial: number;
}

// ---------------------------------------------------------------------------------------------
// Input: programmer mistakes throw here, naming the option.

function positiveSeconds(name: string, value: unknown): number {
  if (typeof value !== 'number') throw new TypeError(`${name} must be a number of seconds`);
  if (!Number.isFinite(value) || value <= 0) {
    throw new RangeError(`${name} must be > 0, got ${value}`);
  }
  return value * 1000;
}

function count(name: string, value: unknown, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw new TypeError(`${name} must be an integer`);
  }
  if (value < min) throw new RangeError(`${name} must be >= ${min}, got ${value}`);
  return value;
}

function defaultTicketId(): string {
  return 'q_' + randomBytes(TICKET_ID_BYTES).toString('base64url');
}

/** Validates the input and builds the empty room. Throws TypeError/RangeError on a bad option. */
export function initialRoom(input: WaitingRoomInput): WaitingRoomContext {
  if (input === null || typeof input !== 'object') throw new TypeError('input is required');
  if (typeof input.now !== 'function') throw new TypeError('now must be a function returning ms');
  if (input.newTicketId !== undefined && typeof input.newTicketId !== 'function') {
    throw new TypeError('newTicketId must be a function');
  }
  const settings: RoomSettings = {
    slots: count('slots', input.slots, DEFAULT_SLOTS, 1),
    reservationMs: positiveSeconds('reservationSeconds', input.reservationSeconds),
    heartbeatMs: positiveSeconds('heartbeatSeconds', input.heartbeatSeconds),
    maxLength: count('maxLength', input.maxLength, DEFAULT_MAX_LENGTH, 0),
    sweepMs: count('sweepMs', input.sweepMs, SWEEP_INTERVAL_MS, 0),
    now: input.now,
    newTicketId: input.newTicketId ?? defaultTicketId,
  };
  return {
    settings,
    nowMs: readClock(settings),
    tickets: new Map(),
    queue: [],
    slots: Array.from({ length: settings.slots }, () => ({ phase: 'idle' }) as const),
    durationsS: [],
    meanS: null,
    nextSerial: 1,
  };
}

function readClock(settings: RoomSettings): number {
  const now = settings.now();
  if (typeof now !== 'number' || !Number.isFinite(now)) {
    throw new TypeError(`now() must return finite milliseconds, got ${String(now)}`);
  }
  return now;
}

// ---------------------------------------------------------------------------------------------
// Arithmetic, as the seed does it.

/** Python's `round()`: to the nearest integer, ties to the even one. */
export function roundHalfEven(x: number): number {
  const floor = Math.floor(x);
  const frac = x - floor; // exact for finite doubles
  if (frac > 0.5) return floor + 1;
  if (frac < 0.5) return floor;
  return floor % 2 === 0 ? floor : floor + 1;
}

/** The EMA, recomputed from the oldest kept run: mean = α·d + (1 − α)·mean. */
export function estimateMeanS(durationsS: readonly number[]): number | null {
  if (durationsS.length === 0) return null;
  let mean = durationsS[0]!;
  for (let i = 1; i < durationsS.length; i++) {
    mean = ESTIMATE_ALPHA * durationsS[i]! + (1 - ESTIMATE_ALPHA) * mean;
  }
  return mean;
}

/** Where a ticket stands: running 0; ready and queued 1..n in serial order. */
function positionOf(room: WaitingRoomContext, ticket: Ticket): number {
  if (ticket.status === 'running') return 0;
  let ready = 0;
  let readyAhead = 0;
  for (const slot of room.slots) {
    if (slot.phase !== 'reserved') continue;
    ready++;
    const holder = room.tickets.get(slot.session)!;
    if (holder.serial < ticket.serial) readyAhead++;
  }
  if (ticket.status === 'ready') return readyAhead + 1;
  return ready + room.queue.indexOf(ticket.session) + 1;
}

/**
 * The seed's ETA, `mean × (ahead + 1) − elapsed`, with `slots` runners draining `slots` tickets
 * per mean run: `mean × (⌊ahead / slots⌋ + 1) − elapsed`. `elapsed` is the ticket's own run
 * for a running ticket, nothing for a ready one, and the oldest running job's for a queued one.
 */
function etaSeconds(room: WaitingRoomContext, ticket: Ticket, ahead: number): number | null {
  if (room.meanS === null) return null;
  let startedAtMs: number | null = null;
  if (ticket.status === 'running') {
    const slot = room.slots[ticket.slot!]!;
    if (slot.phase === 'running') startedAtMs = slot.startedAtMs;
  } else if (ticket.status === 'queued') {
    for (const slot of room.slots) {
      if (slot.phase === 'running' && (startedAtMs === null || slot.startedAtMs < startedAtMs)) {
        startedAtMs = slot.startedAtMs;
      }
    }
  }
  const elapsedS = startedAtMs === null ? 0 : (room.nowMs - startedAtMs) / 1000;
  const rounds = Math.floor(ahead / room.settings.slots) + 1;
  return Math.max(0, room.meanS * rounds - elapsedS);
}

/** The ticket as its holder sees it at `room.nowMs`. */
export function viewTicket(room: WaitingRoomContext, ticket: Ticket): TicketView {
  const position = positionOf(room, ticket);
  const ahead = Math.max(0, position - 1);
  const eta = etaSeconds(room, ticket, ahead);
  let expiresIn: number | null = null;
  if (ticket.status === 'ready') {
    const slot = room.slots[ticket.slot!]!;
    if (slot.phase === 'reserved') expiresIn = Math.max(0, (slot.expiresAtMs - room.nowMs) / 1000);
  }
  let runner: TicketView['runner'];
  if (ticket.status === 'running') runner = 'running';
  else if (ticket.status === 'ready') runner = 'reserved';
  else runner = room.slots.some((s) => s.phase === 'running') ? 'running' : 'reserved';
  return {
    ticket_id: ticket.ticketId,
    status: ticket.status,
    position,
    ahead,
    eta_seconds: eta === null ? null : roundHalfEven(eta),
    reservation_expires_in_seconds: expiresIn === null ? null : roundHalfEven(expiresIn),
    runner,
  };
}

/** `Retry-After` for a full room: one mean run shared across the slots, at least a second. */
export function retryAfterS(room: Pick<WaitingRoomContext, 'meanS' | 'settings'>): number {
  if (room.meanS === null) return FULL_RETRY_AFTER_FALLBACK_S;
  return Math.max(1, Math.ceil(room.meanS / room.settings.slots));
}

// ---------------------------------------------------------------------------------------------
// Room operations. Each action copies the room into a draft, applies operations to it, then
// commits the draft with one `assign` and emits what the operations recorded, in order.

interface Draft {
  readonly settings: RoomSettings;
  readonly nowMs: number;
  tickets: Map<string, Ticket>;
  queue: string[];
  slots: RoomSlot[];
  durationsS: number[];
  meanS: number | null;
  nextSerial: number;
  readonly out: WaitingRoomEmitted[];
}

function draftOf(room: WaitingRoomContext): Draft {
  return {
    settings: room.settings,
    nowMs: room.nowMs,
    tickets: new Map(room.tickets),
    queue: [...room.queue],
    slots: [...room.slots],
    durationsS: [...room.durationsS],
    meanS: room.meanS,
    nextSerial: room.nextSerial,
    out: [],
  };
}

function moveSlot(d: Draft, index: number, edge: SlotEdge, next: RoomSlot): void {
  const from = d.slots[index]!.phase;
  const allowed = SLOT_LIFECYCLE[from] as Record<string, string>;
  if (allowed[edge] !== next.phase) {
    throw new Error(`waitingRoom bug: slot ${index} cannot go ${from} -${edge}-> ${next.phase}`);
  }
  d.slots[index] = next;
}

function firstIdleSlot(slots: readonly RoomSlot[]): number {
  return slots.findIndex((s) => s.phase === 'idle');
}

function newTicket(d: Draft, session: string, status: TicketStatus, slot: number | null): Ticket {
  const ticket: Ticket = {
    ticketId: d.settings.newTicketId(),
    session,
    serial: d.nextSerial++,
    lastSeenAtMs: d.nowMs,
    status,
    slot,
  };
  d.tickets.set(session, ticket);
  return ticket;
}

/** Books slot `index` for `ticket` (already in `d.tickets`) and tells everyone. */
function reserveFor(d: Draft, index: number, ticket: Ticket, handedFrom: string | null): void {
  const expiresAtMs = d.nowMs + d.settings.reservationMs;
  moveSlot(d, index, 'reserve', {
    phase: 'reserved',
    session: ticket.session,
    ticketId: ticket.ticketId,
    expiresAtMs,
  });
  d.tickets.set(ticket.session, { ...ticket, status: 'ready', slot: index });
  const expiresInS = d.settings.reservationMs / 1000;
  d.out.push({
    type: 'reserved',
    session: ticket.session,
    ticketId: ticket.ticketId,
    slot: index,
    expiresInS,
    handedFrom,
  });
  d.out.push({
    type: 'notify',
    to: ticket.session,
    message: { type: 'ready', ticketId: ticket.ticketId, slot: index, expiresInS },
  });
}

/** Fills the just-freed slot `index` from the head of the queue, if anyone waits. */
function promoteInto(d: Draft, index: number, handedFrom: string): void {
  const session = d.queue.shift();
  if (session === undefined) return;
  reserveFor(d, index, d.tickets.get(session)!, handedFrom);
}

/** Ends the reservation in slot `index` unclaimed; the ticket goes and the head moves up. */
function lapse(d: Draft, index: number, reason: 'expired' | 'late_claim' | 'left'): void {
  const slot = d.slots[index]!;
  if (slot.phase !== 'reserved') {
    throw new Error(`waitingRoom bug: slot ${index} is not reserved`);
  }
  d.tickets.delete(slot.session);
  moveSlot(d, index, 'lapse', { phase: 'idle' });
  d.out.push({
    type: 'released',
    session: slot.session,
    ticketId: slot.ticketId,
    slot: index,
    reason,
    handedTo: d.queue[0] ?? null,
  });
  if (reason !== 'left') {
    d.out.push({
      type: 'notify',
      to: slot.session,
      message: { type: 'expired', ticketId: slot.ticketId, reason: 'reservation' },
    });
  }
  promoteInto(d, index, slot.session);
}

/** A reservation's window is closed from its last millisecond on (the seed's `>=`). */
function lapsed(slot: RoomSlot, nowMs: number): boolean {
  return slot.phase === 'reserved' && nowMs >= slot.expiresAtMs;
}

/** A queued ticket is stale once silent for strictly longer than the heartbeat. */
function stale(ticket: Ticket, nowMs: number, heartbeatMs: number): boolean {
  return nowMs - ticket.lastSeenAtMs > heartbeatMs;
}

function anyDue(room: WaitingRoomContext): boolean {
  return (
    room.slots.some((slot) => lapsed(slot, room.nowMs)) ||
    room.queue.some((s) => stale(room.tickets.get(s)!, room.nowMs, room.settings.heartbeatMs))
  );
}

/**
 * The seed's expiry pass, in its order: lapsed reservations go and the head is promoted into
 * each freed slot, then stale queued tickets go. Ready and running tickets never go stale.
 */
function expireDue(d: Draft): void {
  for (let i = 0; i < d.slots.length; i++) {
    if (lapsed(d.slots[i]!, d.nowMs)) lapse(d, i, 'expired');
  }
  const keep: string[] = [];
  for (const session of d.queue) {
    const ticket = d.tickets.get(session)!;
    if (stale(ticket, d.nowMs, d.settings.heartbeatMs)) {
      d.tickets.delete(session);
      d.out.push({
        type: 'dropped',
        session,
        ticketId: ticket.ticketId,
        status: 'queued',
        reason: 'stale',
      });
      d.out.push({
        type: 'notify',
        to: session,
        message: { type: 'expired', ticketId: ticket.ticketId, reason: 'heartbeat' },
      });
    } else {
      keep.push(session);
    }
  }
  d.queue = keep;
}

function runningSlotOf(slots: readonly RoomSlot[], session: string): number {
  return slots.findIndex((s) => s.phase === 'running' && s.session === session);
}

function reservedSlotOf(slots: readonly RoomSlot[], session: string): number {
  return slots.findIndex((s) => s.phase === 'reserved' && s.session === session);
}

function runDurationS(room: Pick<WaitingRoomContext, 'slots' | 'nowMs'>, index: number): number {
  const slot = room.slots[index]!;
  if (slot.phase !== 'running') throw new Error(`waitingRoom bug: slot ${index} is not running`);
  return Math.max(0, (room.nowMs - slot.startedAtMs) / 1000);
}

function counts(durationS: number, cancelled: boolean): boolean {
  return !(cancelled && durationS < CANCELLED_RUN_FLOOR_S);
}

function recordRun(d: Draft, durationS: number): void {
  d.durationsS.push(Math.max(0, durationS));
  if (d.durationsS.length > ESTIMATE_HISTORY_RUNS) {
    d.durationsS = d.durationsS.slice(-ESTIMATE_HISTORY_RUNS);
  }
  d.meanS = estimateMeanS(d.durationsS);
}

// ---------------------------------------------------------------------------------------------
// The chart. Every call reads the clock once and runs the expiry pass (a holder's claim and a run
// end first settle their own slot, as the seed does). `join` and a claim without a reservation
// are then re-raised as `settled.*`, so the room state the expiry pass left behind decides them.

type AnyRoomEvent = WaitingRoomEvent | SettledEvent;
type SessionEvent = Extract<AnyRoomEvent, { session: string }>;

function sessionOf(event: AnyRoomEvent): string {
  if (!('session' in event)) throw new Error(`waitingRoom bug: ${event.type} has no session`);
  return event.session;
}

/** What an action's `enqueue` is used for here: one `assign` of the draft, then its emits. */
interface Enqueue {
  assign(values: Partial<WaitingRoomContext>): void;
  emit(event: WaitingRoomEmitted): void;
}

/** Applies `op` to a draft of the room, commits it in one `assign`, then emits what it recorded. */
function commit(
  enqueue: Enqueue,
  context: WaitingRoomContext,
  event: AnyRoomEvent,
  op: (d: Draft, event: AnyRoomEvent) => void,
): void {
  const d = draftOf(context);
  op(d, event);
  enqueue.assign({
    tickets: d.tickets,
    queue: d.queue,
    slots: d.slots,
    durationsS: d.durationsS,
    meanS: d.meanS,
    nextSerial: d.nextSerial,
  });
  for (const emitted of d.out) enqueue.emit(emitted);
}

/** The settled copy of a call: same session and reply address, a type the room states handle. */
function settled(type: SettledEvent['type'], event: AnyRoomEvent): SettledEvent {
  const e = event as SessionEvent;
  return { type, session: e.session, callId: e.callId, replyTo: e.replyTo };
}

const ticketReply = ({ context, event }: { context: WaitingRoomContext; event: AnyRoomEvent }) => {
  const ticket = context.tickets.get(sessionOf(event));
  return ticket
    ? { type: 'ticket' as const, ticket: viewTicket(context, ticket) }
    : { type: 'unknown' as const };
};

// The operations behind the actions of the same name, each applied to a draft by `commit`.

function bookReady(d: Draft, event: AnyRoomEvent): void {
  const ticket = newTicket(d, sessionOf(event), 'queued', null);
  d.out.push({
    type: 'joined',
    session: ticket.session,
    ticketId: ticket.ticketId,
    status: 'ready',
    queued: d.queue.length,
  });
  reserveFor(d, firstIdleSlot(d.slots), ticket, null);
}

function enqueueTicket(d: Draft, event: AnyRoomEvent): void {
  const ticket = newTicket(d, sessionOf(event), 'queued', null);
  d.queue.push(ticket.session);
  d.out.push({
    type: 'joined',
    session: ticket.session,
    ticketId: ticket.ticketId,
    status: 'queued',
    queued: d.queue.length,
  });
}

function rejectFull(d: Draft, event: AnyRoomEvent): void {
  d.out.push({
    type: 'rejected',
    session: sessionOf(event),
    retryAfterS: retryAfterS(d),
    queued: d.queue.length,
  });
}

/** The heartbeat: the holder was seen now. Copies only the ticket map (this is the hot path). */
function touch(room: WaitingRoomContext, session: string): ReadonlyMap<string, Ticket> {
  const ticket = room.tickets.get(session);
  if (!ticket) return room.tickets;
  const tickets = new Map(room.tickets);
  tickets.set(session, { ...ticket, lastSeenAtMs: room.nowMs });
  return tickets;
}

/** One funnel for leaving: a reservation lapses, anything else just goes (a run keeps its slot). */
function leaveRoom(d: Draft, event: AnyRoomEvent): void {
  const ticket = d.tickets.get(sessionOf(event));
  if (!ticket) return;
  if (ticket.status === 'ready') {
    lapse(d, ticket.slot!, 'left');
    return;
  }
  d.tickets.delete(ticket.session);
  if (ticket.status === 'queued') d.queue.splice(d.queue.indexOf(ticket.session), 1);
  d.out.push({
    type: 'dropped',
    session: ticket.session,
    ticketId: ticket.ticketId,
    status: ticket.status,
    reason: 'left',
  });
}

function lapseLateClaim(d: Draft, event: AnyRoomEvent): void {
  lapse(d, reservedSlotOf(d.slots, sessionOf(event)), 'late_claim');
}

/** The holder's claim: the reserved slot becomes its running slot, never free in between. */
function startReservedRun(d: Draft, event: AnyRoomEvent): void {
  const index = reservedSlotOf(d.slots, sessionOf(event));
  const slot = d.slots[index] as Extract<RoomSlot, { phase: 'reserved' }>;
  moveSlot(d, index, 'claim', {
    phase: 'running',
    session: slot.session,
    ticketId: slot.ticketId,
    startedAtMs: d.nowMs,
  });
  const ticket = d.tickets.get(slot.session)!;
  d.tickets.set(slot.session, { ...ticket, status: 'running' });
  d.out.push({
    type: 'claimed',
    session: slot.session,
    ticketId: slot.ticketId,
    slot: index,
    implicit: false,
  });
}

/** A claim with no ticket while a slot is idle: join, reserve and claim in one step. */
function startIdleRun(d: Draft, event: AnyRoomEvent): void {
  const index = firstIdleSlot(d.slots);
  const ticket = newTicket(d, sessionOf(event), 'running', index);
  moveSlot(d, index, 'claimIdle', {
    phase: 'running',
    session: ticket.session,
    ticketId: ticket.ticketId,
    startedAtMs: d.nowMs,
  });
  d.out.push({
    type: 'claimed',
    session: ticket.session,
    ticketId: ticket.ticketId,
    slot: index,
    implicit: true,
  });
}

function endRun(d: Draft, event: AnyRoomEvent): void {
  const session = sessionOf(event);
  const index = runningSlotOf(d.slots, session);
  const durationS = runDurationS(d, index);
  const slot = d.slots[index] as Extract<RoomSlot, { phase: 'running' }>;
  const cancelled = event.type === 'runEnded' && event.cancelled === true;
  const counted = counts(durationS, cancelled);
  // Only this run's ticket goes: a session that left and joined again keeps its new one.
  if (d.tickets.get(session)?.ticketId === slot.ticketId) d.tickets.delete(session);
  moveSlot(d, index, 'runEnded', { phase: 'idle' });
  if (counted) recordRun(d, durationS);
  d.out.push({
    type: 'finished',
    session,
    slot: index,
    durationS,
    cancelled,
    counted,
    handedTo: d.queue[0] ?? null,
  });
  promoteInto(d, index, session);
}

export const waitingRoomMachine = setup({
  types: {} as {
    context: WaitingRoomContext;
    events: AnyRoomEvent;
    input: WaitingRoomInput;
    emitted: WaitingRoomEmitted;
  },
  guards: {
    anyIdleSlot: ({ context }) => firstIdleSlot(context.slots) >= 0,
    noIdleSlot: ({ context }) => firstIdleSlot(context.slots) < 0,
    queueAtMax: ({ context }) => context.queue.length >= context.settings.maxLength,
    queueHasRoom: ({ context }) => context.queue.length < context.settings.maxLength,
    hasTicket: ({ context, event }) => context.tickets.has(sessionOf(event)),
    holdsReservation: ({ context, event }) => reservedSlotOf(context.slots, sessionOf(event)) >= 0,
    reservationLapsed: ({ context, event }) => {
      const slot = context.slots[reservedSlotOf(context.slots, sessionOf(event))];
      return slot !== undefined && lapsed(slot, context.nowMs);
    },
    isRunning: ({ context, event }) => runningSlotOf(context.slots, sessionOf(event)) >= 0,
    sweepOn: ({ context }) => context.settings.sweepMs > 0,
  },
  delays: {
    sweepInterval: ({ context }) => context.settings.sweepMs,
  },
  actions: {
    readClock: assign({ nowMs: ({ context }) => readClock(context.settings) }),
    settleJoin: raise(({ event }) => settled('settled.join', event)),
    settleClaim: raise(({ event }) => settled('settled.claim', event)),
    settleHolderClaim: raise(({ event }) => settled('settled.holderClaim', event)),
    expireDue: enqueueActions(({ context, event, enqueue }) => {
      if (anyDue(context)) commit(enqueue as unknown as Enqueue, context, event, expireDue);
    }),
    bookReady: enqueueActions(({ context, event, enqueue }) =>
      commit(enqueue as unknown as Enqueue, context, event, bookReady),
    ),
    enqueueTicket: enqueueActions(({ context, event, enqueue }) =>
      commit(enqueue as unknown as Enqueue, context, event, enqueueTicket),
    ),
    rejectFull: enqueueActions(({ context, event, enqueue }) =>
      commit(enqueue as unknown as Enqueue, context, event, rejectFull),
    ),
    touch: assign({ tickets: ({ context, event }) => touch(context, sessionOf(event)) }),
    leaveRoom: enqueueActions(({ context, event, enqueue }) =>
      commit(enqueue as unknown as Enqueue, context, event, leaveRoom),
    ),
    lapseLateClaim: enqueueActions(({ context, event, enqueue }) =>
      commit(enqueue as unknown as Enqueue, context, event, lapseLateClaim),
    ),
    startReservedRun: enqueueActions(({ context, event, enqueue }) =>
      commit(enqueue as unknown as Enqueue, context, event, startReservedRun),
    ),
    startIdleRun: enqueueActions(({ context, event, enqueue }) =>
      commit(enqueue as unknown as Enqueue, context, event, startIdleRun),
    ),
    endRun: enqueueActions(({ context, event, enqueue }) =>
      commit(enqueue as unknown as Enqueue, context, event, endRun),
    ),
    replyTicket: reply(ticketReply),
    replyStatus: reply(ticketReply),
    replyFull: reply(({ context }: { context: WaitingRoomContext }) => ({
      type: 'full' as const,
      retryAfterS: retryAfterS(context),
    })),
    replyLeave: reply(
      ({ context, event }: { context: WaitingRoomContext; event: AnyRoomEvent }) => {
        const ticket = context.tickets.get(sessionOf(event));
        return ticket
          ? { type: 'left' as const, ticketId: ticket.ticketId }
          : { type: 'unknown' as const };
      },
    ),
    replyClaimed: reply(
      ({ context, event }: { context: WaitingRoomContext; event: AnyRoomEvent }) => {
        const index = runningSlotOf(context.slots, sessionOf(event));
        const slot = context.slots[index] as Extract<RoomSlot, { phase: 'running' }>;
        return {
          type: 'claimed' as const,
          ticketId: slot.ticketId,
          slot: index,
          implicit: event.type === 'settled.claim',
        };
      },
    ),
    replyLateClaim: reply(() => ({
      type: 'refused' as const,
      reason: 'reservation_expired' as const,
    })),
    replyBusy: reply(() => ({ type: 'refused' as const, reason: 'busy' as const })),
    replyAlreadyRunning: reply(() => ({
      type: 'refused' as const,
      reason: 'already_running' as const,
    })),
    replyEnded: reply(
      ({ context, event }: { context: WaitingRoomContext; event: AnyRoomEvent }) => {
        const index = runningSlotOf(context.slots, sessionOf(event));
        const durationS = runDurationS(context, index);
        const cancelled = event.type === 'runEnded' && event.cancelled === true;
        return {
          type: 'ended' as const,
          slot: index,
          durationS,
          counted: counts(durationS, cancelled),
        };
      },
    ),
    replyUnknown: reply(() => ({ type: 'unknown' as const })),
    replyTicked: reply(() => ({ type: 'ticked' as const })),
  },
}).createMachine({
  id: 'waitingRoom',
  type: 'parallel',
  context: ({ input }) => initialRoom(input),
  on: {
    join: { actions: ['readClock', 'expireDue', 'settleJoin'] },
    status: { actions: ['readClock', 'expireDue', 'touch', 'replyStatus'] },
    leave: { actions: ['readClock', 'expireDue', 'replyLeave', 'leaveRoom'] },
    claim: [
      // A holder's claim judges its own window before any expiry pass (see Races).
      { guard: 'holdsReservation', actions: ['readClock', 'settleHolderClaim'] },
      { actions: ['readClock', 'expireDue', 'settleClaim'] },
    ],
    'settled.holderClaim': [
      { guard: 'reservationLapsed', actions: ['lapseLateClaim', 'expireDue', 'replyLateClaim'] },
      { guard: 'isRunning', actions: ['expireDue', 'replyAlreadyRunning'] },
      { actions: ['startReservedRun', 'expireDue', 'replyClaimed'] },
    ],
    runEnded: [
      // Ends the run and promotes before the expiry pass, as the seed does.
      { guard: 'isRunning', actions: ['readClock', 'replyEnded', 'endRun', 'expireDue'] },
      { actions: ['readClock', 'expireDue', 'replyUnknown'] },
    ],
    tick: { actions: ['readClock', 'expireDue', 'replyTicked'] },
  },
  states: {
    room: {
      initial: 'open',
      states: {
        /** A slot is idle (so nobody queues): a newcomer is booked straight in. */
        open: {
          always: { guard: 'noIdleSlot', target: 'busy' },
          on: {
            'settled.join': [
              { guard: 'hasTicket', actions: 'replyTicket' },
              { actions: ['bookReady', 'replyTicket'] },
            ],
            'settled.claim': [
              { guard: 'isRunning', actions: 'replyAlreadyRunning' },
              // Promoted by this very call's settling: refused like the seed; it claims next.
              { guard: 'hasTicket', actions: 'replyBusy' },
              { actions: ['startIdleRun', 'replyClaimed'] },
            ],
          },
        },
        /** Every slot is reserved or running and the queue has room: a newcomer queues. */
        busy: {
          always: [
            { guard: 'anyIdleSlot', target: 'open' },
            { guard: 'queueAtMax', target: 'full' },
          ],
          on: {
            'settled.join': [
              { guard: 'hasTicket', actions: 'replyTicket' },
              { actions: ['enqueueTicket', 'replyTicket'] },
            ],
            'settled.claim': { actions: 'replyBusy' },
          },
        },
        /** Every slot is taken and `maxLength` tickets queue: a newcomer is told when to retry. */
        full: {
          always: [
            { guard: 'anyIdleSlot', target: 'open' },
            { guard: 'queueHasRoom', target: 'busy' },
          ],
          on: {
            'settled.join': [
              { guard: 'hasTicket', actions: 'replyTicket' },
              { actions: ['rejectFull', 'replyFull'] },
            ],
            'settled.claim': { actions: 'replyBusy' },
          },
        },
      },
    },
    sweeper: {
      initial: 'choosing',
      states: {
        choosing: { always: [{ guard: 'sweepOn', target: 'armed' }, { target: 'off' }] },
        armed: {
          after: {
            sweepInterval: {
              target: 'armed',
              reenter: true,
              actions: ['readClock', 'expireDue'],
            },
          },
        },
        off: {},
      },
    },
  },
});
