// The semaphore client helpers against real actors, with fake timers. Proves: unknown classes
// throw before anything is sent; `acquire` closes the grant-after-timeout race (a test forces
// the grant into the window between the timeout and the release: the slot is freed and no
// message is left over); abort behaves like a timeout but rejects; a grant that lands before
// the caller resumes is not lost; `release`/`retryAfter`/`stats` degrade as specified when the
// semaphore is stopped or wedged; the probe-limiter helpers.

import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createActor, setup } from 'xstate';
import { CallError, inbox, pendingCalls } from '../../src/actors/call.js';
import { probeLimiterMachine } from '../../src/machines/probeLimiter.js';
import { type SemaphoreTelemetry, semaphoreMachine } from '../../src/machines/semaphore.js';
import {
  ADMISSION_CLASSES,
  acquire,
  acquireProbeSlot,
  admissionClass,
  probeStats,
  RELEASE_TIMEOUT_MS,
  release,
  request,
  retryAfter,
  stats,
} from '../../src/services/semaphoreClient.js';

function start(capacity = 1, queueSize = 2) {
  const sem = createActor(semaphoreMachine, {
    input: { capacity, queueSize, now: () => Date.now() },
  }).start();
  const telemetry: SemaphoreTelemetry[] = [];
  sem.on('telemetry', (t) => telemetry.push(t as SemaphoreTelemetry));
  return { sem, telemetry };
}

/** A real actor that takes every event and never answers: a semaphore that is wedged. */
function wedged() {
  const received: { type: string }[] = [];
  const actor = createActor(
    setup({ actions: { keep: ({ event }) => void received.push(event) } }).createMachine({
      on: { '*': { actions: 'keep' } },
    }),
  ).start();
  return { actor, received };
}

beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(0);
});

afterEach(() => {
  vi.useRealTimers();
});

describe('admission classes at the boundary', () => {
  it('lists the classes highest first', () => {
    expect(ADMISSION_CLASSES).toEqual(['interactive', 'high', 'normal', 'low']);
  });

  it('throws TypeError for an unknown class, naming the allowed ones, before sending', () => {
    const { actor, received } = wedged();
    for (const bad of ['urgent', '', 3, null]) {
      expect(() => request(actor, 'a', { class: bad as never })).toThrow(
        /unknown admission class.*interactive, high, normal, low/,
      );
      expect(() => acquire(actor, 'a', { class: bad as never })).toThrow(TypeError);
    }
    expect(received).toEqual([]);
    expect(admissionClass(undefined)).toBeUndefined();
    expect(admissionClass('low')).toBe('low');
  });

  it('rejects a negative or NaN timeout with RangeError', () => {
    const { sem } = start();
    expect(() => acquire(sem, 'a', { timeout: -1 })).toThrow(RangeError);
    expect(() => acquire(sem, 'a', { timeout: Number.NaN })).toThrow(RangeError);
  });
});

