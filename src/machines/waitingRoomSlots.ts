/**
 * The waiting room's arithmetic, as plain functions over plain data: the tickets, the queue, the
 * slots and their phases, expiry, the run-time estimate and what a listener is told. The chart
 * (`waitingRoom.ts`) reads the clock, picks the step and delivers what the step returns; nothing
 * here knows XState.
 *
 * ## Contract
 * - A `RoomState` is immutable. A step (`bookReady`, `expireDue`, `endRun`, …) returns the next
 *   state and the effects to deliver, in order: telemetry events and `notify`s, as data. The
 *   effects describe the state returned with them (`queued` is the queue length after).
 * - A step is judged at `room.nowMs`; only `readClock` reads the injected clock, and only a step
 *   that creates a ticket calls the injected `newTicketId`.
 * - Every slot change goes through `moveSlot`, which refuses an edge `SLOT_LIFECYCLE` does not
 *   list; a step called where its chart guard does not hold throws an `Error` naming the bug.
 */
import { randomBytes } from 'node:crypto';
import type { NotifyEvent } from '../core/protocol.js';

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

/** What a step asks the chart to emit, in order. */
export type RoomEffect = WaitingRoomTelemetry | NotifyEvent<WaitingRoomMessage>;

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

export type SlotPhase = RoomSlot['phase'];

/**
 * The life of one runner slot, as data. Every slot change goes through `moveSlot`, which refuses
 * an edge that is not listed here; the docs draw their slot chart from it.
 */
export const SLOT_LIFECYCLE = {
  idle: { reserve: 'reserved', claimIdle: 'running' },
  reserved: { claim: 'running', lapse: 'idle' },
  running: { runEnded: 'idle' },
} as const satisfies Record<SlotPhase, Record<string, SlotPhase>>;

export type SlotEdge = {
  [P in SlotPhase]: keyof (typeof SLOT_LIFECYCLE)[P];
}[SlotPhase];

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

