/**
 * Orphans yield (issue #14, item 5), on the RenderCoordinator chart with a controllable render
 * child and a recording semaphore: a render whose listeners all left while the store subscriber
 * (`join` with `store: true`) stays tells the semaphore `orphaned`; a listener joining tells it
 * `adopted`; `slot.preempted` cancels an orphan (the store subscriber gets `error(cancelled)`,
 * the slot is released once, after the kill) and is ignored by a render someone listens to.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { type AnyActorRef, createActor, fromCallback } from 'xstate';
import { call } from '../../../src/actors/call.js';
import {
  type JoinReply,
  renderCoordinatorMachine,
  type SubscriberMessage,
} from '../../../src/machines/renderCoordinator.js';

function setup(
  extra: {
    admission?: 'granted' | 'queued';
    firstSubscriberStore?: boolean;
    admissionClass?: 'low';
  } = {},
) {
  const render = { ref: null as AnyActorRef | null, received: [] as { type: string }[] };
  const semReceived: { type: string; id?: string }[] = [];
  const sem = createActor(
    fromCallback(({ receive }) => {
      receive((e) => semReceived.push(e as { type: string; id?: string }));
    }),
  ).start();
  const log: string[] = [];
  const messages = new Map<string, SubscriberMessage[]>();
  const machine = renderCoordinatorMachine.provide({
    actors: {
      render: fromCallback(({ receive, self }) => {
        render.ref = self;
        receive((event) => render.received.push(event as { type: string }));
      }),
    },
  });
  const coordinator = createActor(machine, {
    input: {
      key: 'k1',
      admission: extra.admission ?? 'granted',
      ...(extra.firstSubscriberStore ? { firstSubscriberStore: true } : {}),
      ...(extra.admissionClass ? { admissionClass: extra.admissionClass } : {}),
      slotId: 'slot-1',
      semaphore: sem,
      firstSubscriber: 'client',
      maxVariantBytes: () => 1_000_000,
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
  const semSaid = () => semReceived.map((e) => `${e.type}:${e.id}`);
  return { coordinator, render, semSaid, log, messages };
}

const joinTee = (c: AnyActorRef) => call<JoinReply>(c, { type: 'join', id: 'tee', store: true });

describe('renderCoordinator: orphans yield', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('the last client leaving with the tee still there: an orphan, rendering on, semaphore told', async () => {
    const { coordinator, render, semSaid } = setup();
    await joinTee(coordinator);
    await call(coordinator, { type: 'unsubscribe', id: 'client' });
    expect(coordinator.getSnapshot().value).toEqual({ rendering: 'streaming' });
    expect(render.received.some((e) => e.type === 'cancel')).toBe(false);
    expect(semSaid()).toEqual(['orphaned:slot-1']);
  });

  it('a client that goes away (gone) orphans the render the same way', async () => {
    const { coordinator, semSaid } = setup();
    await joinTee(coordinator);
    coordinator.send({ type: 'gone', id: 'client' });
    expect(semSaid()).toEqual(['orphaned:slot-1']);
  });

  it('preempted: unregistered, the tee told cancelled, ffmpeg killed, then the slot released once', async () => {
    const { coordinator, render, semSaid, log, messages } = setup();
    await joinTee(coordinator);
    coordinator.send({ type: 'render.chunk', data: Buffer.from('abc') });
    await call(coordinator, { type: 'unsubscribe', id: 'client' });
    log.length = 0;
    coordinator.send({ type: 'slot.preempted' });
    expect(coordinator.getSnapshot().value).toEqual({ rendering: 'cancelling' });
    expect(log[0]).toBe('unregister');
    expect(messages.get('tee')!.at(-1)).toMatchObject({
      type: 'error',
      failure: { class: 'cancelled', detail: expect.stringMatching(/preempted/) },
    });
    expect(render.received.at(-1)).toEqual({ type: 'cancel' });
    expect(semSaid()).toEqual(['orphaned:slot-1']); // not released before the kill
    coordinator.send({ type: 'render.cancelled' });
    expect(coordinator.getSnapshot().status).toBe('done');
    expect(semSaid()).toEqual(['orphaned:slot-1', 'release:slot-1']);
  });

  it('a listener joining an orphan adopts it: semaphore told, and a crossing preemption is ignored', async () => {
    const { coordinator, render, semSaid, messages } = setup();
    await joinTee(coordinator);
    coordinator.send({ type: 'render.chunk', data: Buffer.from('abc') });
    await call(coordinator, { type: 'unsubscribe', id: 'client' });
    const reply = await call<JoinReply>(coordinator, { type: 'join', id: 'late' });
    expect(reply).toMatchObject({ type: 'joined', state: 'rendering' });
    expect(semSaid()).toEqual(['orphaned:slot-1', 'adopted:slot-1']);
    coordinator.send({ type: 'slot.preempted' });
    expect(coordinator.getSnapshot().value).toEqual({ rendering: 'streaming' });
    expect(render.received.some((e) => e.type === 'cancel')).toBe(false);
    coordinator.send({ type: 'render.done' });
    expect(messages.get('late')!.at(-1)).toMatchObject({ type: 'done' });
    expect(messages.get('tee')!.at(-1)).toMatchObject({ type: 'done' });
    expect(semSaid()).toEqual(['orphaned:slot-1', 'adopted:slot-1', 'release:slot-1']);
  });

  it('while a client listens, preempted is ignored and nobody is an orphan', async () => {
    const { coordinator, render, semSaid } = setup();
    await joinTee(coordinator);
    await call(coordinator, { type: 'join', id: 'second' });
    await call(coordinator, { type: 'unsubscribe', id: 'client' });
    coordinator.send({ type: 'slot.preempted' });
    expect(coordinator.getSnapshot().value).toEqual({ rendering: 'streaming' });
    expect(render.received.some((e) => e.type === 'cancel')).toBe(false);
    expect(semSaid()).toEqual([]);
    // The second client leaving is what orphans it.
    await call(coordinator, { type: 'unsubscribe', id: 'second' });
    expect(semSaid()).toEqual(['orphaned:slot-1']);
  });

  it('the tee leaving first orphans nothing; without a tee the last client cancels as before', async () => {
    const { coordinator, render, semSaid } = setup();
    await joinTee(coordinator);
    coordinator.send({ type: 'gone', id: 'tee' });
    expect(semSaid()).toEqual([]);
    const left = call(coordinator, { type: 'unsubscribe', id: 'client' });
    expect(coordinator.getSnapshot().value).toEqual({ rendering: 'cancelling' });
    expect(render.received.at(-1)).toEqual({ type: 'cancel' });
    coordinator.send({ type: 'render.cancelled' });
    await left;
    expect(semSaid()).toEqual(['release:slot-1']);
  });

  it('an orphan that finishes first stores normally: done to the tee, one release, no cancel', async () => {
    const { coordinator, render, semSaid, messages } = setup();
    await joinTee(coordinator);
    await call(coordinator, { type: 'unsubscribe', id: 'client' });
    coordinator.send({ type: 'render.done' });
    coordinator.send({ type: 'slot.preempted' }); // crossed the release: ignored
    expect(coordinator.getSnapshot().value).toBe('completed');
    expect(messages.get('tee')!.at(-1)).toMatchObject({ type: 'done' });
    expect(render.received.some((e) => e.type === 'cancel')).toBe(false);
    expect(semSaid()).toEqual(['orphaned:slot-1', 'release:slot-1']);
  });
});

describe('renderCoordinator: warm work (issue #19)', () => {
  it('a render whose first subscriber fills the store is an orphan from its first byte', async () => {
    const { coordinator, semSaid } = setup({ firstSubscriberStore: true, admissionClass: 'low' });
    expect(coordinator.getSnapshot().value).toEqual({ rendering: 'streaming' });
    expect(semSaid()).toEqual(['orphaned:slot-1']);
    // a listener adopts it: it is no longer preempted for one
    await call(coordinator, { type: 'join', id: 'listener' });
    expect(semSaid()).toEqual(['orphaned:slot-1', 'adopted:slot-1']);
    coordinator.stop();
  });

  it('queued warm work: a listener joining promotes the waiter once; granted, it is adopted, not orphaned', async () => {
    const { coordinator, semSaid } = setup({
      admission: 'queued',
      firstSubscriberStore: true,
      admissionClass: 'low',
    });
    await call(coordinator, { type: 'join', id: 'tee', store: true });
    expect(semSaid()).toEqual([]);
    await call(coordinator, { type: 'join', id: 'l1' });
    await call(coordinator, { type: 'join', id: 'l2' });
    expect(semSaid()).toEqual(['promote:slot-1']);
    coordinator.send({ type: 'slot.granted' });
    expect(semSaid()).toEqual(['promote:slot-1']); // listeners present: not an orphan
    coordinator.stop();
  });

  it('a queued interactive render is never promoted', async () => {
    const { coordinator, semSaid } = setup({ admission: 'queued' });
    await call(coordinator, { type: 'join', id: 'l2' });
    expect(semSaid()).toEqual([]);
    coordinator.stop();
  });
});
