/**
 * The delivery chart, driven by hand with fake timers and a recording of what it emits: the
 * answer is one `head` before any `write`/`end`, or one `refuse`/`shuttingDown` before it, or a
 * `tearDown` after it; the consumer deadline restarts on every message and answers 429 (via a
 * Retry-After question) while waiting, 504 while rendering and a torn stream while streaming,
 * leaving the coordinator each time; a client that leaves is `cancelled` from every state; a
 * full queue in cluster mode is handed off; each ending is one final state whose output carries
 * outcome, cache status, bytes and failure. The HTTP adapter is proved through a real proxy in
 * test/integration/ and test/reliability/, and against a fake services object in
 * test/http/delivery.test.ts.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createActor } from 'xstate';
import {
  CONSUMER_SLACK_MS,
  type DeliveryEmitted,
  type DeliveryEvent,
  deliveryMachine,
} from '../../../src/machines/delivery.js';

const DEADLINE_MS = 5_000;

function start(canHandOff = false) {
  const emitted: DeliveryEmitted[] = [];
  const actor = createActor(deliveryMachine, {
    input: { key: 'f:mp3/local://a.wav', deadlineMs: DEADLINE_MS, canHandOff },
  });
  actor.on('*', (e) => emitted.push(e as DeliveryEmitted));
  actor.start();
  const send = (e: DeliveryEvent) => actor.send(e);
  const types = () => emitted.map((e) => e.type);
  return { actor, emitted, send, types, value: () => actor.getSnapshot().value };
}

const subscribed = (started: boolean, backlog = '', cache: 'MISS' | 'COALESCED' = 'MISS') =>
  ({ type: 'subscribed', cache, started, backlog: Buffer.from(backlog) }) as const;
const chunk = (s: string) => ({ type: 'chunk', data: Buffer.from(s) }) as const;

describe('delivery chart', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('keeps one second of slack past the render timeout', () => {
    expect(CONSUMER_SLACK_MS).toBe(1_000);
  });

  it('refuses a deadline that is not a positive integer', () => {
    const actor = createActor(deliveryMachine, { input: { key: 'k', deadlineMs: 0 } });
    expect(actor.getSnapshot().status).toBe('error');
  });

  it('queued → rendering → streaming → done: head once, then writes, then end', () => {
    const d = start();
    d.send(subscribed(false));
    expect(d.value()).toBe('waiting');
    d.send({ type: 'rendering' });
    expect(d.value()).toBe('rendering');
    d.send(chunk('ab'));
    d.send(chunk('cde'));
    expect(d.value()).toBe('streaming');
    d.send({ type: 'done', info: { exitStatus: 0, bytes: 5 } });
    expect(d.types()).toEqual(['head', 'write', 'write', 'end']);
    expect(d.emitted[0]).toEqual({ type: 'head', cache: 'MISS' });
    const snapshot = d.actor.getSnapshot();
    expect(snapshot.status).toBe('done');
    expect(snapshot.output).toEqual({ outcome: 'ok', cache: 'MISS', bytes: 5 });
  });

  it('a coalesced answer with a backlog starts streaming at once, backlog first', () => {
    const d = start();
    d.send(subscribed(true, 'xyz', 'COALESCED'));
    expect(d.value()).toBe('streaming');
    expect(d.emitted).toEqual([
      { type: 'head', cache: 'COALESCED' },
      { type: 'write', data: Buffer.from('xyz') },
    ]);
    d.send({ type: 'done', info: { exitStatus: 0, bytes: 3 } });
    expect(d.actor.getSnapshot().output).toMatchObject({ cache: 'COALESCED', bytes: 3 });
  });

  it('done before any byte is an empty 200', () => {
    const d = start();
    d.send(subscribed(true));
    expect(d.value()).toBe('rendering');
    d.send({ type: 'done', info: { exitStatus: 0, bytes: 0 } });
    expect(d.types()).toEqual(['head', 'end']);
  });

  it('an empty chunk writes nothing and sends no head, but restarts the deadline', () => {
    const d = start();
    d.send(subscribed(true));
    vi.advanceTimersByTime(DEADLINE_MS - 1);
    d.send(chunk(''));
    vi.advanceTimersByTime(DEADLINE_MS - 1);
    expect(d.value()).toBe('rendering');
    expect(d.types()).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(d.value()).toBe('failed');
  });

  it('an error before the head is refused; after it, the stream is torn down', () => {
    const before = start();
    before.send(subscribed(true));
    before.send({ type: 'error', failure: { class: 'undecodable' } });
    expect(before.emitted).toEqual([{ type: 'refuse', failure: { class: 'undecodable' } }]);
    expect(before.actor.getSnapshot().output).toEqual({
      outcome: 'failed',
      cache: 'MISS',
      bytes: 0,
      failure: { class: 'undecodable' },
    });

    const after = start();
    after.send(subscribed(true, 'ab'));
    after.send({ type: 'error', failure: { class: 'render_failed', exitStatus: 1 } });
    expect(after.types()).toEqual(['head', 'write', 'tearDown']);
    expect(after.actor.getSnapshot().output).toMatchObject({ outcome: 'failed', bytes: 2 });
  });

  it('shutdown is a 503 before the head and a torn stream after it', () => {
    for (const [setup, expected] of [
      [[], ['shuttingDown']],
      [[subscribed(true)], ['shuttingDown']],
      [[subscribed(true, 'a')], ['head', 'write', 'tearDown']],
    ] as const) {
      const d = start();
      for (const e of setup) d.send(e);
      d.send({ type: 'shutdown', failure: { class: 'cancelled' } });
      expect(d.types()).toEqual(expected);
      expect(d.actor.getSnapshot().output?.failure).toEqual({ class: 'cancelled' });
    }
  });

  it('the deadline restarts on every message', () => {
    const d = start();
    d.send(subscribed(true, 'a'));
    for (const e of [chunk('b'), { type: 'rendering' } as const, chunk('c')]) {
      vi.advanceTimersByTime(DEADLINE_MS - 1);
      d.send(e);
    }
    vi.advanceTimersByTime(DEADLINE_MS - 1);
    expect(d.actor.getSnapshot().status).toBe('active');
    vi.advanceTimersByTime(1);
    expect(d.types()).toEqual(['head', 'write', 'write', 'write', 'leave', 'tearDown']);
    expect(d.actor.getSnapshot().output).toMatchObject({
      outcome: 'failed',
      failure: { class: 'timeout', detail: 'stream went silent' },
    });
  });

  it('stamped chunks: the stream is torn down exactly the deadline after the last one', () => {
    // The adapter stamps each chunk with its arrival (the timers' clock; Date is faked here too).
    const stamped = (s: string) =>
      ({ type: 'chunk', data: Buffer.from(s), at: Date.now() }) as const;
    for (const gaps of [
      [DEADLINE_MS - 1, DEADLINE_MS - 1, DEADLINE_MS - 1],
      [1, 2, 3, DEADLINE_MS - 1],
      [DEADLINE_MS / 2, DEADLINE_MS / 2 + 1, 7],
    ]) {
      const d = start();
      d.send(subscribed(true));
      d.send(stamped('a'));
      for (const gap of gaps) {
        vi.advanceTimersByTime(gap);
        d.send(stamped('b'));
      }
      vi.advanceTimersByTime(DEADLINE_MS - 1);
      expect(d.value(), String(gaps)).toBe('streaming');
      vi.advanceTimersByTime(1);
      expect(d.types()).toEqual(['head', ...gaps.map(() => 'write'), 'write', 'leave', 'tearDown']);
      expect(d.actor.getSnapshot().output).toMatchObject({
        outcome: 'failed',
        bytes: 1 + gaps.length,
        failure: { class: 'timeout', detail: 'stream went silent' },
      });
    }
  });

  it('stamped chunks do not restart the timer each: one is armed per deadline, not per chunk', () => {
    let armed = 0;
    const clock = {
      setTimeout: (fn: (...a: unknown[]) => void, ms: number) => {
        armed++;
        return setTimeout(fn, ms);
      },
      clearTimeout: (id: unknown) => clearTimeout(id as ReturnType<typeof setTimeout>),
    };
    const emitted: DeliveryEmitted[] = [];
    const actor = createActor(deliveryMachine, {
      input: { key: 'k', deadlineMs: DEADLINE_MS },
      clock,
    });
    actor.on('*', (e) => emitted.push(e as DeliveryEmitted));
    actor.start();
    actor.send(subscribed(true));
    actor.send({ type: 'chunk', data: Buffer.from('a'), at: Date.now() });
    const atStreaming = armed;
    for (let i = 0; i < 100; i++) {
      vi.advanceTimersByTime(100); // 10 s of chunks: the deadline (5 s) passes twice
      actor.send({ type: 'chunk', data: Buffer.from('b'), at: Date.now() });
    }
    expect(armed - atStreaming).toBe(2); // re-armed when it fired with chunks heard, not per chunk
    expect(actor.getSnapshot().value).toBe('streaming');
    expect(emitted.filter((e) => e.type === 'write')).toHaveLength(101);
    // An unstamped chunk restarts it at once, as every other message does.
    actor.send(chunk('c'));
    expect(armed - atStreaming).toBe(3);
    actor.send({ type: 'done', info: { exitStatus: 0, bytes: 102 } });
    expect(actor.getSnapshot().output).toMatchObject({ outcome: 'ok', bytes: 102 });
  });

  it('a queued subscription answer does not restart the deadline', () => {
    const d = start();
    vi.advanceTimersByTime(DEADLINE_MS - 1);
    d.send(subscribed(false));
    vi.advanceTimersByTime(1);
    expect(d.value()).toBe('refusing');
  });

  it('silence while waiting: leave, ask for a Retry-After, then 429 with it', () => {
    const d = start();
    d.send(subscribed(false));
    vi.advanceTimersByTime(DEADLINE_MS);
    expect(d.value()).toBe('refusing');
    expect(d.types()).toEqual(['leave', 'askRetryAfter']);
    d.send(chunk('late')); // ignored: the coordinator was left
    d.send({ type: 'retryAfter', retryAfterS: 7 });
    expect(d.emitted.at(-1)).toEqual({
      type: 'refuse',
      failure: { class: 'queue_full', retryAfterS: 7 },
    });
    expect(d.actor.getSnapshot().output).toMatchObject({ outcome: 'failed', bytes: 0 });
  });

  it('silence while rendering: leave, then 504', () => {
    const d = start();
    d.send(subscribed(true));
    vi.advanceTimersByTime(DEADLINE_MS);
    expect(d.emitted).toEqual([
      { type: 'leave' },
      {
        type: 'refuse',
        failure: { class: 'timeout', detail: 'no output before the consumer deadline' },
      },
    ]);
  });

  it('a client that leaves ends every state as cancelled', () => {
    const setups: DeliveryEvent[][] = [
      [],
      [subscribed(true)],
      [subscribed(true, 'a')],
      [{ type: 'refused', failure: { class: 'queue_full', retryAfterS: 2 } }],
    ];
    for (const setup of setups) {
      const d = start(true);
      for (const e of setup) d.send(e);
      const active = d.value();
      d.send({ type: 'client.gone' });
      expect(d.actor.getSnapshot().output?.outcome, String(active)).toBe('cancelled');
      if (active !== 'handingOff') expect(d.types().at(-1)).toBe('leave');
    }
    const refusing = start();
    vi.advanceTimersByTime(DEADLINE_MS);
    refusing.send({ type: 'client.gone' });
    expect(refusing.types()).toEqual(['leave', 'askRetryAfter']);
    expect(refusing.actor.getSnapshot().output?.outcome).toBe('cancelled');
  });

  it('a refused subscription is answered, or handed off in cluster mode when the queue is full', () => {
    const alone = start(false);
    alone.send({ type: 'refused', failure: { class: 'queue_full', retryAfterS: 3 } });
    expect(alone.emitted).toEqual([
      { type: 'refuse', failure: { class: 'queue_full', retryAfterS: 3 } },
    ]);

    const other = start(true);
    other.send({ type: 'refused', failure: { class: 'render_failed' } });
    expect(other.types()).toEqual(['refuse']);

    const relayed = start(true);
    relayed.send({ type: 'refused', failure: { class: 'queue_full', retryAfterS: 3 } });
    expect(relayed.emitted).toEqual([{ type: 'handOff', retryAfterS: 3 }]);
    vi.advanceTimersByTime(DEADLINE_MS * 2); // no deadline while a peer is asked
    relayed.send({ type: 'handOff.relayed' });
    expect(relayed.actor.getSnapshot().output).toMatchObject({ outcome: 'ok' });

    const refused = start(true);
    refused.send({ type: 'refused', failure: { class: 'queue_full', retryAfterS: 3 } });
    refused.send({ type: 'handOff.refused', retryAfterS: 9 });
    expect(refused.emitted.at(-1)).toEqual({
      type: 'refuse',
      failure: { class: 'queue_full', retryAfterS: 9 },
    });
  });

  it('a fault ends any state as failed without emitting anything', () => {
    for (const setup of [[], [subscribed(true, 'a')]] as DeliveryEvent[][]) {
      const d = start();
      for (const e of setup) d.send(e);
      const before = d.emitted.length;
      d.send({ type: 'fault' });
      expect(d.emitted.length).toBe(before);
      expect(d.actor.getSnapshot().output).toMatchObject({
        outcome: 'failed',
        failure: { class: 'render_failed', detail: 'internal error' },
      });
    }
  });
});
