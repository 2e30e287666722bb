// The async helpers in src/services/waitingRoomClient.ts against a real room: each call helper's
// round trip through call(), the boundary checks, and withAdmission as a single-runner gate on
// fake timers: jobs never overlap, run in join order, a waiter starts the moment the run before
// it ends (woken by notify, not by its next poll), an abort leaves the room, a failing job still
// reports its end, and a too-slow heartbeat loses the ticket.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  claim,
  join,
  leave,
  runEnded,
  startWaitingRoom,
  status,
  tick,
  withAdmission,
} from '../../../src/services/waitingRoomClient.js';

describe('call helpers', () => {
  it('round-trip every call through call()', async () => {
    const clock = { ms: 0 };
    const room = startWaitingRoom({
      reservationSeconds: 10,
      heartbeatSeconds: 30,
      now: () => clock.ms,
      sweepMs: 0,
    });
    const joined = await join(room, 'A');
    expect(joined).toMatchObject({ type: 'ticket', ticket: { status: 'ready', position: 1 } });
    expect(await join(room, 'B')).toMatchObject({ ticket: { status: 'queued', position: 2 } });
    expect(await status(room, 'B')).toMatchObject({ ticket: { ahead: 1 } });
    expect(await claim(room, 'A')).toMatchObject({ type: 'claimed', slot: 0, implicit: false });
    clock.ms = 7_000;
    expect(await runEnded(room, 'A', { cancelled: true })).toEqual({
      type: 'ended',
      slot: 0,
      durationS: 7,
      counted: true,
    });
    expect(await leave(room, 'B')).toMatchObject({ type: 'left' });
    expect(await status(room, 'B')).toEqual({ type: 'unknown' });
    await join(room, 'C');
    clock.ms = 17_000;
    tick(room); // a cast: settles the lapse without a reply
    expect(room.getSnapshot().value).toMatchObject({ room: 'open' });
    room.stop();
  });

  it('refuse a missing session and a bad room input at the boundary', () => {
    const room = startWaitingRoom({
      reservationSeconds: 1,
      heartbeatSeconds: 1,
      now: () => 0,
      sweepMs: 0,
    });
    expect(() => join(room, '')).toThrow(TypeError);
    expect(() => claim(room, undefined as never)).toThrow(TypeError);
    expect(() =>
      startWaitingRoom({ reservationSeconds: 1, heartbeatSeconds: 0, now: () => 0 }),
    ).toThrow(new RangeError('heartbeatSeconds must be > 0, got 0'));
    room.stop();
  });
});

describe('withAdmission, a single-runner gate', () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: 0 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  const openGate = (overrides: { maxLength?: number; heartbeatSeconds?: number } = {}) =>
    startWaitingRoom({
      reservationSeconds: 5,
      heartbeatSeconds: 2,
      now: () => Date.now(),
      ...overrides,
    });

  it('runs jobs one at a time, in join order, each starting as the previous one ends', async () => {
    const room = openGate();
    let running = 0;
    let mostAtOnce = 0;
    const started: Array<[string, number]> = [];
    const job = (name: string) => async () => {
      running++;
      mostAtOnce = Math.max(mostAtOnce, running);
      started.push([name, Date.now()]);
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      running--;
      return name.toUpperCase();
    };
    // Polls at 700 ms steps would find the slot at 3500 ms; the ready notify wakes it at 3000.
    const results = Promise.all(
      ['a', 'b', 'c'].map((s) => withAdmission(room, s, job(s), { pollMs: 700 })),
    );
    await vi.advanceTimersByTimeAsync(10_000);
    expect(await results).toEqual([
      { type: 'ran', value: 'A', slot: 0 },
      { type: 'ran', value: 'B', slot: 0 },
      { type: 'ran', value: 'C', slot: 0 },
    ]);
    expect(started).toEqual([
      ['a', 0],
      ['b', 3_000],
      ['c', 6_000],
    ]);
    expect(mostAtOnce).toBe(1);
    expect(room.getSnapshot().context.meanS).toBeCloseTo(3, 12);
    room.stop();
  });

  it('reports every position it sees, and answers full when the room is', async () => {
    const room = openGate({ maxLength: 1 });
    const seen: number[] = [];
    const hold = withAdmission(room, 'a', () => new Promise((r) => setTimeout(r, 2_000)));
    const wait = withAdmission(room, 'b', async () => 'b', {
      pollMs: 500,
      onTicket: (t) => seen.push(t.position),
    });
    expect(await withAdmission(room, 'c', async () => 'c')).toEqual({
      type: 'full',
      retryAfterS: 10,
    });
    await vi.advanceTimersByTimeAsync(3_000);
    await hold;
    expect(await wait).toMatchObject({ type: 'ran', value: 'b' });
    expect(seen[0]).toBe(2);
    expect(seen.at(-1)).toBe(1);
    room.stop();
  });

  it('leaves the room when aborted while waiting, and the next ticket moves up', async () => {
    const room = openGate();
    const hold = withAdmission(room, 'a', () => new Promise((r) => setTimeout(r, 5_000)));
    const controller = new AbortController();
    const gaveUp = withAdmission(room, 'b', async () => 'never', {
      pollMs: 500,
      signal: controller.signal,
    });
    const patient = withAdmission(room, 'c', async () => 'c', { pollMs: 500 });
    await vi.advanceTimersByTimeAsync(1_000);
    controller.abort(new Error('listener closed the tab'));
    await expect(gaveUp).rejects.toThrow('listener closed the tab');
    expect(await status(room, 'b')).toEqual({ type: 'unknown' });
    expect(await status(room, 'c')).toMatchObject({ ticket: { position: 1 } });
    await vi.advanceTimersByTimeAsync(5_000);
    await hold;
    expect(await patient).toMatchObject({ type: 'ran', value: 'c' });
    room.stop();
  });

  it('reports the end of a job that throws, then rethrows its error', async () => {
    const room = openGate();
    const finished: unknown[] = [];
    room.on('finished', (e) => finished.push(e));
    const failing = withAdmission(room, 'a', async () => {
      await new Promise((r) => setTimeout(r, 1_000));
      throw new Error('encoder crashed');
    });
    const assertion = expect(failing).rejects.toThrow('encoder crashed');
    await vi.advanceTimersByTimeAsync(1_000);
    await assertion;
    expect(finished).toMatchObject([{ session: 'a', durationS: 1, cancelled: false }]);
    expect(room.getSnapshot().value).toMatchObject({ room: 'open' });
    room.stop();
  });

  it('loses the ticket when it polls slower than the heartbeat', async () => {
    const room = openGate({ heartbeatSeconds: 1 });
    const hold = withAdmission(room, 'a', () => new Promise((r) => setTimeout(r, 4_000)));
    const slow = withAdmission(room, 'b', async () => 'b', { pollMs: 1_500 });
    await vi.advanceTimersByTimeAsync(2_000);
    expect(await slow).toEqual({ type: 'lost', reason: 'ticket_gone' });
    await vi.advanceTimersByTimeAsync(2_000);
    await hold;
    room.stop();
  });

  it('refuses a pollMs that is not positive', async () => {
    const room = openGate();
    await expect(withAdmission(room, 'a', async () => 1, { pollMs: 0 })).rejects.toThrow(
      RangeError,
    );
    room.stop();
  });
});
