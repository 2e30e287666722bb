/**
 * The waiting room: a FIFO of tickets, one per session, in front of `slots` runners; each slot
 * is idle, reserved for one session until a deadline, or running one session's job. No I/O: the
 * clock is injected and read once per event; a `sweepInterval` delay expires what is due unasked.
 * This file is the chart: which step a call takes, its guards and its replies. The steps
 * themselves (booking, queueing, expiry, the estimate) are plain functions in `waitingRoomSlots.ts`
 * that return the next room and the events to emit.
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
import { assign, enqueueActions, raise, setup } from 'xstate';
import { type CallEnvelope, type NotifyEvent, type ReplyEvent, reply } from '../core/protocol.js';
import {
  anyDue,
  bookReady,
  countsAsRun,
  endRun,
  enqueueTicket,
  expireDue,
  firstIdleSlot,
  initialRoom,
  lapsed,
  lapseLateClaim,
  leaveRoom,
  type RoomEffect,
  type RoomState,
  type RoomStep,
  readClock,
  rejectFull,
  reservedSlotOf,
  retryAfterS,
  runDurationS,
  runningSlotOf,
  startIdleRun,
  startReservedRun,
  type TicketView,
  touch,
  viewTicket,
  type WaitingRoomInput,
  type WaitingRoomMessage,
  type WaitingRoomTelemetry,
} from './waitingRoomSlots.js';

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
export type RoomClaimOutcome =
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

export type WaitingRoomEmitted =
  | WaitingRoomTelemetry
  | NotifyEvent<WaitingRoomMessage>
  | ReplyEvent;

// ---------------------------------------------------------------------------------------------
// The chart. Every call reads the clock once and runs the expiry pass (a holder's claim and a run
// end first settle their own slot, as the seed does). `join` and a claim without a reservation
// are then re-raised as `settled.*`, so the room state the expiry pass left behind decides them.
// Each step is a function of `waitingRoomSlots.ts`; its action commits the room it returns in
// one `assign` and emits its effects, in order.

type AnyRoomEvent = WaitingRoomEvent | SettledEvent;

function sessionOf(event: AnyRoomEvent): string {
  if (!('session' in event)) throw new Error(`waitingRoom bug: ${event.type} has no session`);
  return event.session;
}

/** What a step's action needs of `enqueueActions`' `enqueue`, which fits it as it is. */
interface RoomOutbox {
  assign(room: RoomState): void;
  emit(event: RoomEffect): void;
}

/** Commits `step`'s room in one `assign`, then emits its effects, in order. */
function deliver(enqueue: RoomOutbox, step: RoomStep): void {
  enqueue.assign(step.room);
  for (const effect of step.effects) enqueue.emit(effect);
}

/** The settled copy of a call: same session and reply address, a type the room states handle. */
function settled(type: SettledEvent['type'], event: AnyRoomEvent): SettledEvent {
  return { type, session: sessionOf(event), callId: event.callId, replyTo: event.replyTo };
}

type Args = { context: RoomState; event: AnyRoomEvent };

const ticketReply = ({ context, event }: Args): StatusOutcome => {
  const ticket = context.tickets.get(sessionOf(event));
  return ticket ? { type: 'ticket', ticket: viewTicket(context, ticket) } : { type: 'unknown' };
};

const refuse = (reason: ClaimRefusal) =>
  reply((): RoomClaimOutcome => ({ type: 'refused', reason }));

const cancelledOf = (event: AnyRoomEvent) => event.type === 'runEnded' && event.cancelled === true;

export const waitingRoomMachine = setup({
  types: {} as {
    context: RoomState;
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
    expireDue: enqueueActions(({ context, enqueue }) => {
      if (anyDue(context)) deliver(enqueue, expireDue(context));
    }),
    bookReady: enqueueActions(({ context, event, enqueue }) =>
      deliver(enqueue, bookReady(context, sessionOf(event))),
    ),
    enqueueTicket: enqueueActions(({ context, event, enqueue }) =>
      deliver(enqueue, enqueueTicket(context, sessionOf(event))),
    ),
    rejectFull: enqueueActions(({ context, event, enqueue }) =>
      deliver(enqueue, rejectFull(context, sessionOf(event))),
    ),
    touch: assign({ tickets: ({ context, event }) => touch(context, sessionOf(event)) }),
    leaveRoom: enqueueActions(({ context, event, enqueue }) =>
      deliver(enqueue, leaveRoom(context, sessionOf(event))),
    ),
    lapseLateClaim: enqueueActions(({ context, event, enqueue }) =>
      deliver(enqueue, lapseLateClaim(context, sessionOf(event))),
    ),
    startReservedRun: enqueueActions(({ context, event, enqueue }) =>
      deliver(enqueue, startReservedRun(context, sessionOf(event))),
    ),
    startIdleRun: enqueueActions(({ context, event, enqueue }) =>
      deliver(enqueue, startIdleRun(context, sessionOf(event))),
    ),
    endRun: enqueueActions(({ context, event, enqueue }) =>
      deliver(enqueue, endRun(context, sessionOf(event), cancelledOf(event))),
    ),
    replyTicket: reply(ticketReply),
    replyStatus: reply(ticketReply),
    replyFull: reply(
      ({ context }: Args): JoinOutcome => ({
        type: 'full',
        retryAfterS: retryAfterS(context),
      }),
    ),
    replyLeave: reply(({ context, event }: Args): LeaveOutcome => {
      const ticket = context.tickets.get(sessionOf(event));
      return ticket ? { type: 'left', ticketId: ticket.ticketId } : { type: 'unknown' };
    }),
    replyClaimed: reply(({ context, event }: Args): RoomClaimOutcome => {
      const index = runningSlotOf(context.slots, sessionOf(event));
      const slot = context.slots[index];
      if (slot?.phase !== 'running') throw new Error('waitingRoom bug: claimed, not running');
      const implicit = event.type === 'settled.claim';
      return { type: 'claimed', ticketId: slot.ticketId, slot: index, implicit };
    }),
    replyLateClaim: refuse('reservation_expired'),
    replyBusy: refuse('busy'),
    replyAlreadyRunning: refuse('already_running'),
    replyEnded: reply(({ context, event }: Args): RunEndedOutcome => {
      const index = runningSlotOf(context.slots, sessionOf(event));
      const durationS = runDurationS(context, index);
      const counted = countsAsRun(durationS, cancelledOf(event));
      return { type: 'ended', slot: index, durationS, counted };
    }),
    replyUnknown: reply(() => ({ type: 'unknown' as const })),
    replyTicked: reply((): TickOutcome => ({ type: 'ticked' })),
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
