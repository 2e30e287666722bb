// The room's arithmetic without the chart: each step of src/machines/waitingRoomSlots.ts on plain
// data, checked for the room it returns, the effects it lists (in order) and that the room it was
// given is left as it was. The chart's own tests (machine, transition, property, graph) cover the
// same rules through calls; these pin the steps one by one, including the misuse they refuse.
import { describe, expect, it } from 'vitest';
import {
  anyDue,
  bookReady,
  CANCELLED_RUN_FLOOR_S,
  countsAsRun,
  ESTIMATE_HISTORY_RUNS,
  endRun,
  enqueueTicket,
  estimateMeanS,
  expireDue,
  FULL_RETRY_AFTER_FALLBACK_S,
  firstIdleSlot,
  initialRoom,
  lapsed,
  lapseLateClaim,
  leaveRoom,
  moveSlot,
  type RoomSlot,
  type RoomState,
  type RoomStep,
  rejectFull,
  reservedSlotOf,
  retryAfterS,
  runDurationS,
  runningSlotOf,
  startIdleRun,
  startReservedRun,
  touch,
  viewTicket,
} from '../../../src/machines/waitingRoomSlots.js';

/** An empty room at 0 ms: 10 s windows, 5 s heartbeat, ids t1, t2, … */
function emptyRoom(slots = 1, maxLength = 100): RoomState {
  let ids = 0;
  return initialRoom({
    slots,
    maxLength,
    reservationSeconds: 10,
    heartbeatSeconds: 5,
    sweepMs: 0,
    now: () => 0,
    newTicketId: () => `t${++ids}`,
  });
}

const at = (room: RoomState, nowMs: number): RoomState => ({ ...room, nowMs });

/** Runs steps in order, each on the room the previous one returned; returns the last step. */
function chain(room: RoomState, ...steps: ((r: RoomState) => RoomStep)[]): RoomStep {
  let last: RoomStep = { room, effects: [] };
  for (const step of steps) last = step(last.room);
  return last;
}

const types = (step: RoomStep) => step.effects.map((e) => e.type);

describe('initialRoom', () => {
  it('starts with every slot idle, no tickets and no estimate', () => {
    const room = emptyRoom(3);
    expect(room.slots).toEqual([{ phase: 'idle' }, { phase: 'idle' }, { phase: 'idle' }]);
    expect(room.tickets.size).toBe(0);
    expect(room.queue).toEqual([]);
    expect(room.meanS).toBeNull();
    expect(room.nextSerial).toBe(1);
    expect(room.settings).toMatchObject({ reservationMs: 10_000, heartbeatMs: 5_000 });
  });
});

describe('bookReady', () => {
  it('books the first idle slot for a new ticket and tells the session, leaving the input alone', () => {
    const room = at(emptyRoom(2), 1_000);
    const { room: next, effects } = bookReady(room, 'a');
    expect(next.slots[0]).toEqual({
      phase: 'reserved',
      session: 'a',
      ticketId: 't1',
      expiresAtMs: 11_000,
    });
    expect(next.tickets.get('a')).toMatchObject({ status: 'ready', slot: 0, serial: 1 });
    expect(effects).toEqual([
      { type: 'joined', session: 'a', ticketId: 't1', status: 'ready', queued: 0 },
      {
        type: 'reserved',
        session: 'a',
        ticketId: 't1',
        slot: 0,
        expiresInS: 10,
        handedFrom: null,
      },
      {
        type: 'notify',
        to: 'a',
        message: { type: 'ready', ticketId: 't1', slot: 0, expiresInS: 10 },
      },
    ]);
    expect(room.slots[0]).toEqual({ phase: 'idle' });
    expect(room.tickets.size).toBe(0);
  });
});

