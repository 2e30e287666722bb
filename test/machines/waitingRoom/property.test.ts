// Random sequences of joins, polls, leaves, claims, run ends, ticks and clock advances, on rooms
// of 1..3 slots, checked after every step against a ledger the test keeps itself: slots replayed
// from the emitted events (the seam the proxy holds real slots by) never book a held slot, and
// match the room; a queued ticket polled within the heartbeat is never lost; every ticket that
// goes has a cause the ledger can name; positions are a permutation of 1..n. A witness proves
// promotions, lapses, late claims, stale drops and full rooms really happened.
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type TicketView, viewTicket } from '../../../src/machines/waitingRoomSlots.js';
import { type Emitted, openRoom, type Room } from './harness.js';

const SESSIONS = ['a', 'b', 'c', 'd', 'e'] as const;

type Held = { phase: 'idle' } | { phase: 'reserved' | 'running'; session: string };

interface Ledger {
  readonly reservationMs: number;
  readonly heartbeatMs: number;
  readonly maxLength: number;
  now: number;
  held: Held[];
  /** When the driver last saw each session's heartbeat land (a new ticket or a status). */
  lastPoll: Map<string, number>;
  /** When each ready ticket's window closes, from its `reserved` event. */
  windowEnds: Map<string, number>;
}

const witness = {
  promotions: 0,
  lapses: 0,
  lateClaims: 0,
  staleDrops: 0,
  implicitClaims: 0,
  fullRooms: 0,
};

type Step =
  | { kind: 'join' | 'poll' | 'leave' | 'claim'; session: string }
  | { kind: 'runEnded'; session: string; cancelled: boolean }
  | { kind: 'advance'; ms: number }
  | { kind: 'tick' };

/** Replays the slot events onto the ledger, failing on any booking of a slot that is held. */
function replay(ledger: Ledger, events: readonly Emitted[]): void {
  // A freed slot that names `handedTo` must be the very next thing reserved, for that session.
  const handovers = new Map<number, { from: string; to: string }>();
  for (const e of events) {
    switch (e.type) {
      case 'reserved': {
        assert.deepEqual(
          ledger.held[e.slot],
          { phase: 'idle' },
          `slot ${e.slot} booked while held`,
        );
        const handover = handovers.get(e.slot);
        assert.equal(e.handedFrom, handover?.from ?? null);
        if (handover) assert.equal(e.session, handover.to);
        handovers.delete(e.slot);
        if (e.handedFrom !== null) witness.promotions++;
        ledger.held[e.slot] = { phase: 'reserved', session: e.session };
        ledger.windowEnds.set(e.session, ledger.now + ledger.reservationMs);
        break;
      }
      case 'claimed': {
        const expected = e.implicit ? { phase: 'idle' } : { phase: 'reserved', session: e.session };
        assert.deepEqual(ledger.held[e.slot], expected);
        if (e.implicit) witness.implicitClaims++;
        ledger.held[e.slot] = { phase: 'running', session: e.session };
        ledger.windowEnds.delete(e.session);
        break;
      }
      case 'released':
      case 'finished': {
        const phase = e.type === 'released' ? 'reserved' : 'running';
        assert.deepEqual(ledger.held[e.slot], { phase, session: e.session });
        ledger.held[e.slot] = { phase: 'idle' };
        if (e.handedTo !== null) handovers.set(e.slot, { from: e.session, to: e.handedTo });
        if (e.type === 'released') ledger.windowEnds.delete(e.session);
        break;
      }
    }
  }
  assert.equal(handovers.size, 0, 'a slot was handed to nobody');
}

