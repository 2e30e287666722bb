/**
 * The RenderCoordinator chart, walked with a controllable render child and a recording
 * semaphore: join seams (queued, rendering, completed), the last-subscriber cancel barrier,
 * the retention cap, fail ordering (unregister before broadcast), displacement, and that the
 * slot is released exactly once and only after the render is gone. Real ffmpeg runs in the
 * integration tests; this file proves the chart.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { type AnyActorRef, createActor, fromCallback } from 'xstate';
import { call, inbox } from '../../../src/actors/call.js';
import {
  type JoinReply,
  LINGER_MS,
  renderCoordinatorMachine,
  type SubscriberMessage,
} from '../../../src/machines/renderCoordinator.js';

interface RenderProbe {
  ref: AnyActorRef | null;
  received: { type: string; bytes?: number }[];
  emit(event: { type: string; [k: string]: unknown }): void;
}

function controllableRender(probe: RenderProbe) {
  return fromCallback(({ receive, self }) => {
    probe.ref = self;
    receive((event) => probe.received.push(event as { type: string }));
    return () => {};
  });
}

function recordingSemaphore() {
  const received: { type: string; id?: string }[] = [];
  const logic = fromCallback(({ receive }) => {
    receive((e) => received.push(e as { type: string; id?: string }));
  });
  const actor = createActor(logic).start();
  return { actor, received };
}

function setupCoordinator(opts: { admission?: 'granted' | 'queued'; cap?: number } = {}) {
  const probe: RenderProbe = {
    ref: null,
    received: [],
    emit(event) {
      // The render child talks to its parent; simulate by sending to the coordinator.
      coordinator.send(event as never);
    },
  };
  const sem = recordingSemaphore();
  const log: string[] = [];
  const messages = new Map<string, SubscriberMessage[]>();
  const machine = renderCoordinatorMachine.provide({
    actors: { render: controllableRender(probe) },
  });
  const coordinator = createActor(machine, {
    input: {
      key: 'k1',
      admission: opts.admission ?? 'granted',
      slotId: 'slot-1',
      semaphore: sem.actor,
      firstSubscriber: 'a',
      maxVariantBytes: () => opts.cap ?? 1_000_000,
      renderInput: {},
    },
  });
  coordinator.on('unregister', () => log.push('unregister'));
  coordinator.on('notify', (e) => {
    log.push(`${e.to}:${e.message.type}`);
    if (!messages.has(e.to)) messages.set(e.to, []);
    messages.get(e.to)!.push(e.message);
  });
  coordinator.start();
  const bytesOf = (id: string) =>
    Buffer.concat(
      (messages.get(id) ?? []).flatMap((m) => (m.type === 'chunk' ? [m.data] : [])),
    ).toString();
  return { coordinator, probe, sem, log, messages, bytesOf };
}

const chunk = (s: string) => ({ type: 'render.chunk', data: Buffer.from(s) });

describe('renderCoordinator', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('starts rendering at once when admitted, and tells the first subscriber', () => {
    const { coordinator, probe, log } = setupCoordinator();
    expect(coordinator.getSnapshot().value).toEqual({ rendering: 'streaming' });
    expect(probe.ref).not.toBeNull();
    expect(log).toEqual(['a:rendering']);
  });

  it('waits in queued until the slot is granted, accepting joiners with an empty backlog', async () => {
    const { coordinator, probe } = setupCoordinator({ admission: 'queued' });
    expect(coordinator.getSnapshot().value).toBe('queued');
    expect(probe.ref).toBeNull();
    const reply = await call<JoinReply>(coordinator, { type: 'join', id: 'b' });
    expect(reply).toEqual({ type: 'joined', state: 'queued', backlog: [] });
    coordinator.send({ type: 'slot.granted' });
    expect(coordinator.getSnapshot().value).toEqual({ rendering: 'streaming' });
    expect(coordinator.getSnapshot().context.subscribers).toEqual(new Set(['a', 'b']));
  });

  it('gives a late joiner the backlog from byte 0 and every later chunk: no gap, no duplicate', async () => {
    const { coordinator, probe, bytesOf } = setupCoordinator();
    probe.emit(chunk('abc'));
    probe.emit(chunk('def'));
    const reply = await call<JoinReply>(coordinator, { type: 'join', id: 'b' });
    expect(reply.type === 'joined' && Buffer.concat(reply.backlog as Buffer[]).toString()).toBe(
      'abcdef',
    );
    probe.emit(chunk('ghi'));
    probe.emit({ type: 'render.done' });
    expect(bytesOf('a')).toBe('abcdefghi');
    expect(
      reply.type === 'joined' && Buffer.concat([...reply.backlog]).toString() + bytesOf('b'),
    ).toBe('abcdefghi');
    // every chunk acknowledged to the render at once
    expect(probe.received.filter((e) => e.type === 'ack').map((e) => e.bytes)).toEqual([3, 3, 3]);
  });

  it('completes: done to everyone, slot released before the linger, joiners served from the backlog, then stops', async () => {
    const { coordinator, probe, sem, messages } = setupCoordinator();
    probe.emit(chunk('xyz'));
    probe.emit({ type: 'render.done' });
    expect(coordinator.getSnapshot().value).toBe('completed');
    expect(sem.received).toEqual([{ type: 'release', id: 'slot-1' }]);
    expect(messages.get('a')!.at(-1)).toEqual({ type: 'done', info: { exitStatus: 0, bytes: 3 } });
    const reply = await call<JoinReply>(coordinator, { type: 'join', id: 'late' });
    expect(reply).toMatchObject({ type: 'joined', state: 'completed', info: { bytes: 3 } });
    expect(messages.get('late')).toEqual([{ type: 'done', info: { exitStatus: 0, bytes: 3 } }]);
    vi.advanceTimersByTime(LINGER_MS - 1);
    expect(coordinator.getSnapshot().status).toBe('active');
    vi.advanceTimersByTime(1);
    expect(coordinator.getSnapshot().status).toBe('done');
  });

  it('last subscriber leaving cancels the render and the unsubscribe answers only after the kill is confirmed', async () => {
    const { coordinator, probe, sem } = setupCoordinator();
    probe.emit(chunk('a'));
    let answered = false;
    const pending = call(coordinator, { type: 'unsubscribe', id: 'a' }, { timeout: 60_000 }).then(
      (r) => {
        answered = true;
        return r;
      },
    );
    await Promise.resolve();
    expect(coordinator.getSnapshot().value).toEqual({ rendering: 'cancelling' });
    expect(probe.received.some((e) => e.type === 'cancel')).toBe(true);
    expect(answered).toBe(false);
    expect(sem.received).toEqual([]); // slot still held while ffmpeg may be alive
    probe.emit({ type: 'render.cancelled' });
    await expect(pending).resolves.toEqual({ type: 'ok' });
    expect(sem.received).toEqual([{ type: 'release', id: 'slot-1' }]);
    expect(coordinator.getSnapshot().status).toBe('done');
  });

  it('one subscriber leaving does not affect the others', async () => {
    const { coordinator, probe, bytesOf } = setupCoordinator();
    await call(coordinator, { type: 'join', id: 'b' });
    probe.emit(chunk('1'));
    coordinator.send({ type: 'gone', id: 'a' });
    probe.emit(chunk('2'));
    probe.emit({ type: 'render.done' });
    expect(bytesOf('a')).toBe('1');
    expect(bytesOf('b')).toBe('12');
  });

  it('a render error is unregistered first, then broadcast once to each subscriber, then the slot is released', async () => {
    const { coordinator, probe, log, sem, messages } = setupCoordinator();
    await call(coordinator, { type: 'join', id: 'b' });
    probe.emit(chunk('1'));
    probe.emit({ type: 'render.error', failure: { class: 'render_failed', exitStatus: 3 } });
    const afterRendering = log.filter((l) => !l.endsWith(':rendering') && !l.endsWith(':chunk'));
    expect(afterRendering).toEqual(['unregister', 'a:error', 'b:error']);
    expect(sem.received).toEqual([{ type: 'release', id: 'slot-1' }]);
    for (const id of ['a', 'b']) {
      expect(messages.get(id)!.filter((m) => m.type === 'error' || m.type === 'done')).toHaveLength(
        1,
      );
    }
    expect(coordinator.getSnapshot().status).toBe('done');
  });

  it('the chunk that crosses the retention cap is neither kept nor sent; the render is cancelled before the slot is released', () => {
    const { coordinator, probe, messages, sem, bytesOf } = setupCoordinator({ cap: 5 });
    probe.emit(chunk('abc'));
    probe.emit(chunk('de'));
    probe.emit(chunk('f'));
    expect(bytesOf('a')).toBe('abcde');
    const last = messages.get('a')!.at(-1);
    expect(last).toMatchObject({ type: 'error', failure: { class: 'render_failed' } });
    expect(last?.type === 'error' && last.failure.detail).toContain('5-byte');
    expect(last?.type === 'error' && last.failure.detail).toContain('AP_MAX_VARIANT_BYTES');
    expect(coordinator.getSnapshot().value).toEqual({ rendering: 'cancelling' });
    expect(sem.received).toEqual([]);
    probe.emit({ type: 'render.cancelled' });
    expect(sem.received).toEqual([{ type: 'release', id: 'slot-1' }]);
  });

  it('output exactly at the cap succeeds', () => {
    const { coordinator, probe } = setupCoordinator({ cap: 5 });
    probe.emit(chunk('abcde'));
    probe.emit({ type: 'render.done' });
    expect(coordinator.getSnapshot().value).toBe('completed');
  });

  it('a queued coordinator whose every client leaves stops and gives its waiter place back', () => {
    const { coordinator, sem } = setupCoordinator({ admission: 'queued' });
    coordinator.send({ type: 'gone', id: 'a' });
    expect(coordinator.getSnapshot().status).toBe('done');
    expect(sem.received).toEqual([{ type: 'release', id: 'slot-1' }]);
  });

  it('displaced while queued fails every subscriber with queue_full and the retry-after, releasing nothing', () => {
    const { coordinator, sem, messages, log } = setupCoordinator({ admission: 'queued' });
    coordinator.send({ type: 'slot.displaced', retryAfterS: 7 });
    expect(log[0]).toBe('unregister');
    expect(messages.get('a')).toEqual([
      { type: 'error', failure: expect.objectContaining({ class: 'queue_full', retryAfterS: 7 }) },
    ]);
    expect(sem.received).toEqual([]);
    expect(coordinator.getSnapshot().status).toBe('done');
  });

  it('a join that reaches a cancelling coordinator is told it is stopping', async () => {
    const { coordinator } = setupCoordinator();
    coordinator.send({ type: 'gone', id: 'a' });
    await expect(call(coordinator, { type: 'join', id: 'z' })).resolves.toEqual({
      type: 'stopping',
    });
  });

  it('shutdown while rendering cancels, releases after the confirmation, and then replies', async () => {
    const { coordinator, probe, sem, messages } = setupCoordinator();
    const done = call(coordinator, { type: 'shutdown' }, { timeout: 60_000 });
    expect(messages.get('a')!.at(-1)).toMatchObject({
      type: 'error',
      failure: { class: 'cancelled' },
    });
    expect(sem.received).toEqual([]);
    probe.emit({ type: 'render.cancelled' });
    await expect(done).resolves.toEqual({ type: 'ok' });
    expect(sem.received).toEqual([{ type: 'release', id: 'slot-1' }]);
  });

  it('a render that finishes while cancelling counts as the confirmation', () => {
    const { coordinator, probe, sem } = setupCoordinator();
    coordinator.send({ type: 'gone', id: 'a' });
    probe.emit({ type: 'render.done' });
    expect(coordinator.getSnapshot().status).toBe('done');
    expect(sem.received).toEqual([{ type: 'release', id: 'slot-1' }]);
  });

  it('delivers notify messages through inbox()', async () => {
    const { coordinator, probe } = setupCoordinator();
    const got: string[] = [];
    inbox<SubscriberMessage>(coordinator, 'b', (m) => got.push(m.type));
    await call(coordinator, { type: 'join', id: 'b' });
    probe.emit(chunk('x'));
    probe.emit({ type: 'render.done' });
    expect(got).toEqual(['rendering', 'chunk', 'done']);
  });
});