describe('enqueueTicket and rejectFull', () => {
  it('queues behind the others, counting the queue after the join', () => {
    const step = chain(
      emptyRoom(),
      (r) => bookReady(r, 'a'),
      (r) => enqueueTicket(r, 'b'),
      (r) => enqueueTicket(r, 'c'),
    );
    expect(step.room.queue).toEqual(['b', 'c']);
    expect(step.effects).toEqual([
      { type: 'joined', session: 'c', ticketId: 't3', status: 'queued', queued: 2 },
    ]);
  });

  it('rejects without changing the room, with the fallback or the shared mean run', () => {
    const room = emptyRoom(2);
    const step = rejectFull(room, 'x');
    expect(step.room).toBe(room);
    expect(step.effects).toEqual([
      { type: 'rejected', session: 'x', retryAfterS: FULL_RETRY_AFTER_FALLBACK_S, queued: 0 },
    ]);
    expect(retryAfterS({ ...room, meanS: 9 })).toBe(5); // ceil(9 / 2)
    expect(retryAfterS({ ...room, meanS: 0.1 })).toBe(1);
  });
});

describe('leaveRoom', () => {
  const twoWaiting = () =>
    chain(
      emptyRoom(),
      (r) => bookReady(r, 'a'),
      (r) => enqueueTicket(r, 'b'),
      (r) => enqueueTicket(r, 'c'),
    ).room;

  it('drops a queued ticket from the queue', () => {
    const step = leaveRoom(twoWaiting(), 'b');
    expect(step.room.queue).toEqual(['c']);
    expect(step.room.tickets.has('b')).toBe(false);
    expect(step.effects).toEqual([
      { type: 'dropped', session: 'b', ticketId: 't2', status: 'queued', reason: 'left' },
    ]);
  });

  it('releases a reservation and hands the slot to the head, without an `expired` notice', () => {
    const step = leaveRoom(twoWaiting(), 'a');
    expect(types(step)).toEqual(['released', 'reserved', 'notify']);
    expect(step.effects[0]).toMatchObject({ reason: 'left', handedTo: 'b' });
    expect(step.effects[1]).toMatchObject({ session: 'b', handedFrom: 'a' });
    expect(step.room.slots[0]).toMatchObject({ phase: 'reserved', session: 'b' });
    expect(step.room.queue).toEqual(['c']);
  });

  it('lets a running session leave its ticket but not its slot; an unknown one changes nothing', () => {
    const running = startIdleRun(emptyRoom(), 'a').room;
    const step = leaveRoom(running, 'a');
    expect(step.room.slots[0]).toMatchObject({ phase: 'running', session: 'a' });
    expect(step.effects).toEqual([
      { type: 'dropped', session: 'a', ticketId: 't1', status: 'running', reason: 'left' },
    ]);
    expect(leaveRoom(running, 'nobody').effects).toEqual([]);
  });
});

describe('claims', () => {
  it('turns the holder’s reservation into its run, never idle in between', () => {
    const booked = at(bookReady(emptyRoom(), 'a').room, 4_000);
    const step = startReservedRun(booked, 'a');
    expect(step.room.slots[0]).toEqual({
      phase: 'running',
      session: 'a',
      ticketId: 't1',
      startedAtMs: 4_000,
    });
    expect(step.room.tickets.get('a')).toMatchObject({ status: 'running', slot: 0 });
    expect(step.effects).toEqual([
      { type: 'claimed', session: 'a', ticketId: 't1', slot: 0, implicit: false },
    ]);
  });

  it('starts an implicit run in an idle slot with a fresh ticket', () => {
    const step = startIdleRun(emptyRoom(2), 'a');
    expect(step.room.tickets.get('a')).toMatchObject({ status: 'running', slot: 0 });
    expect(runningSlotOf(step.room.slots, 'a')).toBe(0);
    expect(step.effects).toEqual([
      { type: 'claimed', session: 'a', ticketId: 't1', slot: 0, implicit: true },
    ]);
  });

  it('lapses a late claim, tells the holder and promotes the head', () => {
    const room = chain(
      emptyRoom(),
      (r) => bookReady(r, 'a'),
      (r) => enqueueTicket(r, 'b'),
    ).room;
    const step = lapseLateClaim(at(room, 10_000), 'a');
    expect(step.effects).toEqual([
      {
        type: 'released',
        session: 'a',
        ticketId: 't1',
        slot: 0,
        reason: 'late_claim',
        handedTo: 'b',
      },
      {
        type: 'notify',
        to: 'a',
        message: { type: 'expired', ticketId: 't1', reason: 'reservation' },
      },
      {
        type: 'reserved',
        session: 'b',
        ticketId: 't2',
        slot: 0,
        expiresInS: 10,
        handedFrom: 'a',
      },
      {
        type: 'notify',
        to: 'b',
        message: { type: 'ready', ticketId: 't2', slot: 0, expiresInS: 10 },
      },
    ]);
    expect(step.room.slots[0]).toMatchObject({ phase: 'reserved', expiresAtMs: 20_000 });
  });

  it('throws when called where the chart’s guard would not let it', () => {
    expect(() => startReservedRun(emptyRoom(), 'a')).toThrow(/waitingRoom bug/);
    expect(() => lapseLateClaim(emptyRoom(), 'a')).toThrow(/waitingRoom bug/);
    expect(() => endRun(emptyRoom(), 'a', false)).toThrow(/waitingRoom bug/);
  });
});

