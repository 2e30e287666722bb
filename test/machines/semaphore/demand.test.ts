// Telemetry on demand: a semaphore whose `telemetry` input says no builds and emits no telemetry
// event yet grants, queues and releases exactly as before; `wantedOn` answers from the
// diagnostics channels, so subscribing to one event's channel turns on that event alone.
import diagnostics from 'node:diagnostics_channel';
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { call } from '../../../src/actors/call.js';
import { semaphoreMachine } from '../../../src/machines/semaphore.js';
import { SEMAPHORE_PREFIX, wantedOn } from '../../../src/telemetry/channels.js';

function semaphore(telemetry: (event: string) => boolean) {
  const sem = createActor(semaphoreMachine, {
    input: { capacity: 1, queueSize: 2, telemetry },
  }).start();
  const seen: string[] = [];
  sem.on('telemetry', (t) => seen.push(t.event));
  return { sem, seen };
}

describe('semaphore telemetry on demand', () => {
  it('emits nothing when nobody wants it, and behaves the same', async () => {
    const { sem, seen } = semaphore(() => false);
    expect(await call(sem, { type: 'request', id: 'a' })).toEqual({ type: 'granted' });
    expect(await call(sem, { type: 'request', id: 'b' })).toEqual({ type: 'queued' });
    expect(await call(sem, { type: 'release', id: 'a' })).toEqual({ type: 'ok' });
    expect(sem.getSnapshot().context.table.holders.has('b')).toBe(true);
    expect(seen).toEqual([]);
  });

  it('wantedOn follows the subscribers of each event channel', async () => {
    const wants = wantedOn(SEMAPHORE_PREFIX);
    expect(wants('acquired')).toBe(false);
    const { sem, seen } = semaphore(wants);
    const listener = () => {};
    diagnostics.subscribe(`${SEMAPHORE_PREFIX}.acquired`, listener);
    try {
      expect(wants('acquired')).toBe(true);
      expect(wants('released')).toBe(false);
      await call(sem, { type: 'request', id: 'a' });
      await call(sem, { type: 'release', id: 'a' });
      expect(seen).toEqual(['acquired']);
    } finally {
      diagnostics.unsubscribe(`${SEMAPHORE_PREFIX}.acquired`, listener);
    }
    expect(wants('acquired')).toBe(false);
    expect(() => wantedOn('nope' as typeof SEMAPHORE_PREFIX)).toThrow(TypeError);
  });
});
