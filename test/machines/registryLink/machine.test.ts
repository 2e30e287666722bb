// The registry client's chart, driven by hand: it degrades on one unreachable answer and
// recovers on one answer; answered errors are counted with the worker but do not degrade;
// reserved/committed move 1 → 1 on commit and each reservation leaves once, from where it was;
// `closed` has no way out yet keeps counting; every state entered is emitted for metrics, and
// `stats` answers as a call.

import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { call } from '../../../src/actors/call.js';
import type { RegistryStats } from '../../../src/machines/registryLink.js';
import { linkStatsOf, registryLinkMachine } from '../../../src/machines/registryLink.js';

function start() {
  const actor = createActor(registryLinkMachine);
  const entered: string[] = [];
  actor.on('state', (e) => entered.push(e.state));
  actor.start();
  return { actor, entered, stats: () => linkStatsOf(actor.getSnapshot()) };
}

describe('registryLink chart', () => {
  it('connecting → ready ↔ degraded → closed, each entry emitted', () => {
    const { actor, entered, stats } = start();
    expect(stats().state).toBe('connecting');
    actor.send({ type: 'redis.ready' });
    actor.send({ type: 'op.failed', code: 'ERR_REGISTRY_UNREACHABLE', worker: 'b' });
    expect(stats()).toMatchObject({ state: 'degraded', errors: 1, lastError: { worker: 'b' } });
    actor.send({ type: 'op.ok' });
    actor.send({ type: 'redis.down', message: 'gone' });
    actor.send({ type: 'redis.ready' });
    actor.send({ type: 'close' });
    actor.send({ type: 'redis.ready' });
    expect(entered).toEqual([
      'connecting',
      'ready',
      'degraded',
      'ready',
      'degraded',
      'ready',
      'closed',
    ]);
    expect(stats().state).toBe('closed');
  });

  it('an answered error is counted, not an outage', () => {
    const { actor, stats } = start();
    actor.send({ type: 'op.ok' });
    actor.send({ type: 'op.failed', code: 'ERR_REGISTRY_MALFORMED', worker: 'c' });
    actor.send({ type: 'op.failed', code: 'ERR_REGISTRY_SCRIPT', worker: null });
    expect(stats()).toMatchObject({
      state: 'ready',
      errors: 2,
      lastError: { code: 'ERR_REGISTRY_SCRIPT', worker: null },
    });
  });

  it('counts reservations 1 → 1 through commit, and each leaves once', () => {
    const { actor, stats } = start();
    actor.send({ type: 'reservation.made' });
    actor.send({ type: 'reservation.made' });
    actor.send({ type: 'selection.refused' });
    actor.send({ type: 'reservation.committed' });
    expect(stats()).toMatchObject({ reserved: 1, committed: 1, selections: 2, refusals: 1 });
    actor.send({ type: 'reservation.ended', from: 'reserved', lost: true });
    actor.send({ type: 'close' });
    actor.send({ type: 'reservation.ended', from: 'committed', lost: false });
    expect(stats()).toMatchObject({ state: 'closed', reserved: 0, committed: 0, lost: 1 });
  });

  it('answers stats as a call', async () => {
    const { actor } = start();
    actor.send({ type: 'redis.ready' });
    const payload = await call<RegistryStats>(actor, { type: 'stats' });
    expect(payload).toMatchObject({ state: 'ready', reserved: 0, errors: 0, lastError: null });
  });
});
