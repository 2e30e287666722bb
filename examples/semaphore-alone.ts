/**
 * The render semaphore on its own, as a library that limits any async jobs. Run it with
 *
 *     npx tsx examples/semaphore-alone.ts
 *
 * Two slots and two waiting places. Six jobs ask at once: two get a slot, two low-priority ones
 * wait, the fifth finds the queue full and is refused at once with a Retry-After (what the proxy
 * turns into a 429), and a high-priority sixth takes the place of the newest low-priority waiter,
 * which is told so (also with a Retry-After). As slots free up, the high job goes first.
 */

import {
  type AdmissionClass,
  type SemaphoreTelemetry,
  semaphoreClient,
  semaphoreMachine,
} from 'audio-proxy';
import { createActor } from 'xstate';

/** How long each job holds its slot: long enough for the queue to form. */
const JOB_MS = 300;

const started = Date.now();
const stamp = () => `${String(Date.now() - started).padStart(4)} ms`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// The machine answers every request at once; waiting happens in the client (`acquire`).
const semaphore = createActor(semaphoreMachine, { input: { capacity: 2, queueSize: 2 } }).start();
semaphore.on('telemetry', (event: SemaphoreTelemetry) => {
  const { held, queued } = event.measurements;
  console.log(
    `${stamp()}    semaphore: ${event.event} (${event.metadata.class}), ${held} held, ${queued} queued`,
  );
});

async function job(id: string, cls: AdmissionClass): Promise<string> {
  const outcome = await semaphoreClient.acquire(semaphore, id, { class: cls });
  switch (outcome.type) {
    case 'granted':
      console.log(`${stamp()}  ${id}: granted, working`);
      try {
        await sleep(JOB_MS); // the expensive part: an encode, an upload, a model call…
      } finally {
        await semaphoreClient.release(semaphore, id); // always give the slot back
      }
      console.log(`${stamp()}  ${id}: done`);
      return 'ran';
    case 'queue_full':
      console.log(
        `${stamp()}  ${id}: refused, queue full (429, Retry-After: ${outcome.retryAfterS})`,
      );
      return 'refused';
    case 'displaced':
      console.log(
        `${stamp()}  ${id}: displaced by a higher class (Retry-After: ${outcome.retryAfterS})`,
      );
      return 'displaced';
    default:
      return outcome.type;
  }
}

// Started in this order, in one tick: each request reaches the semaphore before the next.
const jobs = [
  job('A', 'normal'),
  job('B', 'normal'),
  job('C', 'low'),
  job('D', 'low'),
  job('E', 'low'),
  job('F', 'high'),
];
const results = await Promise.all(jobs);
const count = (what: string) => results.filter((r) => r === what).length;
console.log(
  `${results.length} jobs: ${count('ran')} ran, ${count('refused')} refused, ${count('displaced')} displaced`,
);
console.log('stats after:', JSON.stringify(await semaphoreClient.stats(semaphore)));
semaphore.stop();
