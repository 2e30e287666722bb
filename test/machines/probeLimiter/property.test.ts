// Random interleavings of probe acquires and exits (release, death via `gone`, double release)
// against a cap of 4, checked against a plain counting model: every answer matches, held never
// exceeds 4 (telemetry covers every intermediate event), and once every holder has exited the
// limiter is back at 0. A witness proves the cap was actually reached and refusals happened.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import {
  type ProbeLimiterTelemetry,
  probeLimiterMachine,
} from '../../../src/machines/probeLimiter.js';
import { acquireProbeSlot, probeStats, release } from '../../../src/services/semaphoreClient.js';

const CAP = 4;
const PROBES = 8;

type Step = { op: 'acquire' | 'release' | 'gone'; k: number };

describe('probe limiter under random exits', () => {
  it('matches a counting model, never exceeds 4 of 4, and ends at 0', async () => {
    const witness = { runs: 0, full: 0, refused: 0 };
    const script = fc.array(
      fc.record({
        op: fc.constantFrom<Step['op']>('acquire', 'acquire', 'release', 'gone'),
        k: fc.integer({ min: 0, max: PROBES - 1 }),
      }),
      { minLength: 1, maxLength: 60, size: 'max' },
    );
    await fc.assert(
      fc.asyncProperty(script, async (steps) => {
        const limiter = createActor(probeLimiterMachine, { input: { capacity: CAP } }).start();
        const events: ProbeLimiterTelemetry[] = [];
        limiter.on('telemetry', (t) => events.push(t as ProbeLimiterTelemetry));
        const held = new Set<number>();
        let full = false;
        let refused = false;
        for (const { op, k } of steps) {
          const id = `probe${k}`;
          if (op === 'acquire') {
            const expected = held.has(k)
              ? 'already_held'
              : held.size < CAP
                ? 'granted'
                : 'queue_full';
            const answer = await acquireProbeSlot(limiter, id);
            expect(answer.type).toBe(expected);
            if (answer.type === 'queue_full') {
              expect(answer.retryAfterS).toBe(1);
              refused = true;
            }
            if (expected === 'granted') held.add(k);
          } else if (op === 'release') {
            expect(await release(limiter, id)).toEqual({ type: 'ok' });
            held.delete(k);
          } else {
            limiter.send({ type: 'gone', id });
            held.delete(k);
          }
          if (held.size === CAP) full = true;
          expect((await probeStats(limiter)).held).toBe(held.size);
        }
        for (const k of held) await release(limiter, `probe${k}`);
        expect(await probeStats(limiter)).toEqual({ held: 0, capacity: CAP });
        expect(Math.max(0, ...events.map((e) => e.measurements.held))).toBeLessThanOrEqual(CAP);
        limiter.stop();
        witness.runs++;
        if (full) witness.full++;
        if (refused) witness.refused++;
      }),
      { numRuns: 150 },
    );
    expect(witness.full / witness.runs).toBeGreaterThan(0.2);
    expect(witness.refused).toBeGreaterThan(0);
  });
});
