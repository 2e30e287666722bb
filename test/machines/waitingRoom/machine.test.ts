// The waiting room against the seed's rules, one rule per test, on an injected clock: direct
// booking, FIFO queueing, the idempotent join, the heartbeat (status only, queued only, strict >),
// reservation lapse (>=) and promotion, the holder's late claim, implicit claims, run end after
// cleanup, the EMA ETA with its rounding, the full room, several slots, and the events the proxy
// uses to hold, hand over and give back real slots. Nothing sleeps; the clock moves by hand.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createActor } from 'xstate';
import { waitingRoomMachine } from '../../../src/machines/waitingRoom.js';
import {
  estimateMeanS,
  FULL_RETRY_AFTER_FALLBACK_S,
  initialRoom,
  roundHalfEven,
} from '../../../src/machines/waitingRoomSlots.js';
import { type Emitted, openRoom, telemetryOf, ticketOf } from './harness.js';

const withoutNotify = (events: Emitted[]) => events.filter((e) => e.type !== 'notify');

describe('join', () => {
  it('books an idle slot directly as ready, with the whole window', () => {
    const room = openRoom();
    expect(ticketOf(room.join('A'))).toEqual({
      ticket_id: 'q_1',
      status: 'ready',
      position: 1,
      ahead: 0,
      eta_seconds: null,
      reservation_expires_in_seconds: 10,
      runner: 'reserved',
    });
    expect(room.drain()).toEqual([
      { type: 'joined', session: 'A', ticketId: 'q_1', status: 'ready', queued: 0 },
      {
        type: 'reserved',
        session: 'A',
        ticketId: 'q_1',
        slot: 0,
        expiresInS: 10,
        handedFrom: null,
      },
      {
        type: 'notify',
        to: 'A',
        message: { type: 'ready', ticketId: 'q_1', slot: 0, expiresInS: 10 },
      },
    ]);
    expect(room.roomState()).toBe('busy');
  });

  it('queues behind a busy runner in join order', () => {
    const room = openRoom();
    room.join('A');
    const b = ticketOf(room.join('B'));
    const c = ticketOf(room.join('C'));
    expect([b.status, b.position, b.ahead, b.runner]).toEqual(['queued', 2, 1, 'reserved']);
    expect([c.status, c.position, c.ahead]).toEqual(['queued', 3, 2]);
    expect(b.reservation_expires_in_seconds).toBeNull();
    expect(room.context().queue).toEqual(['B', 'C']);
  });

  it('is idempotent per session, and a repeated join is not a heartbeat', () => {
    const room = openRoom({ heartbeatSeconds: 30, reservationSeconds: 1000 });
    room.join('A');
    const first = ticketOf(room.join('B'));
    room.at(20);
    expect(ticketOf(room.join('B'))).toEqual(first);
    expect(room.context().tickets.size).toBe(2);
    // Only `status` refreshes last_seen: 30.001 s after the first join the ticket is stale, so
    // this join finds no ticket and issues a new one at the back.
    room.at(30.001);
    const again = ticketOf(room.join('B'));
    expect(again.ticket_id).toBe('q_3');
    expect(telemetryOf(room.events, 'dropped')).toEqual([
      { type: 'dropped', session: 'B', ticketId: 'q_2', status: 'queued', reason: 'stale' },
    ]);
  });

  it('answers full with a Retry-After once maxLength tickets queue; ready ones not counted', () => {
    const room = openRoom({ maxLength: 2 });
    room.join('A'); // ready: not in the queue
    room.join('B');
    room.join('C');
    expect(room.roomState()).toBe('full');
    expect(room.join('D')).toEqual({ type: 'full', retryAfterS: FULL_RETRY_AFTER_FALLBACK_S });
    expect(telemetryOf(room.events, 'rejected')).toEqual([
      { type: 'rejected', session: 'D', retryAfterS: FULL_RETRY_AFTER_FALLBACK_S, queued: 2 },
    ]);
    expect(room.context().tickets.has('D')).toBe(false);
    // An existing ticket is still answered while full.
    expect(ticketOf(room.join('C')).position).toBe(3);
    room.leave('B');
    expect(room.roomState()).toBe('busy');
    expect(ticketOf(room.join('D')).position).toBe(3);
  });

  it('bases Retry-After on the mean run shared across the slots once a run was timed', () => {
    const room = openRoom({ maxLength: 0, slots: 2 });
    room.claim('X');
    room.at(9);
    room.runEnded('X'); // mean 9 s
    room.join('A');
    room.join('B');
    expect(room.join('C')).toEqual({ type: 'full', retryAfterS: 5 }); // ceil(9 / 2)
  });

  it('with maxLength 0 still books an idle slot', () => {
    const room = openRoom({ maxLength: 0 });
    expect(ticketOf(room.join('A')).status).toBe('ready');
    expect(room.join('B').type).toBe('full');
  });
});

