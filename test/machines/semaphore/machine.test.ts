// The semaphore as a running actor, driven through the real client (`request`, `acquire`,
// `release`, `stats`, `retryAfter` over `call()` and `inbox()`), with fake timers and an
// injected clock: nothing sleeps. Covers the black-box semaphore behaviours one by one (grant,
// queue, refuse, FIFO, already_held, timeouts racing releases, holders and waiters going away,
// no tombstones, idempotent release, Retry-After, the telemetry sequence on
// diagnostics_channel, classes and displacement, mixed exits under load).
import diagnosticsChannel from 'node:diagnostics_channel';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { type Actor, createActor } from 'xstate';
import { inbox } from '../../../src/actors/call.js';
import {
  type SemaphoreInput,
  type SemaphoreTelemetry,
  semaphoreMachine,
  type WaiterMessage,
} from '../../../src/machines/semaphore.js';
import {
  type AcquireOutcome,
  acquire,
  release,
  request,
  retryAfter,
  stats,
} from '../../../src/services/semaphoreClient.js';
import {
  publishTelemetry,
  SEMAPHORE_CHANNELS,
  SEMAPHORE_PREFIX,
} from '../../../src/telemetry/channels.js';

type Sem = Actor<typeof semaphoreMachine>;

let running: Sem[] = [];

function start(input: Partial<SemaphoreInput> = {}) {
  const sem = createActor(semaphoreMachine, {
    input: { capacity: 1, queueSize: 2, now: () => Date.now(), ...input },
  }).start();
  running.push(sem);
  const telemetry: SemaphoreTelemetry[] = [];
  sem.on('telemetry', (event) => telemetry.push(event as SemaphoreTelemetry));
  const messages: Record<string, WaiterMessage[]> = {};
  const listen = (id: string) =>
    inbox<WaiterMessage>(sem, id, (m) => (messages[id] ??= []).push(m));
  return { sem, telemetry, messages, listen };
}

/** Every entry the table holds for waiters, counted three independent ways. */
function waiterEntries(sem: Sem): { map: number; fifo: number; depths: number } {
  const table = sem.getSnapshot().context.table;
  return {
    map: table.waiters.size,
    fifo: table.queueOrder().length,
    depths: table.depths.reduce((a, b) => a + b, 0),
  };
}

const occupancy = async (sem: Sem) => {
  const { held, queued } = await stats(sem);
  return { held, queued };
};

beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(0);
});

afterEach(() => {
  for (const sem of running) sem.stop();
  running = [];
  vi.useRealTimers();
});

describe('grant, queue, refuse', () => {
  it('capacity 2, queue 2: granted, granted, queued; stats read 2/1 against 2/2', async () => {
    const { sem } = start({ capacity: 2, queueSize: 2 });
    expect((await request(sem, 'a')).type).toBe('granted');
    expect((await request(sem, 'b')).type).toBe('granted');
    expect((await request(sem, 'c')).type).toBe('queued');
    expect(await stats(sem)).toEqual({
      held: 2,
      queued: 1,
      capacity: 2,
      queueSize: 2,
      queuedByClass: { interactive: 1, high: 0, normal: 0, low: 0 },
    });
  });

  it('capacity 1, queue 1: the third request is queue_full with an integer Retry-After >= 1', async () => {
    const { sem } = start({ capacity: 1, queueSize: 1 });
    await request(sem, 'a');
    await request(sem, 'b');
    const third = await request(sem, 'c');
    expect(third.type).toBe('queue_full');
    const { retryAfterS } = third as { retryAfterS: number };
    expect(Number.isInteger(retryAfterS) && retryAfterS >= 1).toBe(true);
    expect(await occupancy(sem)).toEqual({ held: 1, queued: 1 });
  });

  it('queue size 0: a second request while the slot is held is refused at once', async () => {
    const { sem } = start({ capacity: 1, queueSize: 0 });
    await request(sem, 'a');
    expect((await request(sem, 'b')).type).toBe('queue_full');
    expect(await occupancy(sem)).toEqual({ held: 1, queued: 0 });
  });

  it('releases grant waiters in arrival order, one per release, down to 0/0', async () => {
    const { sem, messages, listen } = start({ capacity: 1, queueSize: 3 });
    await request(sem, 'a');
    for (const id of ['b', 'c', 'd']) {
      listen(id);
      await request(sem, id);
    }
    const order: string[] = [];
    let holder = 'a';
    for (let i = 0; i < 3; i++) {
      await release(sem, holder);
      const granted = ['b', 'c', 'd'].filter((id) => messages[id]?.length && !order.includes(id));
      expect(granted).toHaveLength(1);
      order.push(granted[0]!);
      holder = granted[0]!;
    }
    expect(order).toEqual(['b', 'c', 'd']);
    await release(sem, holder);
    expect(await occupancy(sem)).toEqual({ held: 0, queued: 0 });
  });

  it('a holder asking again gets already_held, and held stays 1', async () => {
    const { sem } = start();
    await request(sem, 'a');
    expect(await request(sem, 'a')).toEqual({ type: 'already_held' });
    expect(await acquire(sem, 'a')).toEqual({ type: 'already_held' });
    expect(await occupancy(sem)).toEqual({ held: 1, queued: 0 });
  });

  it('an unknown class throws in the caller and leaves the state unchanged', async () => {
    const { sem, telemetry } = start();
    await request(sem, 'a');
    const before = telemetry.length;
    expect(() => request(sem, 'b', { class: 'urgent' as never })).toThrow(TypeError);
    expect(() => acquire(sem, 'b', { class: 'urgent' as never })).toThrow(TypeError);
    expect(telemetry.length).toBe(before);
    expect(await occupancy(sem)).toEqual({ held: 1, queued: 0 });
  });
});

