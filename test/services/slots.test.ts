// The admission singletons: created unstarted, sized from the config provider at every
// operation (a changed limit applies at once, no restart), and given the inspection observer.
import { describe, expect, it } from 'vitest';
import { loadConfig, mutableConfig } from '../../src/config/index.js';
import { probeStats, stats } from '../../src/services/semaphoreClient.js';
import { createSlots } from '../../src/services/slots.js';

describe('createSlots', () => {
  it('sizes both actors from the provider at every operation', async () => {
    const config = mutableConfig(
      loadConfig({ AP_ALLOW_INSECURE: '1', AP_MAX_CONCURRENCY: '3', AP_QUEUE_SIZE: '5' }),
    );
    const { semaphore, probeLimiter } = createSlots(config);
    semaphore.start();
    probeLimiter.start();
    try {
      expect(await stats(semaphore)).toMatchObject({ capacity: 3, queueSize: 5, held: 0 });
      const probeCapacity = config.get().maxProbeConcurrency;
      expect((await probeStats(probeLimiter)).capacity).toBe(probeCapacity);
      config.set({ maxConcurrency: 4, queueSize: 9, maxProbeConcurrency: probeCapacity + 1 });
      expect(await stats(semaphore)).toMatchObject({ capacity: 4, queueSize: 9 });
      expect((await probeStats(probeLimiter)).capacity).toBe(probeCapacity + 1);
    } finally {
      semaphore.stop();
      probeLimiter.stop();
    }
  });

  it('hands every actor the inspection observer', () => {
    const seen = new Set<string>();
    const { semaphore, probeLimiter } = createSlots(
      mutableConfig(loadConfig({ AP_ALLOW_INSECURE: '1' })),
      { inspect: (event) => seen.add(event.actorRef.sessionId) },
    );
    semaphore.start();
    probeLimiter.start();
    semaphore.stop();
    probeLimiter.stop();
    expect(seen).toEqual(new Set([semaphore.sessionId, probeLimiter.sessionId]));
  });
});