function checkRoom(ledger: Ledger, room: Room): void {
  const ctx = room.context();
  // The room's slots are exactly what the events said: one holder per slot, no hidden change.
  assert.deepEqual(
    ctx.slots.map((s) => (s.phase === 'idle' ? s : { phase: s.phase, session: s.session })),
    ledger.held,
  );
  const running = ctx.slots.filter((s) => s.phase === 'running').map((s) => s.session);
  assert.equal(new Set(running).size, running.length, 'a session runs twice');
  const anyIdle = ctx.slots.some((s) => s.phase === 'idle');
  if (anyIdle) assert.deepEqual(ctx.queue, [], 'a slot idles while tickets queue');
  assert.ok(ctx.queue.length <= ledger.maxLength, 'queue past maxLength');
  const state = anyIdle ? 'open' : ctx.queue.length >= ledger.maxLength ? 'full' : 'busy';
  assert.equal(room.roomState(), state);

  // Tickets agree with slots and queue; heartbeats are the ones the driver sent.
  const views: TicketView[] = [];
  for (const [session, ticket] of ctx.tickets) {
    views.push(viewTicket(ctx, ticket));
    if (ticket.status === 'queued') {
      assert.ok(ctx.queue.includes(session));
      assert.equal(ticket.lastSeenAtMs, ledger.lastPoll.get(session), 'foreign heartbeat');
    } else {
      const slot = ctx.slots[ticket.slot!]!;
      assert.equal(slot.phase, ticket.status === 'ready' ? 'reserved' : 'running');
      assert.equal('ticketId' in slot ? slot.ticketId : null, ticket.ticketId);
      if (slot.phase === 'reserved') assert.equal(slot.expiresAtMs, ledger.windowEnds.get(session));
    }
  }
  assert.equal(ctx.queue.length, views.filter((v) => v.status === 'queued').length);

  // Positions: running 0; everyone else exactly 1..n, the ready ones first.
  for (const v of views) assert.equal(v.ahead, Math.max(0, v.position - 1));
  assert.ok(views.every((v) => (v.status === 'running') === (v.position === 0)));
  const waiting = views.filter((v) => v.status !== 'running');
  assert.deepEqual(
    waiting.map((v) => v.position).sort((x, y) => x - y),
    waiting.map((_, i) => i + 1),
    'positions are not 1..n',
  );
  const readyMax = Math.max(
    0,
    ...waiting.filter((v) => v.status === 'ready').map((v) => v.position),
  );
  for (const v of waiting) if (v.status === 'queued') assert.ok(v.position > readyMax);
}

/** Every ticket that went (or was replaced) in this step went for a reason the ledger knows. */
function checkLosses(
  ledger: Ledger,
  step: Step,
  before: ReturnType<Room['context']>,
  after: ReturnType<Room['context']>,
  events: readonly Emitted[],
  windowEnds: ReadonlyMap<string, number>,
): void {
  for (const [session, ticket] of before.tickets) {
    if (after.tickets.get(session)?.ticketId === ticket.ticketId) continue;
    const own = 'session' in step && step.session === session;
    const silentMs = ledger.now - (ledger.lastPoll.get(session) ?? Number.NEGATIVE_INFINITY);
    const windowOver = ledger.now >= (windowEnds.get(session) ?? Number.POSITIVE_INFINITY);
    const cause = events.find(
      (e) =>
        (e.type === 'dropped' || e.type === 'released' || e.type === 'finished') &&
        e.session === session,
    );
    assert.ok(cause, `ticket of ${session} vanished without an event`);
    if (ticket.status === 'queued') {
      // The property itself: a queued ticket that kept polling is only lost by leaving.
      if (silentMs <= ledger.heartbeatMs)
        assert.ok(own && step.kind === 'leave', `${session} lost while polling`);
      if (cause.type === 'dropped' && cause.reason === 'stale') {
        assert.ok(silentMs > ledger.heartbeatMs);
        witness.staleDrops++;
      }
    } else if (ticket.status === 'ready') {
      if (!(own && step.kind === 'leave')) assert.ok(windowOver, `${session} lapsed early`);
      if (cause.type === 'released' && cause.reason === 'expired') witness.lapses++;
      if (cause.type === 'released' && cause.reason === 'late_claim') witness.lateClaims++;
    } else {
      assert.ok(own && (step.kind === 'leave' || step.kind === 'runEnded'));
    }
  }
  // Heartbeats the ledger expects to be stale were not refreshed behind its back.
  for (const [session, ticket] of after.tickets) {
    if (before.tickets.get(session)?.ticketId !== ticket.ticketId) {
      ledger.lastPoll.set(session, ledger.now);
    }
  }
}