describe('timeouts racing releases', () => {
  it('acquire(timeout 1 ms) racing a release, 25 times: ok or timeout, no stray grant, ends 0/0', async () => {
    const { sem, telemetry } = start({ capacity: 1, queueSize: 1 });
    const outcomes = new Set<string>();
    for (let i = 0; i < 25; i++) {
      await request(sem, 'holder');
      const waiting = acquire(sem, 'waiter', { timeout: 1 });
      // The holder lets go at 0, 1 or 2 ms: before, exactly at, or after the waiter's deadline.
      setTimeout(() => void release(sem, 'holder'), i % 3);
      await vi.advanceTimersByTimeAsync(3);
      const outcome = await waiting;
      outcomes.add(outcome.type);
      expect(['granted', 'timeout']).toContain(outcome.type);
      if (outcome.type === 'granted') await release(sem, 'waiter');
      expect(await occupancy(sem)).toEqual({ held: 0, queued: 0 });
    }
    // No stray grant: a fresh listener for the waiter id hears nothing after all that.
    const stray: WaiterMessage[] = [];
    inbox<WaiterMessage>(sem, 'waiter', (m) => stray.push(m));
    await vi.runAllTimersAsync();
    expect(stray).toEqual([]);
    // Every grant the waiter ever got was given back.
    const about = (event: string) => telemetry.filter((t) => t.event === event).length;
    expect(about('acquired')).toBe(about('released'));
    expect(outcomes).toEqual(new Set(['granted', 'timeout']));
  });
});

