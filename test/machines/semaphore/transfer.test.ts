/**
 * `transfer`: a held slot or a queued place handed from one id to another with occupancy
 * unchanged (1 → 1), which is how a waiting-room reservation becomes its render's slot without
 * a gap another request could take. Unknown sources and taken targets are refused.
 */
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { call } from '../../../src/actors/call.js';
import { type SemaphoreStats, semaphoreMachine } from '../../../src/machines/semaphore.js';

function start(capacity = 1, queueSize = 2) {
  return createActor(semaphoreMachine, { input: { capacity, queueSize } }).start();
}
const stats = (sem: ReturnType<typeof start>) => call<SemaphoreStats>(sem, { type: 'stats' });

describe('semaphore transfer', () => {
  it('moves a held slot: held stays 1 throughout, the new id releases it, the old one no longer can', async () => {
    const sem = start();
    const held: number[] = [];
    sem.on('telemetry', (t: { measurements: { held: number } }) => held.push(t.measurements.held));
    expect(await call(sem, { type: 'request', id: 'room:s1' })).toEqual({ type: 'granted' });
    expect(await call(sem, { type: 'transfer', from: 'room:s1', to: 'render-1' })).toEqual({
      type: 'transferred',
      as: 'holder',
    });
    expect((await stats(sem)).held).toBe(1);
    // a third party cannot slip in
    expect(await call(sem, { type: 'request', id: 'other' })).toEqual({ type: 'queued' });
    await call(sem, { type: 'release', id: 'room:s1' }); // the old id is nobody now
    expect((await stats(sem)).held).toBe(1);
    await call(sem, { type: 'release', id: 'render-1' });
    expect(await stats(sem)).toMatchObject({ held: 1, queued: 0 }); // 'other' was granted
    expect(held.every((h) => h <= 1)).toBe(true);
  });

  it('moves a queued place without losing its position', async () => {
    const sem = start(1, 3);
    await call(sem, { type: 'request', id: 'holder' });
    await call(sem, { type: 'request', id: 'w1' });
    await call(sem, { type: 'request', id: 'w2' });
    expect(await call(sem, { type: 'transfer', from: 'w1', to: 'w1b' })).toEqual({
      type: 'transferred',
      as: 'waiter',
    });
    expect(sem.getSnapshot().context.table.queueOrder()).toEqual(['w1b', 'w2']);
    const granted: string[] = [];
    sem.on('notify', (n: { to: string }) => granted.push(n.to));
    await call(sem, { type: 'release', id: 'holder' });
    expect(granted).toEqual(['w1b']);
  });

  it('refuses an unknown source or a target that already holds or waits', async () => {
    const sem = start(2);
    await call(sem, { type: 'request', id: 'a' });
    await call(sem, { type: 'request', id: 'b' });
    expect(await call(sem, { type: 'transfer', from: 'zz', to: 'c' })).toEqual({ type: 'unknown' });
    expect(await call(sem, { type: 'transfer', from: 'a', to: 'b' })).toEqual({ type: 'unknown' });
    expect((await stats(sem)).held).toBe(2);
  });
});
