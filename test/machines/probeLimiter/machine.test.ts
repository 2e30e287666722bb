// The probe limiter: pure `transition()` steps first (grant up to the cap, refuse with
// Retry-After 1, already_held, release and gone, telemetry with held after each event), then
// the running actor: it never queues (a freed slot goes to the next asker, never to an
// earlier refused one), a holder's death frees its slot, and the cap is read per operation.

import { describe, expect, it } from 'vitest';
import { createActor, initialTransition, transition } from 'xstate';
import {
  cloneProbeLimiterSnapshot,
  PROBE_RETRY_AFTER_S,
  type ProbeLimiterEvent,
  type ProbeLimiterInput,
  probeLimiterMachine,
} from '../../../src/machines/probeLimiter.js';
import { acquireProbeSlot, probeStats, release } from '../../../src/services/semaphoreClient.js';

type Snapshot = ReturnType<typeof initialTransition<typeof probeLimiterMachine>>[0];

let clock = 0;

function boot(input: Partial<ProbeLimiterInput> = {}): Snapshot {
  clock = 0;
  return initialTransition(probeLimiterMachine, { capacity: 2, now: () => clock, ...input })[0];
}

function step(s: Snapshot, event: ProbeLimiterEvent) {
  const [next, actions] = transition(probeLimiterMachine, cloneProbeLimiterSnapshot(s), event);
  return { next, out: actions.map((a: any) => a.params.event) };
}

function steps(s: Snapshot, ...events: ProbeLimiterEvent[]) {
  const out: any[] = [];
  for (const e of events) {
    const r = step(s, e);
    s = r.next;
    out.push(...r.out);
  }
  return { next: s, out };
}

describe('probe limiter chart (pure)', () => {
  it('grants up to the cap, each with acquired{held after}, then refuses with Retry-After 1', () => {
    const { next, out } = steps(
      boot(),
      { type: 'acquire', id: 'a', callId: 1 },
      { type: 'acquire', id: 'b', callId: 2 },
      { type: 'acquire', id: 'c', callId: 3 },
    );
    expect([...next.context.holders.keys()]).toEqual(['a', 'b']);
    expect(out).toEqual([
      {
        type: 'telemetry',
        event: 'acquired',
        measurements: { held: 1 },
        metadata: { capacity: 2 },
      },
      { type: 'reply', callId: 1, payload: { type: 'granted' } },
      {
        type: 'telemetry',
        event: 'acquired',
        measurements: { held: 2 },
        metadata: { capacity: 2 },
      },
      { type: 'reply', callId: 2, payload: { type: 'granted' } },
      {
        type: 'telemetry',
        event: 'rejected',
        measurements: { held: 2, retry_after: 1 },
        metadata: { capacity: 2 },
      },
      { type: 'reply', callId: 3, payload: { type: 'queue_full', retryAfterS: 1 } },
    ]);
    expect(PROBE_RETRY_AFTER_S).toBe(1);
  });

  it('answers already_held to a holder asking again', () => {
    const s = step(boot(), { type: 'acquire', id: 'a' }).next;
    const { next, out } = step(s, { type: 'acquire', id: 'a', callId: 9 });
    expect(out).toEqual([{ type: 'reply', callId: 9, payload: { type: 'already_held' } }]);
    expect(next.context.holders.size).toBe(1);
  });

  it('release and gone free a held slot with released{held, duration}; unknown ids are ok', () => {
    let s = steps(boot(), { type: 'acquire', id: 'a' }, { type: 'acquire', id: 'b' }).next;
    clock = 30;
    const released = step(s, { type: 'release', id: 'a', callId: 4 });
    expect(released.out).toEqual([
      {
        type: 'telemetry',
        event: 'released',
        measurements: { held: 1, duration: 30 },
        metadata: { capacity: 2 },
      },
      { type: 'reply', callId: 4, payload: { type: 'ok' } },
    ]);
    s = released.next;
    expect(step(s, { type: 'gone', id: 'b' }).out[0].measurements).toEqual({
      held: 0,
      duration: 30,
    });
    expect(step(s, { type: 'release', id: 'a', callId: 5 }).out).toEqual([
      { type: 'reply', callId: 5, payload: { type: 'ok' } },
    ]);
    expect(step(s, { type: 'gone', id: 'nobody' }).out).toEqual([]);
  });

  it('reads the cap from the provider on every operation', () => {
    const limits = { capacity: 1 };
    let s = boot({ capacity: undefined, limits: () => limits });
    s = step(s, { type: 'acquire', id: 'a' }).next;
    expect(step(s, { type: 'acquire', id: 'b', callId: 1 }).out.at(-1).payload.type).toBe(
      'queue_full',
    );
    limits.capacity = 2;
    const grown = step(s, { type: 'acquire', id: 'b', callId: 2 });
    expect(grown.out.at(-1).payload).toEqual({ type: 'granted' });
    expect(grown.out[0].metadata).toEqual({ capacity: 2 });
    limits.capacity = 1;
    // Lowered below what is held: nothing new until it drains.
    const over = step(grown.next, { type: 'acquire', id: 'c', callId: 3 });
    expect(over.out.at(-1).payload.type).toBe('queue_full');
  });

  it('fails to start without a cap or provider, or with an impossible cap', () => {
    expect(initialTransition(probeLimiterMachine, {})[0].status).toBe('error');
    expect(initialTransition(probeLimiterMachine, { capacity: 0 })[0].status).toBe('error');
  });
});

describe('probe limiter actor', () => {
  it('never queues: a freed slot goes to the next asker, not to an earlier refused one', async () => {
    const limiter = createActor(probeLimiterMachine, { input: { capacity: 1 } }).start();
    // Nothing is ever sent unasked: the limiter has no notify, so count every emitted event.
    const unasked: unknown[] = [];
    limiter.on('*', (e) => {
      if (e.type !== 'reply' && e.type !== 'telemetry') unasked.push(e);
    });
    expect((await acquireProbeSlot(limiter, 'first')).type).toBe('granted');
    expect((await acquireProbeSlot(limiter, 'refused')).type).toBe('queue_full');
    await release(limiter, 'first');
    expect(await probeStats(limiter)).toEqual({ held: 0, capacity: 1 });
    expect((await acquireProbeSlot(limiter, 'next')).type).toBe('granted');
    expect(unasked).toEqual([]);
    limiter.stop();
  });

  it("a holder's death frees its slot", async () => {
    const limiter = createActor(probeLimiterMachine, { input: { capacity: 1 } }).start();
    await acquireProbeSlot(limiter, 'a');
    limiter.send({ type: 'gone', id: 'a', reason: 'worker exit' });
    expect((await acquireProbeSlot(limiter, 'b')).type).toBe('granted');
    limiter.stop();
  });
});
