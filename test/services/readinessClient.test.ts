// `checkReady`: the queue depth read from the semaphore, judged by the readiness latch; and every
// uncertainty resolves to ready (a semaphore that cannot be read counts as depth 0, a latch that
// cannot answer is answered ready).
import { afterEach, describe, expect, it } from 'vitest';
import { type AnyActorRef, createActor } from 'xstate';
import { readinessMachine } from '../../src/machines/readiness.js';
import { semaphoreMachine } from '../../src/machines/semaphore.js';
import { checkReady } from '../../src/services/readinessClient.js';
import { request } from '../../src/services/semaphoreClient.js';

const started: AnyActorRef[] = [];
afterEach(() => {
  for (const a of started.splice(0)) a.stop();
});

function actors() {
  const semaphore = createActor(semaphoreMachine, {
    input: { capacity: 1, queueSize: 4, renderTimeoutS: 60 },
  }).start();
  const readiness = createActor(readinessMachine).start();
  started.push(semaphore, readiness);
  return { semaphore, readiness };
}

describe('checkReady', () => {
  it('trips at the threshold and reports the depth it read', async () => {
    const { semaphore, readiness } = actors();
    expect(await checkReady(semaphore, readiness, 2)).toEqual({
      ready: true,
      queued: 0,
      threshold: 2,
    });
    for (const id of ['a', 'b', 'c']) await request(semaphore, id); // one holds, two queue
    expect(await checkReady(semaphore, readiness, 2)).toEqual({
      ready: false,
      queued: 2,
      threshold: 2,
    });
    expect((await checkReady(semaphore, readiness, 0)).ready).toBe(true); // 0 disables
  });

  it('counts an unreadable queue as empty', async () => {
    const { semaphore, readiness } = actors();
    for (const id of ['a', 'b', 'c']) await request(semaphore, id);
    semaphore.stop();
    expect(await checkReady(semaphore, readiness, 1)).toEqual({
      ready: true,
      queued: 0,
      threshold: 1,
    });
  });

  it('answers ready when the latch cannot answer', async () => {
    const { semaphore, readiness } = actors();
    for (const id of ['a', 'b', 'c']) await request(semaphore, id);
    readiness.stop();
    expect(await checkReady(semaphore, readiness, 1)).toEqual({
      ready: true,
      queued: 0,
      threshold: 1,
    });
  });
});
