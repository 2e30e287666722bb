/**
 * The readiness latch: trips at the threshold, recovers at half of it (rounded down), threshold 0
 * disables it and clears a tripped latch. The sequence is the original's pinned one.
 */
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { call } from '../../../src/actors/call.js';
import { type ReadinessReply, readinessMachine } from '../../../src/machines/readiness.js';

async function sequence(threshold: number, depths: number[]): Promise<boolean[]> {
  const actor = createActor(readinessMachine).start();
  const out: boolean[] = [];
  for (const queued of depths) {
    const r = await call<ReadinessReply>(actor, { type: 'check', queued, threshold });
    expect(r.queued).toBe(queued);
    expect(r.threshold).toBe(threshold);
    out.push(r.ready);
  }
  return out;
}

describe('readiness latch', () => {
  it('threshold 4: 3 ready, 4 tripped, 3 still tripped, 2 ready, 3 ready, 4 tripped', async () => {
    expect(await sequence(4, [3, 4, 3, 2, 3, 4])).toEqual([true, false, false, true, true, false]);
  });

  it('threshold 1 recovers only at an empty queue', async () => {
    expect(await sequence(1, [0, 1, 1, 0, 1])).toEqual([true, false, false, true, false]);
  });

  it('threshold 0 is always ready and clears a tripped latch', async () => {
    const actor = createActor(readinessMachine).start();
    await call(actor, { type: 'check', queued: 5, threshold: 2 });
    expect(actor.getSnapshot().value).toBe('tripped');
    const r = await call<ReadinessReply>(actor, { type: 'check', queued: 5, threshold: 0 });
    expect(r.ready).toBe(true);
    expect(actor.getSnapshot().value).toBe('ready');
    expect(await sequence(0, [0, 100])).toEqual([true, true]);
  });
});