describe('status is the heartbeat', () => {
  it('answers unknown for a session without a ticket', () => {
    const room = openRoom();
    expect(room.status('nobody')).toEqual({ type: 'unknown' });
  });

  it('keeps a polling queued ticket alive far past the heartbeat', () => {
    const room = openRoom({ heartbeatSeconds: 30, reservationSeconds: 1000 });
    room.join('A');
    room.join('B');
    for (let s = 25; s <= 250; s += 25) {
      room.at(s);
      expect(ticketOf(room.status('B')).status).toBe('queued');
    }
  });

  it('drops a queued ticket silent for more than heartbeatSeconds, not at exactly that', () => {
    const room = openRoom({ heartbeatSeconds: 30, reservationSeconds: 1000 });
    room.join('A');
    room.join('B');
    room.join('C');
    room.at(30);
    room.tick();
    expect(room.context().queue).toEqual(['B', 'C']);
    room.at(30.001);
    expect(room.status('B')).toEqual({ type: 'unknown' });
    expect(room.status('C')).toEqual({ type: 'unknown' });
    expect(telemetryOf(room.events, 'dropped').map((e) => 'session' in e && e.session)).toEqual([
      'B',
      'C',
    ]);
    expect(room.events).toContainEqual({
      type: 'notify',
      to: 'B',
      message: { type: 'expired', ticketId: 'q_2', reason: 'heartbeat' },
    });
  });

  it('never drops a ready or a running ticket for silence', () => {
    const room = openRoom({ heartbeatSeconds: 5, reservationSeconds: 60 });
    room.join('A');
    room.at(59);
    expect(ticketOf(room.status('A')).status).toBe('ready');
    room.claim('A');
    room.at(5000);
    expect(ticketOf(room.status('A')).status).toBe('running');
  });
});

describe('a reservation lapses and promotes', () => {
  it('lapses at exactly reservationSeconds, found by any call; the head gets a new window', () => {
    const room = openRoom({ reservationSeconds: 10 });
    room.join('A');
    room.join('B');
    room.at(9.999);
    expect(ticketOf(room.status('B')).status).toBe('queued');
    room.drain();
    room.at(10);
    expect(ticketOf(room.status('B'))).toMatchObject({
      status: 'ready',
      position: 1,
      ahead: 0,
      reservation_expires_in_seconds: 10,
    });
    expect(room.drain()).toEqual([
      {
        type: 'released',
        session: 'A',
        ticketId: 'q_1',
        slot: 0,
        reason: 'expired',
        handedTo: 'B',
      },
      {
        type: 'notify',
        to: 'A',
        message: { type: 'expired', ticketId: 'q_1', reason: 'reservation' },
      },
      { type: 'reserved', session: 'B', ticketId: 'q_2', slot: 0, expiresInS: 10, handedFrom: 'A' },
      {
        type: 'notify',
        to: 'B',
        message: { type: 'ready', ticketId: 'q_2', slot: 0, expiresInS: 10 },
      },
    ]);
    expect(room.status('A')).toEqual({ type: 'unknown' });
  });

  it('is settled by tick with no session calling, and the room opens when nobody waits', () => {
    const room = openRoom();
    room.join('A');
    room.at(10);
    expect(room.roomState()).toBe('busy');
    expect(room.tick()).toEqual({ type: 'ticked' });
    expect(room.roomState()).toBe('open');
    expect(room.context().slots).toEqual([{ phase: 'idle' }]);
  });

  it('lapses before the heartbeat sweep, in the seed’s order: a silent head is promoted', () => {
    const room = openRoom({ reservationSeconds: 40, heartbeatSeconds: 30 });
    room.join('A');
    room.join('B'); // never polls
    room.join('C');
    room.at(25);
    room.status('C');
    room.at(40); // B went silent past 30 s, but no call swept it before A's window closed
    room.tick();
    expect(room.context().tickets.get('B')?.status).toBe('ready');
    expect(telemetryOf(room.events, 'dropped')).toEqual([]);
    room.at(50);
    room.status('C');
    room.at(79.999);
    expect(ticketOf(room.status('C')).status).toBe('queued');
    room.at(80); // B's own window lapses unclaimed, and C is next
    expect(ticketOf(room.status('C')).status).toBe('ready');
  });
});