describe('holders and waiters going away', () => {
  it('a holder that goes away hands its slot to the next waiter', async () => {
    const { sem, messages, listen } = start();
    await request(sem, 'a');
    listen('b');
    await request(sem, 'b');
    sem.send({ type: 'gone', id: 'a', reason: 'crashed' });
    expect(messages.b).toEqual([{ type: 'granted' }]);
    expect(await occupancy(sem)).toEqual({ held: 1, queued: 0 });
  });

  it('a waiter that goes away is dropped at once and never granted; the survivor is', async () => {
    const { sem, messages, listen, telemetry } = start();
    await request(sem, 'a');
    listen('dead');
    listen('survivor');
    await request(sem, 'dead');
    await request(sem, 'survivor');
    sem.send({ type: 'gone', id: 'dead' });
    expect(telemetry.at(-1)).toMatchObject({
      event: 'abandoned',
      measurements: { held: 1, queued: 1 },
    });
    expect(await occupancy(sem)).toEqual({ held: 1, queued: 1 });
    await release(sem, 'a');
    expect(messages.survivor).toEqual([{ type: 'granted' }]);
    expect(messages.dead).toBeUndefined();
  });

  it('a waiter dying emits abandoned with held 1, queued 0', async () => {
    const { sem, telemetry } = start();
    await request(sem, 'a');
    await request(sem, 'b');
    sem.send({ type: 'gone', id: 'b' });
    expect(telemetry.at(-1)).toMatchObject({
      event: 'abandoned',
      measurements: { held: 1, queued: 0 },
    });
  });

  it.each([50, 200])(
    '%i waiters abandoned one at a time while the slot stays held leave 0 entries',
    async (n) => {
      const { sem } = start({ capacity: 1, queueSize: n });
      await request(sem, 'holder');
      for (let i = 0; i < n; i++) await request(sem, `w${i}`);
      expect(waiterEntries(sem)).toEqual({ map: n, fifo: n, depths: n });
      // Alternate ends and the middle so every unlink case (head, tail, inner) is exercised.
      const ids = Array.from({ length: n }, (_, i) => `w${i}`);
      let k = 0;
      while (ids.length) {
        const at = k++ % 3 === 0 ? 0 : k % 3 === 1 ? ids.length - 1 : ids.length >> 1;
        const [id] = ids.splice(at, 1);
        if (k % 2) sem.send({ type: 'gone', id: id! });
        else await release(sem, id!);
      }
      expect(waiterEntries(sem)).toEqual({ map: 0, fifo: 0, depths: 0 });
      expect(await occupancy(sem)).toEqual({ held: 1, queued: 0 });
    },
  );

  it('release without holding, twice, and into a stopped semaphore are all ok', async () => {
    const { sem } = start();
    expect(await release(sem, 'never')).toEqual({ type: 'ok' });
    await request(sem, 'a');
    expect(await release(sem, 'a')).toEqual({ type: 'ok' });
    expect(await release(sem, 'a')).toEqual({ type: 'ok' });
    sem.stop();
    expect(await release(sem, 'a')).toEqual({ type: 'ok' });
  });
});

describe('Retry-After', () => {
  it('is >= 1 before any release, and larger with 4 waiters ahead than with none', async () => {
    const { sem } = start({ capacity: 1, queueSize: 8 });
    await request(sem, 'a');
    const idle = await retryAfter(sem);
    expect(idle).toBeGreaterThanOrEqual(1);
    for (const id of ['b', 'c', 'd', 'e']) await request(sem, id);
    expect(await retryAfter(sem)).toBeGreaterThan(idle);
  });

  it('answers 1 when the semaphore is unreachable', async () => {
    const { sem } = start();
    sem.stop();
    expect(await retryAfter(sem)).toBe(1);
  });
});

describe('telemetry on diagnostics_channel', () => {
  it('hold, queue, reject, release: the published sequence with counts after each event', async () => {
    const seen: { channel: string; message: any }[] = [];
    const listeners = SEMAPHORE_CHANNELS.map((name) => {
      const fn = (message: unknown) => seen.push({ channel: name, message });
      diagnosticsChannel.subscribe(name, fn);
      return () => diagnosticsChannel.unsubscribe(name, fn);
    });
    try {
      const { sem } = start({ capacity: 1, queueSize: 1 });
      publishTelemetry(sem, SEMAPHORE_PREFIX);
      await request(sem, 'a');
      await request(sem, 'b');
      const refused = (await request(sem, 'c')) as { retryAfterS: number };
      vi.advanceTimersByTime(40);
      await release(sem, 'a');
      const meta = { capacity: 1, queueSize: 1, class: 'interactive' };
      expect(seen.map((s) => s.channel)).toEqual([
        'audio_proxy.semaphore.acquired',
        'audio_proxy.semaphore.queued',
        'audio_proxy.semaphore.rejected',
        'audio_proxy.semaphore.released',
        'audio_proxy.semaphore.acquired',
      ]);
      const [acq, queued, rejected, released, granted] = seen.map((s) => s.message);
      expect(acq).toEqual({
        measurements: expect.objectContaining({ held: 1, queued: 0, wait: 0 }),
        metadata: meta,
      });
      expect(queued.measurements).toMatchObject({ held: 1, queued: 1 });
      expect(rejected.measurements.retry_after).toBe(refused.retryAfterS);
      expect(released.measurements).toMatchObject({ held: 0, queued: 1, duration: 40 });
      expect(granted.measurements).toMatchObject({ held: 1, queued: 0, wait: 40 });
      for (const { message } of seen) {
        expect(Object.keys(message.measurements)).toEqual(
          expect.arrayContaining([
            'queued_interactive',
            'queued_high',
            'queued_normal',
            'queued_low',
          ]),
        );
      }
    } finally {
      for (const off of listeners) off();
    }
  });
});

