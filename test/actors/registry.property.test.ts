// Property: whatever the interleaving of concurrent startOrJoin calls, start latencies, refused
// starts, and coordinators stopping (some unregistering themselves first), a key never has two
// live actors, start never runs while another start or a live actor holds the key, every
// outcome names a real actor of its key, and the registry ends consistent with what is alive.
// fast-check's scheduler picks the interleavings; witnesses prove overlap, joins, retries and
// refusals really happened.
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { createActor, setup } from 'xstate';
import { call, pendingCalls } from '../../src/actors/call.js';
import { Registry, type StartResult } from '../../src/actors/registry.js';
import { type CallEnvelope, reply } from '../../src/core/protocol.js';

const KEYS = ['a', 'b'] as const;
type Key = (typeof KEYS)[number];

const coordinator = setup({
  types: {} as { events: ({ type: 'join' } | { type: 'leave' }) & CallEnvelope },
}).createMachine({
  initial: 'running',
  states: {
    running: { on: { join: { actions: reply(() => 'backlog') }, leave: 'gone' } },
    gone: { type: 'final' },
  },
});
type Coordinator = ReturnType<typeof createActor<typeof coordinator>>;

const witness = { overlapped: 0, joined: 0, retried: 0, refused: 0, stoppedLive: 0 };

const callerArb = fc.record({
  key: fc.constantFrom(...KEYS),
  refuse: fc.integer({ min: 0, max: 3 }).map((n) => n === 0), // one start in four is refused
  latency: fc.nat({ max: 2 }),
});
const stopArb = fc.record({ key: fc.constantFrom(...KEYS), unregisterFirst: fc.boolean() });

it('never makes two live actors for one key, under any interleaving', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.scheduler(),
      fc.array(callerArb, { minLength: 2, maxLength: 10 }),
      fc.array(stopArb, { maxLength: 4 }),
      async (s, callers, stops) => {
        const registry = new Registry<Key, Coordinator>();
        const live = new Map<Key, Set<Coordinator>>(KEYS.map((k) => [k, new Set()]));
        const created = new Map<Key, Set<Coordinator>>(KEYS.map((k) => [k, new Set()]));
        const startsInFlight = new Map<Key, number>(KEYS.map((k) => [k, 0]));
        const violations: string[] = [];

        const outcomes = callers.map((caller, i) =>
          s.schedule(Promise.resolve(), `caller ${i} ${caller.key}`).then(() => {
            if (startsInFlight.get(caller.key)! > 0) witness.overlapped += 1;
            return registry.startOrJoin(caller.key, {
              start: async (key): Promise<StartResult<Coordinator, number, string>> => {
                if (startsInFlight.get(key)! > 0) violations.push(`second start of ${key}`);
                if (live.get(key)!.size > 0) violations.push(`start of ${key} with a live actor`);
                startsInFlight.set(key, startsInFlight.get(key)! + 1);
                for (let step = 0; step <= caller.latency; step++) {
                  await s.schedule(Promise.resolve(), `admit ${i} ${key}`);
                }
                startsInFlight.set(key, startsInFlight.get(key)! - 1);
                if (caller.refuse) return { type: 'failed', failure: 'queue_full' };
                if (live.get(key)!.size > 0) violations.push(`second live actor for ${key}`);
                const actor = createActor(coordinator).start();
                live.get(key)!.add(actor);
                created.get(key)!.add(actor);
                actor.subscribe({ complete: () => live.get(key)!.delete(actor) });
                return { type: 'started', actor, value: i };
              },
              join: async (actor, key, signal) => {
                await s.schedule(Promise.resolve(), `join ${i} ${key}`);
                return call<string>(actor, { type: 'join' }, { signal, timeout: 60_000 });
              },
            });
          }),
        );
        for (const stop of stops) {
          void s.schedule(Promise.resolve(), `stop ${stop.key}`).then(() => {
            const actor = registry.get(stop.key);
            if (actor === undefined) return;
            witness.stoppedLive += 1;
            if (stop.unregisterFirst) registry.unregister(stop.key, actor);
            actor.send({ type: 'leave' });
          });
        }

        const results = await s.waitFor(Promise.all(outcomes));
        await s.waitAll(); // stops scheduled after the last caller settled

        expect(violations).toEqual([]);
        results.forEach((outcome, i) => {
          const { key, refuse } = callers[i]!;
          if (outcome.attempts > 1) witness.retried += 1;
          switch (outcome.type) {
            case 'started':
              expect(created.get(key)!.has(outcome.actor)).toBe(true);
              expect(outcome.value).toBe(i);
              break;
            case 'joined':
              witness.joined += 1;
              expect(created.get(key)!.has(outcome.actor)).toBe(true);
              expect(outcome.value).toBe('backlog');
              break;
            case 'failed':
              witness.refused += 1;
              expect(refuse).toBe(true);
              break;
            default:
              // Each stop forces at most one retry per caller, and there are at most 4 stops.
              throw new Error(`unexpected outcome ${JSON.stringify(outcome)}`);
          }
        });
        for (const key of KEYS) {
          expect(live.get(key)!.size).toBeLessThanOrEqual(1);
          const [alive] = live.get(key)!;
          expect(registry.get(key)).toBe(alive);
          for (const actor of created.get(key)!) expect(pendingCalls(actor)).toBe(0);
        }
        expect(registry.starting).toBe(0);
        expect(registry.size).toBe(KEYS.filter((k) => live.get(k)!.size > 0).length);
      },
    ),
    { numRuns: 150 },
  );
  expect(witness.overlapped).toBeGreaterThan(0);
  expect(witness.joined).toBeGreaterThan(0);
  expect(witness.retried).toBeGreaterThan(0);
  expect(witness.refused).toBeGreaterThan(0);
  expect(witness.stoppedLive).toBeGreaterThan(0);
});