describe('endRun', () => {
  it('frees the slot, times the run and promotes the head', () => {
    const room = chain(
      emptyRoom(),
      (r) => startIdleRun(r, 'a'),
      (r) => enqueueTicket(r, 'b'),
    ).room;
    const step = endRun(at(room, 12_000), 'a', false);
    expect(step.effects[0]).toEqual({
      type: 'finished',
      session: 'a',
      slot: 0,
      durationS: 12,
      cancelled: false,
      counted: true,
      handedTo: 'b',
    });
    expect(types(step)).toEqual(['finished', 'reserved', 'notify']);
    expect(step.room.durationsS).toEqual([12]);
    expect(step.room.meanS).toBe(12);
    expect(step.room.tickets.has('a')).toBe(false);
  });

  it('does not count a run cancelled before the floor, and keeps a newer ticket of the session', () => {
    const running = startIdleRun(emptyRoom(), 'a').room;
    const rejoined = enqueueTicket(leaveRoom(running, 'a').room, 'a').room;
    const step = endRun(at(rejoined, (CANCELLED_RUN_FLOOR_S - 1) * 1000), 'a', true);
    expect(step.effects[0]).toMatchObject({ cancelled: true, counted: false });
    expect(step.room.durationsS).toEqual([]);
    expect(step.room.meanS).toBeNull();
    // The new ticket is the head, so it is promoted into the freed slot.
    expect(step.room.tickets.get('a')).toMatchObject({ ticketId: 't2', status: 'ready' });
  });

  it('keeps only the last runs and recomputes the mean over them', () => {
    let room = emptyRoom();
    for (let i = 0; i <= ESTIMATE_HISTORY_RUNS; i++) {
      room = startIdleRun(at(room, i * 1000), 's').room;
      room = endRun(at(room, i * 1000 + (i + 1) * 100), 's', false).room;
    }
    expect(room.durationsS).toHaveLength(ESTIMATE_HISTORY_RUNS);
    expect(room.durationsS[0]).toBeCloseTo(0.2, 12);
    expect(room.meanS).toBe(estimateMeanS(room.durationsS));
  });
});

describe('expireDue', () => {
  it('lapses a reservation from its last millisecond on, then promotes the head', () => {
    const room = chain(
      emptyRoom(),
      (r) => bookReady(r, 'a'),
      (r) => enqueueTicket(r, 'b'),
    ).room;
    const polledAt = (ms: number) => ({ ...at(room, ms), tickets: touch(at(room, ms), 'b') });
    expect(anyDue(polledAt(9_999))).toBe(false);
    const due = polledAt(10_000);
    expect(anyDue(due)).toBe(true);
    const step = expireDue(due);
    expect(types(step)).toEqual(['released', 'notify', 'reserved', 'notify']);
    expect(step.effects[0]).toMatchObject({ reason: 'expired', handedTo: 'b' });
    expect(reservedSlotOf(step.room.slots, 'b')).toBe(0);
  });

  it('drops a queued ticket silent strictly longer than the heartbeat, and only a queued one', () => {
    const room = chain(
      emptyRoom(),
      (r) => startIdleRun(r, 'a'),
      (r) => enqueueTicket(r, 'b'),
    ).room;
    expect(anyDue(at(room, 5_000))).toBe(false);
    const step = expireDue(at(room, 5_001));
    expect(step.effects).toEqual([
      { type: 'dropped', session: 'b', ticketId: 't2', status: 'queued', reason: 'stale' },
      {
        type: 'notify',
        to: 'b',
        message: { type: 'expired', ticketId: 't2', reason: 'heartbeat' },
      },
    ]);
    expect(step.room.queue).toEqual([]);
    expect(step.room.slots[0]).toMatchObject({ phase: 'running', session: 'a' });
  });

  it('promotes before dropping the stale, so a silent head can still be promoted', () => {
    const room = chain(
      emptyRoom(),
      (r) => bookReady(r, 'a'),
      (r) => enqueueTicket(r, 'b'),
    ).room;
    const step = expireDue(at(room, 10_000)); // b silent 10 s > 5 s, but promoted first
    expect(types(step)).toEqual(['released', 'notify', 'reserved', 'notify']);
    expect(step.room.tickets.get('b')).toMatchObject({ status: 'ready' });
  });

  it('a status keeps a queued ticket alive; touch copies the map only for a known session', () => {
    const room = chain(
      emptyRoom(),
      (r) => startIdleRun(r, 'a'),
      (r) => enqueueTicket(r, 'b'),
    ).room;
    const polled = { ...room, tickets: touch(at(room, 4_000), 'b') };
    expect(anyDue(at(polled, 9_000))).toBe(false);
    expect(touch(room, 'nobody')).toBe(room.tickets);
  });
});

