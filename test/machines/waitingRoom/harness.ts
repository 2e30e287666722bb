// A room on a hand-moved clock, asked synchronously: every call must be answered inside the
// `send` that delivered it (the room never defers a reply), so `ask` throws when one is not.
import { createActor } from 'xstate';
import {
  type JoinOutcome,
  type LeaveOutcome,
  type RoomClaimOutcome,
  type RunEndedOutcome,
  type StatusOutcome,
  type WaitingRoomEmitted,
  waitingRoomMachine,
} from '../../../src/machines/waitingRoom.js';
import type {
  TicketView,
  WaitingRoomInput,
  WaitingRoomTelemetry,
} from '../../../src/machines/waitingRoomSlots.js';

export type Emitted = Exclude<WaitingRoomEmitted, { type: 'reply' }>;

export function openRoom(overrides: Partial<WaitingRoomInput> = {}) {
  const clock = { ms: 0 };
  let ids = 0;
  const actor = createActor(waitingRoomMachine, {
    input: {
      reservationSeconds: 10,
      heartbeatSeconds: 30,
      now: () => clock.ms,
      newTicketId: () => `q_${++ids}`,
      sweepMs: 0,
      ...overrides,
    },
  });
  const events: Emitted[] = [];
  let lastReply: { callId: number; payload: unknown } | undefined;
  actor.on('*', (event) => {
    if (event.type === 'reply') lastReply = event;
    else events.push(event as Emitted);
  });
  actor.start();
  let nextCallId = 1;

  function ask<P>(event: Record<string, unknown> & { type: string }): P {
    const callId = nextCallId++;
    lastReply = undefined;
    actor.send({ ...event, callId } as never);
    const answered = lastReply as { callId: number; payload: unknown } | undefined;
    if (answered?.callId !== callId) throw new Error(`${event.type} was not answered in its send`);
    return answered.payload as P;
  }

  return {
    actor,
    clock,
    events,
    /** Sets the clock, in seconds since the room opened. */
    at(seconds: number) {
      clock.ms = seconds * 1000;
    },
    context: () => actor.getSnapshot().context,
    roomState: () => (actor.getSnapshot().value as { room: string }).room,
    join: (session: string) => ask<JoinOutcome>({ type: 'join', session }),
    status: (session: string) => ask<StatusOutcome>({ type: 'status', session }),
    leave: (session: string) => ask<LeaveOutcome>({ type: 'leave', session }),
    claim: (session: string) => ask<RoomClaimOutcome>({ type: 'claim', session }),
    runEnded: (session: string, cancelled?: boolean) =>
      ask<RunEndedOutcome>({ type: 'runEnded', session, cancelled }),
    tick: () => ask<{ type: 'ticked' }>({ type: 'tick' }),
    /** The telemetry emitted since the last `drain`, and forgets it. */
    drain(): Emitted[] {
      return events.splice(0, events.length);
    },
  };
}

export type Room = ReturnType<typeof openRoom>;

/** The ticket of a `ticket` outcome; fails the test on anything else. */
export function ticketOf(outcome: JoinOutcome | StatusOutcome): TicketView {
  if (outcome.type !== 'ticket')
    throw new Error(`expected a ticket, got ${JSON.stringify(outcome)}`);
  return outcome.ticket;
}

export function telemetryOf(events: readonly Emitted[], type: WaitingRoomTelemetry['type']) {
  return events.filter((e) => e.type === type);
}