describe('the built-in sweep', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('settles a lapsed reservation on its own, every sweepMs', () => {
    vi.useFakeTimers({ now: 0 });
    const events: Emitted[] = [];
    const actor = createActor(waitingRoomMachine, {
      input: { reservationSeconds: 2, heartbeatSeconds: 30, now: () => Date.now(), sweepMs: 500 },
    });
    actor.on('released', (e) => events.push(e));
    actor.start();
    actor.send({ type: 'join', session: 'A' });
    vi.advanceTimersByTime(1999);
    expect(events).toEqual([]);
    vi.advanceTimersByTime(1); // the sweep at 2000 ms is the first at or past the window
    expect(events.map((e) => e.type)).toEqual(['released']);
    expect((actor.getSnapshot().value as { room: string }).room).toBe('open');
    actor.stop();
  });

  it('is off with sweepMs 0', () => {
    const room = openRoom({ sweepMs: 0 });
    expect(room.actor.getSnapshot().value).toEqual({ room: 'open', sweeper: 'off' });
  });
});

describe('leave', () => {
  it('by the holder passes its slot to the next ticket, with a window from now', () => {
    const room = openRoom();
    room.join('A');
    room.join('B');
    room.at(4);
    room.drain();
    expect(room.leave('A')).toEqual({ type: 'left', ticketId: 'q_1' });
    expect(withoutNotify(room.drain())).toEqual([
      { type: 'released', session: 'A', ticketId: 'q_1', slot: 0, reason: 'left', handedTo: 'B' },
      { type: 'reserved', session: 'B', ticketId: 'q_2', slot: 0, expiresInS: 10, handedFrom: 'A' },
    ]);
    room.at(13.9);
    expect(ticketOf(room.status('B')).status).toBe('ready');
  });

  it('by a queued ticket closes the gap behind it', () => {
    const room = openRoom();
    for (const s of ['A', 'B', 'C', 'D']) room.join(s);
    room.leave('C');
    expect(ticketOf(room.status('D')).position).toBe(3);
    expect(telemetryOf(room.events, 'dropped')).toEqual([
      { type: 'dropped', session: 'C', ticketId: 'q_3', status: 'queued', reason: 'left' },
    ]);
  });

  it('without a ticket answers unknown', () => {
    expect(openRoom().leave('nobody')).toEqual({ type: 'unknown' });
  });

  it('while running drops the ticket, but the run keeps its slot until runEnded', () => {
    const room = openRoom();
    room.join('A');
    room.claim('A');
    room.join('B');
    room.leave('A');
    expect(room.status('A')).toEqual({ type: 'unknown' });
    expect(ticketOf(room.status('B'))).toMatchObject({ status: 'queued', runner: 'running' });
    room.at(3);
    expect(room.runEnded('A')).toEqual({ type: 'ended', slot: 0, durationS: 3, counted: true });
    expect(ticketOf(room.status('B')).status).toBe('ready');
  });
});