describe('slots', () => {
  it('moves only along the edges of SLOT_LIFECYCLE', () => {
    const idle: RoomSlot = { phase: 'idle' };
    const running: RoomSlot = { phase: 'running', session: 'a', ticketId: 't', startedAtMs: 0 };
    const slots: RoomSlot[] = [idle];
    expect(() => moveSlot(slots, 0, 'claim', running)).toThrow(/idle -claim-> running/);
    expect(() => moveSlot(slots, 0, 'claimIdle', idle)).toThrow(/cannot go/);
    moveSlot(slots, 0, 'claimIdle', running);
    expect(slots[0]).toBe(running);
    expect(() => moveSlot(slots, 0, 'reserve', idle)).toThrow(/running -reserve-> idle/);
  });

  it('answers the guards’ questions', () => {
    const room = chain(
      emptyRoom(3),
      (r) => bookReady(r, 'a'),
      (r) => startIdleRun(r, 'b'),
    ).room;
    expect(firstIdleSlot(room.slots)).toBe(2);
    expect(reservedSlotOf(room.slots, 'a')).toBe(0);
    expect(reservedSlotOf(room.slots, 'b')).toBe(-1);
    expect(runningSlotOf(room.slots, 'b')).toBe(1);
    expect(lapsed(room.slots[0]!, 9_999)).toBe(false);
    expect(lapsed(room.slots[0]!, 10_000)).toBe(true);
    expect(lapsed(room.slots[1]!, 1e9)).toBe(false);
    expect(runDurationS(at(room, 2_500), 1)).toBe(2.5);
    expect(() => runDurationS(room, 0)).toThrow(/not running/);
  });

  it('counts a run unless it was cancelled before the floor', () => {
    expect(countsAsRun(1, false)).toBe(true);
    expect(countsAsRun(CANCELLED_RUN_FLOOR_S - 0.001, true)).toBe(false);
    expect(countsAsRun(CANCELLED_RUN_FLOOR_S, true)).toBe(true);
  });
});

describe('viewTicket', () => {
  it('places running at 0 and ready before queued, with the ETA from the mean', () => {
    const room = at(
      {
        ...chain(
          emptyRoom(2),
          (r) => startIdleRun(r, 'a'),
          (r) => bookReady(r, 'b'),
          (r) => enqueueTicket(r, 'c'),
        ).room,
        meanS: 10,
      },
      4_000,
    );
    const view = (s: string) => viewTicket(room, room.tickets.get(s)!);
    expect(view('a')).toMatchObject({ status: 'running', position: 0, eta_seconds: 6 });
    expect(view('b')).toMatchObject({
      status: 'ready',
      position: 1,
      ahead: 0,
      eta_seconds: 10,
      reservation_expires_in_seconds: 6,
      runner: 'reserved',
    });
    // One ahead over two slots: one round of the mean, less the oldest run's 4 s.
    expect(view('c')).toMatchObject({
      status: 'queued',
      position: 2,
      ahead: 1,
      eta_seconds: 6,
      runner: 'running',
    });
  });
});