describe('admission classes', () => {
  it('waiters queued low, normal, high, interactive are granted interactive, high, normal, low', async () => {
    const { sem, telemetry } = start({ capacity: 1, queueSize: 8 });
    await request(sem, 'holder');
    await request(sem, 'low', { class: 'low' });
    await request(sem, 'normal', { class: 'normal' });
    await request(sem, 'high', { class: 'high' });
    await request(sem, 'interactive', { class: 'interactive' });
    await request(sem, 'plain'); // no class: interactive, behind the earlier interactive
    await request(sem, 'high2', { class: 'high' }); // a later high does not pass the plain one
    const grants: string[] = [];
    sem.on('notify', (n) => grants.push(n.to));
    let holder = 'holder';
    for (let i = 0; i < 6; i++) {
      await release(sem, holder);
      holder = grants.at(-1)!;
    }
    expect(grants).toEqual(['interactive', 'plain', 'high', 'high2', 'normal', 'low']);
    expect(telemetry.filter((t) => t.event === 'acquired').map((t) => t.metadata.class)).toEqual([
      'interactive',
      'interactive',
      'interactive',
      'high',
      'high',
      'normal',
      'low',
    ]);
  });

  it('a full queue [low1, low2, normal]: a high arrival displaces low2, and the queue stays at 3', async () => {
    const { sem, messages, listen, telemetry } = start({ capacity: 1, queueSize: 3 });
    await request(sem, 'holder');
    for (const [id, cls] of [
      ['low1', 'low'],
      ['low2', 'low'],
      ['normal', 'normal'],
    ] as const) {
      listen(id);
      await request(sem, id, { class: cls });
    }
    expect(await request(sem, 'high', { class: 'high' })).toEqual({ type: 'queued' });
    expect(messages.low2).toEqual([{ type: 'displaced', retryAfterS: expect.any(Number) }]);
    expect((messages.low2![0] as { retryAfterS: number }).retryAfterS).toBeGreaterThanOrEqual(1);
    expect(messages.low1).toBeUndefined();
    expect(await occupancy(sem)).toEqual({ held: 1, queued: 3 });
    const displaced = telemetry.find((t) => t.event === 'displaced')!;
    expect(displaced.metadata.class).toBe('low');
    expect(displaced.measurements).toMatchObject({
      queued: 2,
      queued_low: 1,
      queued_normal: 1,
      queued_high: 0,
    });
  });

  it.each([
    ['high', 'normal'],
    ['low', 'low'],
    ['interactive', 'high'],
    ['interactive', 'interactive'],
  ] as const)(
    'a queue full of %s refuses a %s arrival and displaces nothing',
    async (queued, arrival) => {
      const { sem, messages, listen } = start({ capacity: 1, queueSize: 2 });
      await request(sem, 'holder');
      for (const id of ['w1', 'w2']) {
        listen(id);
        await request(sem, id, { class: queued });
      }
      expect((await request(sem, 'x', { class: arrival })).type).toBe('queue_full');
      expect(messages).toEqual({});
    },
  );

  it('a displaced acquire answers displaced (not queue_full), and its later gone changes nothing', async () => {
    const { sem } = start({ capacity: 1, queueSize: 1 });
    await request(sem, 'holder');
    const waiting = acquire(sem, 'batch', { class: 'low' });
    await Promise.resolve();
    expect(await request(sem, 'listener')).toEqual({ type: 'queued' });
    const outcome: AcquireOutcome = await waiting;
    expect(outcome).toEqual({ type: 'displaced', retryAfterS: expect.any(Number) });
    sem.send({ type: 'gone', id: 'batch' });
    expect(await occupancy(sem)).toEqual({ held: 1, queued: 1 });
    expect(sem.getSnapshot().context.table.queueOrder()).toEqual(['listener']);
  });

  it('a killed low holder grants the queued high, not the older low', async () => {
    const { sem, messages, listen } = start({ capacity: 1, queueSize: 4 });
    await request(sem, 'lowHolder', { class: 'low' });
    listen('low1');
    listen('high1');
    await request(sem, 'low1', { class: 'low' });
    await request(sem, 'high1', { class: 'high' });
    sem.send({ type: 'gone', id: 'lowHolder' });
    expect(messages.high1).toEqual([{ type: 'granted' }]);
    expect(messages.low1).toBeUndefined();
  });

  it('every event carries all four per-class depths', async () => {
    const { sem, telemetry } = start({ capacity: 1, queueSize: 2 });
    await request(sem, 'h');
    await request(sem, 'a', { class: 'low' });
    await request(sem, 'b', { class: 'normal' });
    await request(sem, 'c', { class: 'high' }); // displaces a
    await request(sem, 'd', { class: 'low' }); // refused
    sem.send({ type: 'gone', id: 'b' });
    await release(sem, 'h');
    expect(new Set(telemetry.map((t) => t.event))).toEqual(
      new Set(['acquired', 'queued', 'displaced', 'rejected', 'abandoned', 'released']),
    );
    for (const t of telemetry) {
      const m = t.measurements;
      expect(m.queued_interactive + m.queued_high + m.queued_normal + m.queued_low).toBe(m.queued);
    }
  });
});

