/**
 * InFlight: callers asking for a key whose operation runs share it; once it settles (either way)
 * the next caller starts a new one; distinct keys never share.
 */
import { describe, expect, it } from 'vitest';
import { InFlight } from '../../src/core/inflight.js';
import { deferred } from '../machines/processSupervisor/fixtures.js';

describe('InFlight', () => {
  it('shares one running operation per key and forgets it when it settles', async () => {
    const flight = new InFlight<string, number>();
    let started = 0;
    const d = deferred<number>();
    const op = () => {
      started++;
      return d.promise;
    };
    const a = flight.run('k', op);
    const b = flight.run('k', op);
    expect(a).toBe(b);
    expect(started).toBe(1);
    expect(flight.size).toBe(1);
    d.resolve(7);
    expect(await a).toBe(7);
    expect(flight.size).toBe(0);
    const again = deferred<number>();
    const c = flight.run('k', () => {
      started++;
      return again.promise;
    });
    expect(c).not.toBe(a);
    expect(started).toBe(2);
    again.resolve(8);
    expect(await c).toBe(8);
  });

  it('shares a failure with every joiner, then starts afresh', async () => {
    const flight = new InFlight<string, number>();
    const d = deferred<number>();
    const a = flight.run('k', () => d.promise);
    const b = flight.run('k', () => Promise.resolve(1));
    d.reject(new Error('boom'));
    await expect(a).rejects.toThrow('boom');
    await expect(b).rejects.toThrow('boom');
    expect(await flight.run('k', () => Promise.resolve(2))).toBe(2);
  });

  it('never shares between keys', async () => {
    const flight = new InFlight<string, string>();
    const a = flight.run('a', async () => 'A');
    const b = flight.run('b', async () => 'B');
    expect(await a).toBe('A');
    expect(await b).toBe('B');
  });
});