describe('claim', () => {
  it('by the holder within its window runs in the reserved slot, never freeing it', () => {
    const room = openRoom();
    room.join('A');
    room.at(9.999);
    room.drain();
    expect(room.claim('A')).toEqual({ type: 'claimed', ticketId: 'q_1', slot: 0, implicit: false });
    expect(room.drain()).toEqual([
      { type: 'claimed', session: 'A', ticketId: 'q_1', slot: 0, implicit: false },
    ]);
    expect(ticketOf(room.status('A'))).toMatchObject({
      status: 'running',
      position: 0,
      ahead: 0,
      reservation_expires_in_seconds: null,
      runner: 'running',
    });
  });

  it('by the holder at or after its window is refused, even when this call finds the lapse', () => {
    const room = openRoom();
    room.join('A');
    room.at(10); // nothing has swept yet: the claim itself discovers the lapse
    expect(room.claim('A')).toEqual({ type: 'refused', reason: 'reservation_expired' });
    expect(room.roomState()).toBe('open');
    expect(telemetryOf(room.events, 'released')).toEqual([
      {
        type: 'released',
        session: 'A',
        ticketId: 'q_1',
        slot: 0,
        reason: 'late_claim',
        handedTo: null,
      },
    ]);
    // The refusal spent the reservation; the session's next request finds the slot idle.
    expect(room.claim('A')).toMatchObject({ type: 'claimed', implicit: true });
  });

  it('late by the holder hands the slot to the next ticket', () => {
    const room = openRoom();
    room.join('A');
    room.join('B');
    room.at(12);
    expect(room.claim('A')).toEqual({ type: 'refused', reason: 'reservation_expired' });
    expect(ticketOf(room.status('B'))).toMatchObject({
      status: 'ready',
      reservation_expires_in_seconds: 10,
    });
  });

  it('without a ticket while a slot is idle joins, reserves and claims in one step', () => {
    const room = openRoom();
    expect(room.claim('X')).toEqual({ type: 'claimed', ticketId: 'q_1', slot: 0, implicit: true });
    expect(room.drain()).toEqual([
      { type: 'claimed', session: 'X', ticketId: 'q_1', slot: 0, implicit: true },
    ]);
    expect(ticketOf(room.status('X'))).toMatchObject({ status: 'running', position: 0 });
  });

  it('by a stranger first lets a lapsed reservation go, then finds the slot idle', () => {
    const room = openRoom();
    room.join('A');
    room.at(10);
    expect(room.claim('X')).toMatchObject({ type: 'claimed', implicit: true });
    expect(room.status('A')).toEqual({ type: 'unknown' });
  });

  it('by a queued session its own call promotes is refused, as the seed; the next one runs', () => {
    const one = openRoom();
    one.join('A');
    one.join('B');
    one.at(10); // A's window closed: settling this claim promotes B
    expect(one.claim('B')).toEqual({ type: 'refused', reason: 'busy' });
    expect(ticketOf(one.status('B')).status).toBe('ready');
    expect(one.claim('B')).toMatchObject({ type: 'claimed', implicit: false });
    // With two slots the second lapse leaves a slot idle, and the promoted session still waits
    // for its own claim instead of taking the idle slot as well.
    const two = openRoom({ slots: 2 });
    for (const s of ['A', 'B', 'C']) two.join(s);
    two.at(10);
    expect(two.claim('C')).toEqual({ type: 'refused', reason: 'busy' });
    expect(two.roomState()).toBe('open');
    expect(two.context().slots.filter((s) => s.phase !== 'idle')).toHaveLength(1);
    expect(two.claim('C')).toMatchObject({ type: 'claimed', slot: 0, implicit: false });
  });

  it('while the runner is busy is refused and leaves the queue as it was', () => {
    const room = openRoom();
    room.join('A');
    room.join('B');
    expect(room.claim('B')).toEqual({ type: 'refused', reason: 'busy' });
    expect(room.claim('Y')).toEqual({ type: 'refused', reason: 'busy' });
    expect(room.context().queue).toEqual(['B']);
    expect(room.context().tickets.has('Y')).toBe(false);
    expect(ticketOf(room.status('A')).status).toBe('ready');
  });

  it('by a session whose run is going: busy with one slot, already_running with more', () => {
    const one = openRoom();
    one.claim('A');
    expect(one.claim('A')).toEqual({ type: 'refused', reason: 'busy' });
    const two = openRoom({ slots: 2 });
    two.claim('A');
    expect(two.claim('A')).toEqual({ type: 'refused', reason: 'already_running' });
    // Left and joined again: booked into the second slot, but its claim waits for the run.
    two.leave('A');
    expect(ticketOf(two.join('A')).status).toBe('ready');
    expect(two.claim('A')).toEqual({ type: 'refused', reason: 'already_running' });
    expect(two.context().tickets.get('A')?.status).toBe('ready');
  });
});