describe('capacity from the config provider', () => {
  it('lowered: nothing is granted until held drains below it; raised: waiters are granted at once', async () => {
    const limits = { capacity: 2, queueSize: 4, renderTimeoutS: 300 };
    const { sem, messages, listen } = start({
      capacity: undefined,
      queueSize: undefined,
      limits: () => limits,
    });
    await request(sem, 'a');
    await request(sem, 'b');
    for (const id of ['w1', 'w2', 'w3']) {
      listen(id);
      await request(sem, id);
    }
    limits.capacity = 1;
    await release(sem, 'a');
    expect(messages).toEqual({});
    expect(await stats(sem)).toMatchObject({ held: 1, queued: 3, capacity: 1 });
    await release(sem, 'b');
    expect(messages).toEqual({ w1: [{ type: 'granted' }] });
    limits.capacity = 4;
    // The next request serves the waiters the new limit owes first; a slot is left for it.
    expect(await request(sem, 'late')).toEqual({ type: 'granted' });
    expect(Object.keys(messages).sort()).toEqual(['w1', 'w2', 'w3']);
    expect(await occupancy(sem)).toEqual({ held: 4, queued: 0 });
  });
});

describe('load with mixed exits', () => {
  it('24 workers against capacity 3 (release, crash, timeout): occupancy <= 3, ends empty', async () => {
    const { sem, telemetry } = start({ capacity: 3, queueSize: 32 });
    let peak = 0;
    sem.subscribe(() => {
      peak = Math.max(peak, sem.getSnapshot().context.table.holders.size);
    });
    const workers = Array.from({ length: 24 }, async (_, i) => {
      const id = `worker${i}`;
      const exit = (['release', 'crash', 'timeout'] as const)[i % 3];
      const outcome = await acquire(sem, id, { timeout: exit === 'timeout' ? 5 + i : 1_000 });
      if (outcome.type !== 'granted') return outcome.type;
      await new Promise((resolve) => setTimeout(resolve, 10 + (i % 4)));
      if (exit === 'crash') sem.send({ type: 'gone', id, reason: 'crash' });
      else await release(sem, id);
      return outcome.type;
    });
    await vi.runAllTimersAsync();
    const results = await Promise.all(workers);
    expect(results.filter((r) => r === 'granted').length).toBeGreaterThan(3);
    expect(results).toContain('timeout');
    expect(peak).toBe(3);
    expect(Math.max(...telemetry.map((t) => t.measurements.held))).toBe(3);
    expect(await occupancy(sem)).toEqual({ held: 0, queued: 0 });
    expect(waiterEntries(sem)).toEqual({ map: 0, fifo: 0, depths: 0 });
  });
});
