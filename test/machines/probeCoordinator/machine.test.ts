/**
 * The ProbeCoordinator chart with a controllable probe: joiners while probing get the verdict
 * by notify, joiners while holding get it in the reply, the limiter slot is released when the
 * verdict lands (before the linger), and a failure is unregistered before it is broadcast.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createActor, fromCallback, fromPromise } from 'xstate';
import { call } from '../../../src/actors/call.js';
import {
  PROBE_LINGER_MS,
  type ProbeWaiterMessage,
  probeCoordinatorMachine,
  toFailure,
} from '../../../src/machines/probeCoordinator.js';

function deferred<T>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

function setup() {
  const gate = deferred<unknown>();
  const released: unknown[] = [];
  const limiter = createActor(
    fromCallback(({ receive }) => receive((e) => released.push(e))),
  ).start();
  const log: string[] = [];
  const got = new Map<string, ProbeWaiterMessage<unknown>[]>();
  const machine = probeCoordinatorMachine.provide({
    actors: { probe: fromPromise(() => gate.promise) },
  });
  const actor = createActor(machine, {
    input: { key: 'src', slotId: 'p1', limiter, firstWaiter: 'w1', probeInput: {} },
  });
  actor.on('unregister', () => log.push('unregister'));
  actor.on('notify', (e) => {
    log.push(`${e.to}:${e.message.type}`);
    got.set(e.to, [...(got.get(e.to) ?? []), e.message]);
  });
  actor.start();
  return { actor, gate, released, log, got };
}

describe('probeCoordinator', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('shares one verdict with every waiter, releases the slot at once, then lingers', async () => {
    const { actor, gate, released, got } = setup();
    await expect(call(actor, { type: 'join', id: 'w2' })).resolves.toEqual({ type: 'pending' });
    gate.resolve({ verdict: 'ok' });
    await vi.advanceTimersByTimeAsync(0);
    expect(released).toEqual([{ type: 'release', id: 'p1' }]);
    expect(got.get('w1')).toEqual([{ type: 'result', result: { verdict: 'ok' } }]);
    expect(got.get('w2')).toEqual([{ type: 'result', result: { verdict: 'ok' } }]);
    await expect(call(actor, { type: 'join', id: 'w3' })).resolves.toEqual({
      type: 'held',
      result: { verdict: 'ok' },
    });
    await vi.advanceTimersByTimeAsync(PROBE_LINGER_MS);
    expect(actor.getSnapshot().status).toBe('done');
  });

  it('a failure is unregistered first, then broadcast, and the actor stops', async () => {
    const { actor, gate, log, released } = setup();
    gate.reject({ class: 'probe_timeout' });
    await vi.advanceTimersByTimeAsync(0);
    expect(log).toEqual(['unregister', 'w1:error']);
    expect(released).toHaveLength(1);
    expect(actor.getSnapshot().status).toBe('done');
  });

  it('a waiter that leaves gets nothing', async () => {
    const { actor, gate, got } = setup();
    actor.send({ type: 'leave', id: 'w1' });
    gate.resolve(1);
    await vi.advanceTimersByTimeAsync(0);
    expect(got.get('w1')).toBeUndefined();
  });

  it('normalises unknown rejections to probe_failed', () => {
    expect(toFailure(new Error('boom'))).toEqual({ class: 'probe_failed', detail: 'boom' });
    expect(toFailure({ class: 'not_found' })).toEqual({ class: 'not_found' });
  });
});
