// Responses in flight: counted from `track` to their close event; `drain` resolves when the last
// one closes, or at its bound, and at once when none is open or the bound is 0.
import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ResponsesInFlight } from '../../src/proxy/inFlight.js';

const response = () => new EventEmitter() as unknown as ServerResponse;

afterEach(() => {
  vi.useRealTimers();
});

describe('ResponsesInFlight', () => {
  it('counts a response until it closes', () => {
    const inFlight = new ResponsesInFlight();
    const a = response();
    const b = response();
    inFlight.track(a);
    inFlight.track(b);
    expect(inFlight.size).toBe(2);
    a.emit('close');
    expect(inFlight.size).toBe(1);
  });

  it('drains when the last one closes, before the bound', async () => {
    vi.useFakeTimers();
    const inFlight = new ResponsesInFlight();
    const a = response();
    inFlight.track(a);
    let drained = false;
    const drain = inFlight.drain(10_000).then(() => {
      drained = true;
    });
    await vi.advanceTimersByTimeAsync(5_000);
    expect(drained).toBe(false);
    a.emit('close');
    await drain;
    expect(drained).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('stops waiting at the bound', async () => {
    vi.useFakeTimers();
    const inFlight = new ResponsesInFlight();
    inFlight.track(response());
    let drained = false;
    void inFlight.drain(1_000).then(() => {
      drained = true;
    });
    await vi.advanceTimersByTimeAsync(999);
    expect(drained).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(drained).toBe(true);
  });

  it('resolves at once with nothing open, or a bound of 0', async () => {
    const inFlight = new ResponsesInFlight();
    await inFlight.drain(60_000);
    inFlight.track(response());
    await inFlight.drain(0);
    expect(inFlight.size).toBe(1);
  });
});
