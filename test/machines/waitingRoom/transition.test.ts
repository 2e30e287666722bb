// Pure `initialTransition()` / `transition()` on the room: the snapshot each event leads to and
// the actions it plans (raises, emits, the reply), computed without executing anything. Proves
// the chart's dispatch (a call is settled, then re-raised for the room state to decide), that a
// transition never mutates the snapshot it started from, and that the sweep re-arms itself.
import { describe, expect, it } from 'vitest';
import { initialTransition, transition } from 'xstate';
import { waitingRoomMachine } from '../../../src/machines/waitingRoom.js';
import type { WaitingRoomInput } from '../../../src/machines/waitingRoomSlots.js';

const clock = { ms: 0 };
let ids = 0;
const input: WaitingRoomInput = {
  reservationSeconds: 10,
  heartbeatSeconds: 30,
  maxLength: 1,
  now: () => clock.ms,
  newTicketId: () => `q_${++ids}`,
};
const SWEEP_EVENT = 'xstate.after.sweepInterval.waitingRoom.sweeper.armed';

type Planned = { type: string; params?: unknown };
/** The planned actions as `type` plus the event they raise or emit. */
const plan = (actions: Planned[]) =>
  actions.map((a) => {
    const params = a.params as { event?: unknown; delay?: number; sendId?: string } | undefined;
    return {
      type: a.type,
      ...(params?.event ? { event: params.event } : {}),
      ...(params?.delay ? { delay: params.delay } : {}),
    };
  });
const emitted = (actions: Planned[]) =>
  plan(actions)
    .filter((a) => a.type === 'xstate.emit')
    .map((a) => a.event as { type: string });

function start() {
  clock.ms = 0;
  ids = 0;
  return initialTransition(waitingRoomMachine, input);
}

describe('initialTransition', () => {
  it('opens with every slot idle and arms the sweep', () => {
    const [snapshot, actions] = start();
    expect(snapshot.value).toEqual({ room: 'open', sweeper: 'armed' });
    expect(snapshot.context.slots).toEqual([{ phase: 'idle' }]);
    expect(plan(actions)).toEqual([
      { type: 'xstate.raise', event: { type: SWEEP_EVENT }, delay: 1000 },
    ]);
  });

  it('with sweepMs 0 plans no timer at all', () => {
    const [snapshot, actions] = initialTransition(waitingRoomMachine, { ...input, sweepMs: 0 });
    expect(snapshot.value).toEqual({ room: 'open', sweeper: 'off' });
    expect(actions).toEqual([]);
  });

  it('puts a bad input into an error snapshot (startWaitingRoom throws it synchronously)', () => {
    const [snapshot] = initialTransition(waitingRoomMachine, { ...input, slots: 0 });
    expect(snapshot.status).toBe('error');
    expect(snapshot.error).toBeInstanceOf(RangeError);
  });
});

describe('transition', () => {
  it('join on an open room: settle, re-raise, book, emit, reply, in that order', () => {
    const [s0] = start();
    const [s1, actions] = transition(waitingRoomMachine, s0, {
      type: 'join',
      session: 'A',
      callId: 7,
    });
    expect(s1.value).toEqual({ room: 'busy', sweeper: 'armed' });
    expect(
      plan(actions).map((a) => (a.event as { type: string } | undefined)?.type ?? a.type),
    ).toEqual(['settled.join', 'joined', 'reserved', 'notify', 'reply']);
    expect(plan(actions)[0]).toEqual({
      type: 'xstate.raise',
      event: { type: 'settled.join', session: 'A', callId: 7, replyTo: undefined },
    });
    expect(emitted(actions).at(-1)).toMatchObject({
      type: 'reply',
      callId: 7,
      payload: { type: 'ticket', ticket: { ticket_id: 'q_1', status: 'ready' } },
    });
    // The starting snapshot is untouched: transitions copy, never mutate.
    expect(s0.context.tickets.size).toBe(0);
    expect(s0.context.slots).toEqual([{ phase: 'idle' }]);
  });

  it('the same settled join is decided by the room state: queued when busy, full when full', () => {
    const [s0] = start();
    const [busy] = transition(waitingRoomMachine, s0, { type: 'join', session: 'A' });
    const [full, queuedActions] = transition(waitingRoomMachine, busy, {
      type: 'join',
      session: 'B',
      callId: 1,
    });
    expect(full.value).toMatchObject({ room: 'full' });
    expect(emitted(queuedActions).map((e) => e.type)).toEqual(['joined', 'reply']);
    const [after, fullActions] = transition(waitingRoomMachine, full, {
      type: 'join',
      session: 'C',
      callId: 2,
    });
    expect(after.value).toMatchObject({ room: 'full' });
    expect(emitted(fullActions)).toEqual([
      { type: 'rejected', session: 'C', retryAfterS: 10, queued: 1 },
      { type: 'reply', callId: 2, payload: { type: 'full', retryAfterS: 10 } },
    ]);
  });

  it('a cast (no callId) plans no reply', () => {
    const [s0] = start();
    const [, actions] = transition(waitingRoomMachine, s0, { type: 'join', session: 'A' });
    expect(emitted(actions).map((e) => e.type)).not.toContain('reply');
  });

  it('the holder’s late claim is raised as holderClaim and refused, releasing the slot', () => {
    const [s0] = start();
    const [s1] = transition(waitingRoomMachine, s0, { type: 'join', session: 'A' });
    clock.ms = 10_000;
    const [s2, actions] = transition(waitingRoomMachine, s1, {
      type: 'claim',
      session: 'A',
      callId: 3,
    });
    expect(plan(actions)[0]).toMatchObject({ event: { type: 'settled.holderClaim' } });
    expect(emitted(actions).map((e) => e.type)).toEqual(['released', 'notify', 'reply']);
    expect(emitted(actions).at(-1)).toEqual({
      type: 'reply',
      callId: 3,
      payload: { type: 'refused', reason: 'reservation_expired' },
    });
    expect(s2.value).toMatchObject({ room: 'open' });
    expect(s2.context.nowMs).toBe(10_000);
  });

  it('the sweep lapses a reservation and re-arms itself', () => {
    const [s0] = start();
    const [s1] = transition(waitingRoomMachine, s0, { type: 'join', session: 'A' });
    clock.ms = 10_000;
    const [s2, actions] = transition(waitingRoomMachine, s1, { type: SWEEP_EVENT } as never);
    expect(plan(actions)).toEqual([
      { type: 'xstate.cancel' },
      {
        type: 'xstate.emit',
        event: {
          type: 'released',
          session: 'A',
          ticketId: 'q_1',
          slot: 0,
          reason: 'expired',
          handedTo: null,
        },
      },
      {
        type: 'xstate.emit',
        event: {
          type: 'notify',
          to: 'A',
          message: { type: 'expired', ticketId: 'q_1', reason: 'reservation' },
        },
      },
      { type: 'xstate.raise', event: { type: SWEEP_EVENT }, delay: 1000 },
    ]);
    expect(s2.value).toEqual({ room: 'open', sweeper: 'armed' });
  });

  it('a sweep with nothing due plans only the re-arm, and keeps the room as it was', () => {
    const [s0] = start();
    const [s1] = transition(waitingRoomMachine, s0, { type: 'join', session: 'A' });
    clock.ms = 9_999;
    const [s2, actions] = transition(waitingRoomMachine, s1, { type: SWEEP_EVENT } as never);
    expect(emitted(actions)).toEqual([]);
    expect(s2.context.tickets).toBe(s1.context.tickets);
  });
});
