// The diagnostics_channel catalogue and the forwarding helper. Proves the channel names are
// the documented contract and are exported as data, that every event the semaphore and the
// probe limiter can emit is catalogued (parity, checked by driving each machine through every
// branch), that forwarding delivers `{ measurements, metadata }` on the right channel, that
// nothing is built when nobody subscribes, and that unsubscribing stops the forwarding.
import diagnosticsChannel from 'node:diagnostics_channel';
import { afterEach, describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { probeLimiterMachine } from '../../src/machines/probeLimiter.js';
import { semaphoreMachine } from '../../src/machines/semaphore.js';
import {
  CHANNELS,
  channel,
  PROBE_LIMITER_CHANNELS,
  PROBE_LIMITER_EVENTS,
  PROBE_LIMITER_PREFIX,
  publish,
  publishTelemetry,
  SEMAPHORE_CHANNELS,
  SEMAPHORE_EVENTS,
  SEMAPHORE_PREFIX,
} from '../../src/telemetry/channels.js';

const cleanups: (() => void)[] = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});

function listen(name: string) {
  const got: unknown[] = [];
  const fn = (message: unknown) => got.push(message);
  diagnosticsChannel.subscribe(name, fn);
  cleanups.push(() => diagnosticsChannel.unsubscribe(name, fn));
  return got;
}

/** Drives a semaphore through every branch; returns the telemetry event names it emitted. */
function everySemaphoreEvent(): Set<string> {
  const sem = createActor(semaphoreMachine, { input: { capacity: 1, queueSize: 1 } }).start();
  const seen = new Set<string>();
  sem.on('telemetry', (t) => seen.add(t.event));
  sem.send({ type: 'request', id: 'h' }); // acquired
  sem.send({ type: 'request', id: 'low', class: 'low' }); // queued
  sem.send({ type: 'request', id: 'hi', class: 'high' }); // displaced + queued
  sem.send({ type: 'request', id: 'x', class: 'high' }); // rejected
  sem.send({ type: 'gone', id: 'hi' }); // abandoned
  sem.send({ type: 'release', id: 'h' }); // released
  sem.send({ type: 'request', id: 'o' }); // acquired
  sem.send({ type: 'request', id: 'w' }); // queued
  sem.send({ type: 'orphaned', id: 'o' }); // preempted: w waits for the orphan's slot
  sem.stop();
  return seen;
}

describe('the catalogue', () => {
  it('names every channel audio_proxy.<source>.<event>, as data', () => {
    expect(SEMAPHORE_CHANNELS).toEqual([
      'audio_proxy.semaphore.acquired',
      'audio_proxy.semaphore.queued',
      'audio_proxy.semaphore.rejected',
      'audio_proxy.semaphore.released',
      'audio_proxy.semaphore.abandoned',
      'audio_proxy.semaphore.displaced',
      'audio_proxy.semaphore.preempted',
    ]);
    expect(PROBE_LIMITER_CHANNELS).toEqual([
      'audio_proxy.probe_limiter.acquired',
      'audio_proxy.probe_limiter.rejected',
      'audio_proxy.probe_limiter.released',
    ]);
    expect(CHANNELS).toEqual(
      expect.arrayContaining([
        'audio_proxy.render.start',
        'audio_proxy.render.stop',
        'audio_proxy.render.exception',
        'audio_proxy.cache.lookup',
        'audio_proxy.variant_store.write_failure',
        ...SEMAPHORE_CHANNELS,
        ...PROBE_LIMITER_CHANNELS,
      ]),
    );
    expect(new Set(CHANNELS).size).toBe(CHANNELS.length);
  });

  it('lists exactly the events the semaphore can emit', () => {
    expect(everySemaphoreEvent()).toEqual(new Set(SEMAPHORE_EVENTS));
  });

  it('lists exactly the events the probe limiter can emit', () => {
    const limiter = createActor(probeLimiterMachine, { input: { capacity: 1 } }).start();
    const seen = new Set<string>();
    limiter.on('telemetry', (t) => seen.add(t.event));
    limiter.send({ type: 'acquire', id: 'a' });
    limiter.send({ type: 'acquire', id: 'b' });
    limiter.send({ type: 'release', id: 'a' });
    limiter.stop();
    expect(seen).toEqual(new Set(PROBE_LIMITER_EVENTS));
  });

  it('refuses an uncatalogued channel name or prefix', () => {
    expect(() => channel('audio_proxy.semaphore.misspelt' as never)).toThrow(TypeError);
    const sem = createActor(semaphoreMachine, { input: { capacity: 1, queueSize: 0 } });
    expect(() => publishTelemetry(sem, 'audio_proxy.nothing' as never)).toThrow(TypeError);
  });
});