function perform(ledger: Ledger, room: Room, step: Step): void {
  const before = room.context();
  room.drain();
  switch (step.kind) {
    case 'advance':
      ledger.now += step.ms;
      room.clock.ms = ledger.now;
      return; // nothing happens until someone calls
    case 'tick':
      room.tick();
      break;
    case 'join': {
      const outcome = room.join(step.session);
      if (outcome.type === 'full') {
        witness.fullRooms++;
        assert.equal(room.roomState(), 'full');
        assert.equal(room.context().tickets.has(step.session), false);
      }
      break;
    }
    case 'poll': {
      const outcome = room.status(step.session);
      if (outcome.type === 'ticket') ledger.lastPoll.set(step.session, ledger.now);
      break;
    }
    case 'leave':
      room.leave(step.session);
      break;
    case 'claim': {
      const held = before.tickets.get(step.session);
      const window = ledger.windowEnds.get(step.session);
      const outcome = room.claim(step.session);
      if (outcome.type === 'refused' && outcome.reason === 'reservation_expired') {
        assert.equal(held?.status, 'ready');
        assert.ok(ledger.now >= window!);
      }
      if (held?.status === 'ready' && ledger.now < window!) {
        const runsElsewhere = before.slots.some(
          (s) => s.phase === 'running' && s.session === step.session,
        );
        assert.equal(outcome.type, runsElsewhere ? 'refused' : 'claimed');
      }
      break;
    }
    case 'runEnded':
      room.runEnded(step.session, step.cancelled);
      break;
  }
  const events = room.drain();
  const windowEnds = new Map(ledger.windowEnds);
  replay(ledger, events);
  checkLosses(ledger, step, before, room.context(), events, windowEnds);
  checkRoom(ledger, room);
}

const session = fc.constantFrom(...SESSIONS);
const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 5, arbitrary: session.map((s) => ({ kind: 'join' as const, session: s })) },
  { weight: 6, arbitrary: session.map((s) => ({ kind: 'poll' as const, session: s })) },
  { weight: 1, arbitrary: session.map((s) => ({ kind: 'leave' as const, session: s })) },
  { weight: 3, arbitrary: session.map((s) => ({ kind: 'claim' as const, session: s })) },
  {
    weight: 3,
    arbitrary: fc
      .record({ session, cancelled: fc.boolean() })
      .map((r) => ({ kind: 'runEnded' as const, ...r })),
  },
  {
    weight: 3,
    arbitrary: fc
      .integer({ min: 1, max: 16 })
      .map((q) => ({ kind: 'advance' as const, ms: q * 250 })),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'tick' as const }) },
);
/** Mostly single steps; sometimes a pause then a claim, so a holder's late claim is not rare. */
const trafficArb: fc.Arbitrary<Step[]> = fc
  .array(
    fc.oneof(
      { weight: 9, arbitrary: stepArb.map((step) => [step]) },
      {
        weight: 1,
        arbitrary: fc
          .record({ session, ms: fc.integer({ min: 1, max: 8 }).map((s) => s * 1000) })
          .map(({ session: s, ms }): Step[] => [
            { kind: 'advance', ms },
            { kind: 'claim', session: s },
          ]),
      },
    ),
    { minLength: 1, maxLength: 50, size: 'max' },
  )
  .map((chunks) => chunks.flat());

describe('admission queue under random traffic', () => {
  it('keeps slots single-held, polled tickets alive, and positions 1..n', () => {
    fc.assert(
      fc.property(
        fc.record({
          slots: fc.integer({ min: 1, max: 3 }),
          reservationSeconds: fc.integer({ min: 1, max: 8 }),
          heartbeatSeconds: fc.integer({ min: 2, max: 10 }),
          maxLength: fc.integer({ min: 0, max: 4 }),
        }),
        trafficArb,
        (settings, steps) => {
          const room = openRoom(settings);
          const ledger: Ledger = {
            reservationMs: settings.reservationSeconds * 1000,
            heartbeatMs: settings.heartbeatSeconds * 1000,
            maxLength: settings.maxLength,
            now: 0,
            held: Array.from({ length: settings.slots }, () => ({ phase: 'idle' }) as const),
            lastPoll: new Map(),
            windowEnds: new Map(),
          };
          try {
            for (const step of steps) perform(ledger, room, step);
          } finally {
            room.actor.stop();
          }
        },
      ),
      { numRuns: 100 },
    );
    if (process.env.AQ_WITNESS) console.log(witness);
    // Non-vacuity: every kind of hand-over and expiry the property talks about did happen.
    for (const [name, count] of Object.entries(witness)) {
      expect(count, `${name} never happened`).toBeGreaterThan(0);
    }
  });
});
