// The waiting room's calls as the HTTP side gets them (`endpoints()`): free functions over the
// room and the service, so a caller may pass them around without `this`. A session joins, its
// reserved slot is a real semaphore slot (`room:<session>`), the claim hands that slot over, and
// leave/status answer `unknown` for a session the room does not know.
import { afterEach, describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { loadConfig, staticConfig } from '../../src/config/index.js';
import { semaphoreMachine } from '../../src/machines/semaphore.js';
import { stats } from '../../src/services/semaphoreClient.js';
import { WaitingRoomService } from '../../src/services/waitingRoomService.js';

const stops: Array<() => void> = [];
afterEach(() => {
  for (const stop of stops.splice(0)) stop();
});

function service() {
  const semaphore = createActor(semaphoreMachine, {
    input: { capacity: 2, queueSize: 4, renderTimeoutS: 60 },
  }).start();
  const config = staticConfig(
    loadConfig({
      AP_ALLOW_INSECURE: '1',
      AP_MAX_CONCURRENCY: '2',
      AP_WAITING_ROOM: '1',
      AP_WAITING_ROOM_SLOTS: '1',
    }),
  );
  const room = new WaitingRoomService({ semaphore, config });
  stops.push(
    () => room.stop(),
    () => semaphore.stop(),
  );
  return { semaphore, room };
}

describe('WaitingRoomService.endpoints', () => {
  it('joins, reserves a real slot, hands it to the claim, and ends the run', async () => {
    const { semaphore, room } = service();
    const { join, status, claim, runEnded } = room.endpoints(); // detached from the service
    expect((await join('s1')).type).toBe('ticket');
    expect((await status('s1')).type).toBe('ticket');
    await expect.poll(async () => (await stats(semaphore)).held).toBe(1); // room:s1
    expect(await claim('s1')).toEqual({ adoptSlotId: 'room:s1' });
    runEnded('s1', false);
  });

  it('answers unknown for a session the room never saw', async () => {
    const { leave, status } = service().room.endpoints();
    expect(await leave('nobody')).toEqual({ type: 'unknown' });
    expect(await status('nobody')).toEqual({ type: 'unknown' });
  });
});