describe('publishTelemetry', () => {
  it('forwards { measurements, metadata } to <prefix>.<event>, and stops when told', () => {
    const acquired = listen('audio_proxy.semaphore.acquired');
    const rejected = listen('audio_proxy.semaphore.rejected');
    const sem = createActor(semaphoreMachine, { input: { capacity: 1, queueSize: 0 } }).start();
    const stop = publishTelemetry(sem, SEMAPHORE_PREFIX);
    sem.send({ type: 'request', id: 'a' });
    sem.send({ type: 'request', id: 'b' });
    expect(acquired).toEqual([
      {
        measurements: {
          held: 1,
          queued: 0,
          queued_interactive: 0,
          queued_high: 0,
          queued_normal: 0,
          queued_low: 0,
          wait: 0,
        },
        metadata: { capacity: 1, queueSize: 0, class: 'interactive' },
      },
    ]);
    expect(rejected).toHaveLength(1);
    stop();
    sem.send({ type: 'release', id: 'a' });
    sem.send({ type: 'request', id: 'c' });
    expect(acquired).toHaveLength(1);
    sem.stop();
  });

  it('forwards the probe limiter under its own prefix', () => {
    const acquired = listen('audio_proxy.probe_limiter.acquired');
    const limiter = createActor(probeLimiterMachine, { input: { capacity: 2 } }).start();
    publishTelemetry(limiter, PROBE_LIMITER_PREFIX);
    limiter.send({ type: 'acquire', id: 'a' });
    expect(acquired).toEqual([{ measurements: { held: 1 }, metadata: { capacity: 2 } }]);
    limiter.stop();
  });

  it('publishes nothing, and builds nothing, while a channel has no subscriber', () => {
    const sem = createActor(semaphoreMachine, { input: { capacity: 1, queueSize: 0 } }).start();
    publishTelemetry(sem, SEMAPHORE_PREFIX);
    const target = channel('audio_proxy.semaphore.acquired');
    expect(target.hasSubscribers).toBe(false);
    let published = 0;
    // Counts calls, then defers to whatever `publish` the channel's current prototype has (Node
    // swaps it when the first subscriber arrives).
    target.publish = function (this: typeof target, message: unknown) {
      published++;
      Object.getPrototypeOf(this).publish.call(this, message);
    };
    try {
      sem.send({ type: 'request', id: 'a' });
      expect(published).toBe(0);
      const got = listen('audio_proxy.semaphore.acquired');
      sem.send({ type: 'release', id: 'a' });
      sem.send({ type: 'request', id: 'b' });
      expect(published).toBe(1);
      expect(got).toHaveLength(1);
    } finally {
      delete (target as { publish?: unknown }).publish;
      sem.stop();
    }
  });
});

describe('publish', () => {
  it('calls the message factory only when someone listens', () => {
    let built = 0;
    const make = () => ({ built: ++built });
    publish('audio_proxy.cache.lookup', make);
    expect(built).toBe(0);
    const got = listen('audio_proxy.cache.lookup');
    publish('audio_proxy.cache.lookup', make);
    expect(got).toEqual([{ built: 1 }]);
  });
});