describe('runEnded', () => {
  it('times the run and starts the next window only now, after cleanup', () => {
    const room = openRoom({ reservationSeconds: 10 });
    room.join('A');
    room.claim('A');
    room.join('B');
    room.at(15);
    room.drain();
    expect(room.runEnded('A')).toEqual({ type: 'ended', slot: 0, durationS: 15, counted: true });
    expect(withoutNotify(room.drain())).toEqual([
      {
        type: 'finished',
        session: 'A',
        slot: 0,
        durationS: 15,
        cancelled: false,
        counted: true,
        handedTo: 'B',
      },
      { type: 'reserved', session: 'B', ticketId: 'q_2', slot: 0, expiresInS: 10, handedFrom: 'A' },
    ]);
    room.at(24.999);
    expect(ticketOf(room.status('B'))).toMatchObject({
      status: 'ready',
      reservation_expires_in_seconds: 0,
    });
    room.at(25);
    expect(room.status('B')).toEqual({ type: 'unknown' });
    expect(room.status('A')).toEqual({ type: 'unknown' });
  });

  it('promotes before it sweeps, as the seed: a head silent since the last call moves up', () => {
    const room = openRoom({ heartbeatSeconds: 5, reservationSeconds: 100 });
    room.claim('A');
    room.join('B'); // never polls
    room.join('C');
    room.at(4);
    room.status('C');
    room.at(9); // B silent 9 s, but nothing has swept since 4 s
    room.runEnded('A');
    expect(room.context().tickets.get('B')?.status).toBe('ready');
    expect(ticketOf(room.status('C'))).toMatchObject({ status: 'queued', position: 2 });
  });

  it('does not time a run cancelled under 5 s; from 5 s on it does', () => {
    const room = openRoom();
    room.claim('A');
    room.at(4.999);
    expect(room.runEnded('A', true)).toMatchObject({ counted: false });
    expect(room.context().durationsS).toEqual([]);
    room.claim('B');
    room.at(9.999);
    expect(room.runEnded('B', true)).toMatchObject({ counted: true });
    room.claim('C');
    room.at(10.999);
    expect(room.runEnded('C', false)).toMatchObject({ counted: true, durationS: 1 });
    expect(room.context().durationsS.map((d) => Math.round(d * 1000))).toEqual([5000, 1000]);
  });

  it('for a session that is not running answers unknown and changes nothing', () => {
    const room = openRoom();
    room.join('A');
    const before = room.context();
    expect(room.runEnded('A')).toEqual({ type: 'unknown' });
    expect(room.runEnded('nobody')).toEqual({ type: 'unknown' });
    expect(room.context().slots).toBe(before.slots);
    expect(room.context().durationsS).toEqual([]);
  });

  it('keeps the new ticket of a session that left and joined again during its run', () => {
    const room = openRoom();
    room.claim('A');
    room.leave('A');
    const rejoined = ticketOf(room.join('A'));
    expect(rejoined.status).toBe('queued');
    room.at(6);
    room.runEnded('A');
    expect(ticketOf(room.status('A'))).toMatchObject({
      ticket_id: rejoined.ticket_id,
      status: 'ready',
    });
  });
});

describe('the ETA', () => {
  /** A room whose mean run is `durations` folded by the EMA, clock left at the last run's end. */
  function timed(durations: number[], slots = 1) {
    const room = openRoom({ slots, reservationSeconds: 1000, heartbeatSeconds: 1000 });
    let t = 0;
    for (const d of durations) {
      room.claim('warmup');
      t += d;
      room.at(t);
      room.runEnded('warmup');
    }
    return { room, t };
  }

  it('is null until a run has been timed', () => {
    const room = openRoom();
    room.join('A');
    expect(ticketOf(room.join('B')).eta_seconds).toBeNull();
  });

  it('folds runs oldest first: mean = 0.3·d + 0.7·mean', () => {
    expect(estimateMeanS([10])).toBe(10);
    expect(estimateMeanS([10, 20])).toBeCloseTo(13, 12);
    expect(estimateMeanS([10, 20, 30])).toBeCloseTo(18.1, 12);
    const { room } = timed([10, 20, 30]);
    expect(room.context().meanS).toBeCloseTo(18.1, 12);
  });

  it('forgets all but the last 20 runs outright', () => {
    const { room } = timed([1000, ...Array(20).fill(10)]);
    expect(room.context().durationsS).toHaveLength(20);
    expect(room.context().meanS).toBe(10);
  });

  it('queued: mean × (ahead + 1) minus the running job’s elapsed time, floored at 0', () => {
    const { room, t } = timed([10, 20]); // mean 13
    room.claim('A');
    room.join('B');
    room.join('C');
    room.at(t + 4);
    expect(ticketOf(room.status('B'))).toMatchObject({
      position: 1,
      eta_seconds: 9,
      runner: 'running',
    });
    expect(ticketOf(room.status('C'))).toMatchObject({ position: 2, eta_seconds: 22 });
    room.at(t + 20);
    expect(ticketOf(room.status('B')).eta_seconds).toBe(0);
    expect(ticketOf(room.status('C')).eta_seconds).toBe(6);
    expect(ticketOf(room.status('A')).eta_seconds).toBe(0); // running: mean − own elapsed
  });

  it('ready and queued behind a reservation: mean × (ahead + 1), nothing subtracted', () => {
    const { room, t } = timed([10, 20]);
    room.join('A');
    room.join('B');
    room.at(t + 4);
    expect(ticketOf(room.status('A'))).toMatchObject({ eta_seconds: 13, runner: 'reserved' });
    expect(ticketOf(room.status('B'))).toMatchObject({
      ahead: 1,
      eta_seconds: 26,
      runner: 'reserved',
    });
  });

  it('rounds half to even, as the seed does', () => {
    expect([0.5, 1.5, 2.5, 3.5, 2.4999, 2.5001].map(roundHalfEven)).toEqual([0, 2, 2, 4, 2, 3]);
    const { room, t } = timed([10]);
    room.claim('A');
    room.join('B');
    room.at(t + 6.5);
    expect(ticketOf(room.status('B')).eta_seconds).toBe(4); // 3.5
    room.at(t + 7.5);
    expect(ticketOf(room.status('B')).eta_seconds).toBe(2); // 2.5
    room.at(t + 10);
    room.runEnded('A');
    room.at(t + 10 + 1000 - 2.5);
    expect(ticketOf(room.status('B')).reservation_expires_in_seconds).toBe(2);
  });

  it('with several slots: mean × (⌊ahead / slots⌋ + 1) minus the oldest running job', () => {
    const { room, t } = timed([10], 2);
    room.claim('A');
    room.at(t + 3);
    room.claim('B');
    for (const s of ['C', 'D', 'E', 'F']) room.join(s);
    room.at(t + 5);
    const etas = ['C', 'D', 'E', 'F'].map((s) => ticketOf(room.status(s)).eta_seconds);
    expect(etas).toEqual([5, 5, 15, 15]);
    expect(ticketOf(room.status('B')).eta_seconds).toBe(8); // its own run: 10 − 2
  });
});