export interface RoomState {
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

/** A step's result: the next room and what to emit about it, in order. */
export interface RoomStep {
  readonly room: RoomState;
  readonly effects: readonly RoomEffect[];
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
export function initialRoom(input: WaitingRoomInput): RoomState {
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
    slots: Array.from({ length: settings.slots }, (): RoomSlot => ({ phase: 'idle' })),
    durationsS: [],
    meanS: null,
    nextSerial: 1,
  };
}

/** The injected clock, checked: finite milliseconds or a TypeError. */
export function readClock(settings: RoomSettings): number {
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
function positionOf(room: RoomState, ticket: Ticket): number {
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
function etaSeconds(room: RoomState, ticket: Ticket, ahead: number): number | null {
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
export function viewTicket(room: RoomState, ticket: Ticket): TicketView {
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
export function retryAfterS(room: Pick<RoomState, 'meanS' | 'settings'>): number {
  if (room.meanS === null) return FULL_RETRY_AFTER_FALLBACK_S;
  return Math.max(1, Math.ceil(room.meanS / room.settings.slots));
}

/** How long the run in slot `index` has taken so far; throws if the slot is not running. */
export function runDurationS(room: Pick<RoomState, 'slots' | 'nowMs'>, index: number): number {
  const slot = room.slots[index];
  if (slot?.phase !== 'running') throw new Error(`waitingRoom bug: slot ${index} is not running`);
  return Math.max(0, (room.nowMs - slot.startedAtMs) / 1000);
}

/** A run counts toward the estimate unless it was cancelled before `CANCELLED_RUN_FLOOR_S`. */
export function countsAsRun(durationS: number, cancelled: boolean): boolean {
  return !(cancelled && durationS < CANCELLED_RUN_FLOOR_S);
}

// ---------------------------------------------------------------------------------------------
// Queries the chart's guards ask.

/** The first idle slot, or -1. */
export function firstIdleSlot(slots: readonly RoomSlot[]): number {
  return slots.findIndex((s) => s.phase === 'idle');
}

/** The slot `session` runs in, or -1. */
export function runningSlotOf(slots: readonly RoomSlot[], session: string): number {
  return slots.findIndex((s) => s.phase === 'running' && s.session === session);
}

/** The slot reserved for `session`, or -1. */
export function reservedSlotOf(slots: readonly RoomSlot[], session: string): number {
  return slots.findIndex((s) => s.phase === 'reserved' && s.session === session);
}

/** A reservation's window is closed from its last millisecond on (the seed's `>=`). */
export function lapsed(slot: RoomSlot, nowMs: number): boolean {
  return slot.phase === 'reserved' && nowMs >= slot.expiresAtMs;
}

/** A queued ticket is stale once silent for strictly longer than the heartbeat. */
function stale(ticket: Ticket, nowMs: number, heartbeatMs: number): boolean {
  return nowMs - ticket.lastSeenAtMs > heartbeatMs;
}

/** Whether `expireDue` would change anything: a lapsed reservation or a stale queued ticket. */
export function anyDue(room: RoomState): boolean {
  return (
    room.slots.some((slot) => lapsed(slot, room.nowMs)) ||
    room.queue.some((s) => stale(room.tickets.get(s)!, room.nowMs, room.settings.heartbeatMs))
  );
}

/** The heartbeat: the holder was seen now. Copies only the ticket map (this is the hot path). */
export function touch(room: RoomState, session: string): ReadonlyMap<string, Ticket> {
  const ticket = room.tickets.get(session);
  if (!ticket) return room.tickets;
  const tickets = new Map(room.tickets);
  tickets.set(session, { ...ticket, lastSeenAtMs: room.nowMs });
  return tickets;
}

// ---------------------------------------------------------------------------------------------
// Steps. Each copies the room into a draft, changes the draft and returns it with the effects
// it recorded, in order.

interface Draft {
  readonly settings: RoomSettings;
  readonly nowMs: number;
  tickets: Map<string, Ticket>;
  queue: string[];
  slots: RoomSlot[];
  durationsS: number[];
  meanS: number | null;
  nextSerial: number;
  readonly effects: RoomEffect[];
}

function step(room: RoomState, change: (d: Draft) => void): RoomStep {
  const d: Draft = {
    settings: room.settings,
    nowMs: room.nowMs,
    tickets: new Map(room.tickets),
    queue: [...room.queue],
    slots: [...room.slots],
    durationsS: [...room.durationsS],
    meanS: room.meanS,
    nextSerial: room.nextSerial,
    effects: [],
  };
  change(d);
  const { effects, ...next } = d;
  return { room: next, effects };
}

/** Moves slot `index` along `edge` to `next`; throws if `SLOT_LIFECYCLE` has no such edge. */
export function moveSlot(slots: RoomSlot[], index: number, edge: SlotEdge, next: RoomSlot): void {
  const from = slots[index]!.phase;
  const allowed: Readonly<Record<string, SlotPhase>> = SLOT_LIFECYCLE[from];
  if (allowed[edge] !== next.phase) {
    throw new Error(`waitingRoom bug: slot ${index} cannot go ${from} -${edge}-> ${next.phase}`);
  }
  slots[index] = next;
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
  moveSlot(d.slots, index, 'reserve', {
    phase: 'reserved',
    session: ticket.session,
    ticketId: ticket.ticketId,
    expiresAtMs,
  });
  d.tickets.set(ticket.session, { ...ticket, status: 'ready', slot: index });
  const expiresInS = d.settings.reservationMs / 1000;
  d.effects.push({
    type: 'reserved',
    session: ticket.session,
    ticketId: ticket.ticketId,
    slot: index,
    expiresInS,
    handedFrom,
  });
  d.effects.push({
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
  const slot = d.slots[index];
  if (slot?.phase !== 'reserved') {
    throw new Error(`waitingRoom bug: slot ${index} is not reserved`);
  }
  d.tickets.delete(slot.session);
  moveSlot(d.slots, index, 'lapse', { phase: 'idle' });
  d.effects.push({
    type: 'released',
    session: slot.session,
    ticketId: slot.ticketId,
    slot: index,
    reason,
    handedTo: d.queue[0] ?? null,
  });
  if (reason !== 'left') {
    d.effects.push({
      type: 'notify',
      to: slot.session,
      message: { type: 'expired', ticketId: slot.ticketId, reason: 'reservation' },
    });
  }
  promoteInto(d, index, slot.session);
}

/**
 * The seed's expiry pass, in its order: lapsed reservations go and the head is promoted into
 * each freed slot, then stale queued tickets go. Ready and running tickets never go stale.
 */
export function expireDue(room: RoomState): RoomStep {
  return step(room, (d) => {
    for (let i = 0; i < d.slots.length; i++) {
      if (lapsed(d.slots[i]!, d.nowMs)) lapse(d, i, 'expired');
    }
    const keep: string[] = [];
    for (const session of d.queue) {
      const ticket = d.tickets.get(session)!;
      if (stale(ticket, d.nowMs, d.settings.heartbeatMs)) {
        d.tickets.delete(session);
        d.effects.push({
          type: 'dropped',
          session,
          ticketId: ticket.ticketId,
          status: 'queued',
          reason: 'stale',
        });
        d.effects.push({
          type: 'notify',
          to: session,
          message: { type: 'expired', ticketId: ticket.ticketId, reason: 'heartbeat' },
        });
      } else {
        keep.push(session);
      }
    }
    d.queue = keep;
  });
}

/** A newcomer while a slot is idle: a new ticket, booked straight into that slot. */
export function bookReady(room: RoomState, session: string): RoomStep {
  return step(room, (d) => {
    const ticket = newTicket(d, session, 'queued', null);
    d.effects.push({
      type: 'joined',
      session,
      ticketId: ticket.ticketId,
      status: 'ready',
      queued: d.queue.length,
    });
    reserveFor(d, firstIdleSlot(d.slots), ticket, null);
  });
}

/** A newcomer while every slot is taken: a new ticket at the back of the queue. */
export function enqueueTicket(room: RoomState, session: string): RoomStep {
  return step(room, (d) => {
    const ticket = newTicket(d, session, 'queued', null);
    d.queue.push(session);
    d.effects.push({
      type: 'joined',
      session,
      ticketId: ticket.ticketId,
      status: 'queued',
      queued: d.queue.length,
    });
  });
}

/** A newcomer to a full room: nothing changes but the telemetry. */
export function rejectFull(room: RoomState, session: string): RoomStep {
  return {
    room,
    effects: [
      { type: 'rejected', session, retryAfterS: retryAfterS(room), queued: room.queue.length },
    ],
  };
}

/** One funnel for leaving: a reservation lapses, anything else just goes (a run keeps its slot). */
export function leaveRoom(room: RoomState, session: string): RoomStep {
  return step(room, (d) => {
    const ticket = d.tickets.get(session);
    if (!ticket) return;
    if (ticket.status === 'ready') {
      lapse(d, ticket.slot!, 'left');
      return;
    }
    d.tickets.delete(session);
    if (ticket.status === 'queued') d.queue.splice(d.queue.indexOf(session), 1);
    d.effects.push({
      type: 'dropped',
      session,
      ticketId: ticket.ticketId,
      status: ticket.status,
      reason: 'left',
    });
  });
}

/** The holder's claim came after its window closed: the reservation lapses. */
export function lapseLateClaim(room: RoomState, session: string): RoomStep {
  return step(room, (d) => lapse(d, reservedSlotOf(d.slots, session), 'late_claim'));
}

/** The holder's claim: the reserved slot becomes its running slot, never free in between. */
export function startReservedRun(room: RoomState, session: string): RoomStep {
  return step(room, (d) => {
    const index = reservedSlotOf(d.slots, session);
    const slot = d.slots[index];
    if (slot?.phase !== 'reserved') throw new Error(`waitingRoom bug: ${session} holds no slot`);
    moveSlot(d.slots, index, 'claim', {
      phase: 'running',
      session,
      ticketId: slot.ticketId,
      startedAtMs: d.nowMs,
    });
    const ticket = d.tickets.get(session)!;
    d.tickets.set(session, { ...ticket, status: 'running' });
    d.effects.push({
      type: 'claimed',
      session,
      ticketId: slot.ticketId,
      slot: index,
      implicit: false,
    });
  });
}

/** A claim with no ticket while a slot is idle: join, reserve and claim in one step. */
export function startIdleRun(room: RoomState, session: string): RoomStep {
  return step(room, (d) => {
    const index = firstIdleSlot(d.slots);
    const ticket = newTicket(d, session, 'running', index);
    moveSlot(d.slots, index, 'claimIdle', {
      phase: 'running',
      session,
      ticketId: ticket.ticketId,
      startedAtMs: d.nowMs,
    });
    d.effects.push({
      type: 'claimed',
      session,
      ticketId: ticket.ticketId,
      slot: index,
      implicit: true,
    });
  });
}

/** `session`'s run ended: its slot is freed, the run is timed, and the head is promoted. */
export function endRun(room: RoomState, session: string, cancelled: boolean): RoomStep {
  return step(room, (d) => {
    const index = runningSlotOf(d.slots, session);
    const durationS = runDurationS(d, index);
    const slot = d.slots[index];
    if (slot?.phase !== 'running') throw new Error(`waitingRoom bug: ${session} runs nowhere`);
    const counted = countsAsRun(durationS, cancelled);
    // Only this run's ticket goes: a session that left and joined again keeps its new one.
    if (d.tickets.get(session)?.ticketId === slot.ticketId) d.tickets.delete(session);
    moveSlot(d.slots, index, 'runEnded', { phase: 'idle' });
    if (counted) {
      d.durationsS.push(durationS);
      if (d.durationsS.length > ESTIMATE_HISTORY_RUNS) {
        d.durationsS = d.durationsS.slice(-ESTIMATE_HISTORY_RUNS);
      }
      d.meanS = estimateMeanS(d.durationsS);
    }
    d.effects.push({
      type: 'finished',
      session,
      slot: index,
      durationS,
      cancelled,
      counted,
      handedTo: d.queue[0] ?? null,
    });
    promoteInto(d, index, session);
  });
}