describe('acquire', () => {
  it('answers granted at once when a slot is free, and queue_full when there is no room', async () => {
    const { sem } = start(1, 0);
    expect(await acquire(sem, 'a')).toEqual({ type: 'granted' });
    expect(await acquire(sem, 'b')).toEqual({ type: 'queue_full', retryAfterS: 2 });
  });

  it('waits when queued and answers granted when the holder releases', async () => {
    const { sem } = start();
    await acquire(sem, 'a');
    const waiting = acquire(sem, 'b');
    await vi.advanceTimersByTimeAsync(1_000);
    await release(sem, 'a');
    expect(await waiting).toEqual({ type: 'granted' });
    expect((await stats(sem)).held).toBe(1);
  });

  it('keeps a grant that lands before the caller has even seen `queued`', async () => {
    const { sem } = start();
    sem.send({ type: 'request', id: 'holder' });
    const waiting = acquire(sem, 'w');
    // Still synchronous: the request was handled, its `queued` reply not yet read by acquire.
    sem.send({ type: 'release', id: 'holder' });
    expect(await waiting).toEqual({ type: 'granted' });
  });

  it('times out: releases its place, answers timeout, leaves nothing queued', async () => {
    const { sem, telemetry } = start();
    await acquire(sem, 'a');
    const waiting = acquire(sem, 'b', { timeout: 100 });
    await vi.advanceTimersByTimeAsync(100);
    expect(await waiting).toEqual({ type: 'timeout' });
    expect(telemetry.at(-1)).toMatchObject({ event: 'abandoned', measurements: { queued: 0 } });
    expect(await stats(sem)).toMatchObject({ held: 1, queued: 0 });
  });

  /**
   * Forces the grant into the window: the waiter gives up while the semaphore is in the middle
   * of the step that grants it. The give-up's release is then queued behind that step, so the
   * grant is delivered after the waiter stopped waiting. `trigger` runs from a telemetry
   * listener on the holder's `released`, which the step emits before its `notify` to w.
   */
  async function grantInsideGiveUp(
    trigger: () => void,
    options: { timeout?: number; signal?: AbortSignal },
  ) {
    const { sem, telemetry } = start();
    await acquire(sem, 'holder');
    const waiting = acquire(sem, 'w', options);
    await vi.advanceTimersByTimeAsync(0);
    let fired = false;
    sem.on('telemetry', (t) => {
      if (t.event === 'released' && !fired) {
        fired = true;
        trigger();
      }
    });
    await release(sem, 'holder');
    const settled = await waiting.then(
      (outcome) => outcome,
      (error: CallError) => error.code,
    );
    return { sem, telemetry, settled };
  }

  async function expectNothingLeftFor(
    sem: Parameters<typeof stats>[0],
    telemetry: SemaphoreTelemetry[],
  ) {
    // The grant really landed in the window: w acquired, then its give-up released it.
    expect(
      telemetry.map((t) => `${t.event}:${t.measurements.held}/${t.measurements.queued}`),
    ).toEqual([
      'acquired:1/0', // holder
      'queued:1/1', // w
      'released:0/1', // holder; w gives up right here
      'acquired:1/0', // w, granted by the same step
      'released:0/0', // w, released by its own give-up
    ]);
    expect(await stats(sem)).toMatchObject({ held: 0, queued: 0 });
    // No stray message: a new listener for w hears nothing, and w can acquire afresh.
    const stray: unknown[] = [];
    const stop = inbox(sem, 'w', (m) => stray.push(m));
    await vi.runAllTimersAsync();
    expect(stray).toEqual([]);
    stop();
    expect(await acquire(sem, 'w')).toEqual({ type: 'granted' });
  }

  it('closes the grant-after-timeout race: a grant forced into the window is released, no message leaks', async () => {
    const { sem, telemetry, settled } = await grantInsideGiveUp(() => vi.advanceTimersByTime(100), {
      timeout: 100,
    });
    expect(settled).toEqual({ type: 'timeout' });
    await expectNothingLeftFor(sem, telemetry);
  });

  it('closes the same race for an abort: rejected, slot released, no message leaks', async () => {
    const controller = new AbortController();
    const { sem, telemetry, settled } = await grantInsideGiveUp(() => controller.abort(), {
      signal: controller.signal,
    });
    expect(settled).toBe('ERR_CALL_ABORTED');
    await expectNothingLeftFor(sem, telemetry);
  });

  it('aborted while queued: releases its place and rejects with ERR_CALL_ABORTED', async () => {
    const { sem } = start();
    await acquire(sem, 'a');
    const controller = new AbortController();
    const waiting = acquire(sem, 'b', { signal: controller.signal });
    await vi.advanceTimersByTimeAsync(0);
    controller.abort(new Error('client went away'));
    await expect(waiting).rejects.toMatchObject({ code: 'ERR_CALL_ABORTED' });
    expect(await stats(sem)).toMatchObject({ held: 1, queued: 0 });
  });

  it('an already-aborted signal rejects without sending anything', async () => {
    const { actor, received } = wedged();
    const controller = new AbortController();
    controller.abort();
    await expect(acquire(actor, 'a', { signal: controller.signal })).rejects.toBeInstanceOf(
      CallError,
    );
    expect(received).toEqual([]);
  });

  it('a second acquire for an id still waiting answers already_held and leaves the first intact', async () => {
    const { sem } = start();
    await acquire(sem, 'a');
    const first = acquire(sem, 'b');
    expect(await acquire(sem, 'b')).toEqual({ type: 'already_held' });
    await release(sem, 'a');
    expect(await first).toEqual({ type: 'granted' });
  });

  it('a request the semaphore never answers rejects with the call timeout and leaves a release behind', async () => {
    const { actor, received } = wedged();
    const waiting = acquire(actor, 'a');
    const settled = expect(waiting).rejects.toMatchObject({ code: 'ERR_CALL_TIMEOUT' });
    await vi.advanceTimersByTimeAsync(5_000);
    await settled;
    expect(received.map((e) => e.type)).toEqual(['request', 'release']);
    expect(pendingCalls(actor)).toBe(0);
  });
});

describe('release, retryAfter, stats', () => {
  it('release answers ok when the semaphore is stopped', async () => {
    const { sem } = start();
    await acquire(sem, 'a');
    sem.stop();
    expect(await release(sem, 'a')).toEqual({ type: 'ok' });
  });

  it(`release answers ok after ${RELEASE_TIMEOUT_MS} ms when the semaphore does not answer`, async () => {
    const { actor } = wedged();
    const releasing = release(actor, 'a');
    await vi.advanceTimersByTimeAsync(RELEASE_TIMEOUT_MS - 1);
    expect(pendingCalls(actor)).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(await releasing).toEqual({ type: 'ok' });
  });

  it('retryAfter answers 1 when the semaphore is wedged or stopped', async () => {
    const { actor } = wedged();
    const asking = retryAfter(actor);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(await asking).toBe(1);
    actor.stop();
    expect(await retryAfter(actor)).toBe(1);
  });

  it('stats rejects after the caller-supplied timeout', async () => {
    const { actor } = wedged();
    const asking = stats(actor, 1_000);
    const settled = expect(asking).rejects.toMatchObject({ code: 'ERR_CALL_TIMEOUT' });
    await vi.advanceTimersByTimeAsync(1_000);
    await settled;
  });
});

describe('probe limiter helpers', () => {
  it('acquireProbeSlot grants up to the cap then refuses with Retry-After 1; release frees', async () => {
    const limiter = createActor(probeLimiterMachine, { input: { capacity: 1 } }).start();
    expect(await acquireProbeSlot(limiter, 'p1')).toEqual({ type: 'granted' });
    expect(await acquireProbeSlot(limiter, 'p2')).toEqual({ type: 'queue_full', retryAfterS: 1 });
    expect(await probeStats(limiter)).toEqual({ held: 1, capacity: 1 });
    expect(await release(limiter, 'p1')).toEqual({ type: 'ok' });
    expect(await acquireProbeSlot(limiter, 'p2')).toEqual({ type: 'granted' });
    limiter.stop();
    expect(await release(limiter, 'p2')).toEqual({ type: 'ok' });
  });
});