describe('several slots', () => {
  it('fills every idle slot as ready before anyone queues', () => {
    const room = openRoom({ slots: 3 });
    const views = ['A', 'B', 'C', 'D'].map((s) => ticketOf(room.join(s)));
    expect(views.map((v) => [v.status, v.position])).toEqual([
      ['ready', 1],
      ['ready', 2],
      ['ready', 3],
      ['queued', 4],
    ]);
    expect(telemetryOf(room.events, 'reserved').map((e) => 'slot' in e && e.slot)).toEqual([
      0, 1, 2,
    ]);
    expect(room.roomState()).toBe('busy');
  });

  it('re-reserves the slot that freed, in the same step, for the oldest queued ticket', () => {
    const room = openRoom({ slots: 2 });
    for (const s of ['A', 'B', 'C', 'D']) room.join(s);
    room.claim('A');
    room.at(3);
    room.leave('B'); // slot 1
    room.drain();
    room.runEnded('A'); // slot 0
    expect(withoutNotify(room.drain())).toMatchObject([
      { type: 'finished', session: 'A', slot: 0, handedTo: 'D' },
      { type: 'reserved', session: 'D', slot: 0, handedFrom: 'A' },
    ]);
    expect(room.context().slots.map((s) => s.phase === 'idle' || s.session)).toEqual(['D', 'C']);
    // Both ready, in join order.
    expect(ticketOf(room.status('C')).position).toBe(1);
    expect(ticketOf(room.status('D')).position).toBe(2);
  });
});

describe('input', () => {
  const valid = { reservationSeconds: 10, heartbeatSeconds: 30, now: () => 0 };

  it('rejects a bad option by name', () => {
    expect(() => initialRoom({ ...valid, reservationSeconds: 0 })).toThrow(
      new RangeError('reservationSeconds must be > 0, got 0'),
    );
    expect(() => initialRoom({ ...valid, heartbeatSeconds: Number.NaN })).toThrow(RangeError);
    expect(() => initialRoom({ ...valid, slots: 0 })).toThrow(/slots must be >= 1/);
    expect(() => initialRoom({ ...valid, slots: 1.5 })).toThrow(TypeError);
    expect(() => initialRoom({ ...valid, maxLength: -1 })).toThrow(/maxLength/);
    expect(() => initialRoom({ ...valid, now: 5 as never })).toThrow(TypeError);
    expect(() => initialRoom({ ...valid, now: () => Number.NaN })).toThrow(/now\(\)/);
  });

  it('defaults to one slot, 100 queued tickets, ids q_ plus 16 url-safe characters', () => {
    const room = initialRoom(valid);
    expect(room.settings).toMatchObject({ slots: 1, maxLength: 100, sweepMs: 1000 });
    const id = room.settings.newTicketId();
    expect(id).toMatch(/^q_[A-Za-z0-9_-]{16}$/);
    expect(room.settings.newTicketId()).not.toBe(id);
  });
});
