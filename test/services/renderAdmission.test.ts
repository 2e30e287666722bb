/**
 * What a refused render costs (issue #17, the burst): the render's input (argv, sizing) is built
 * only for a request the semaphore admitted, and a throw while building it after the admission
 * gives the slot back. A real semaphore chart and the real render service; the one slot is held
 * by a request made directly on the semaphore, so no ffmpeg runs (about 50 ms).
 */
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { call, cast } from '../../src/actors/call.js';
import { loadConfig, staticConfig } from '../../src/config/index.js';
import type { RenderRequest } from '../../src/core/request.js';
import { parseOptions } from '../../src/http/options.js';
import { semaphoreMachine } from '../../src/machines/semaphore.js';
import { renderLogic } from '../../src/services/renderLogic.js';
import { RenderService } from '../../src/services/renderService.js';
import { stats } from '../../src/services/semaphoreClient.js';

class Injected extends Error {
  override readonly name = 'Injected';
}

function requestFor(key: string): RenderRequest {
  const parsed = parseOptions(`f:mp3/cb:${key}`);
  if (!parsed.ok) throw new Error('test options must parse');
  return {
    key,
    options: parsed.options,
    source: {
      source: { scheme: 'local', path: 'a.wav' } as RenderRequest['source']['source'],
      canonical: 'local://a.wav',
      input: { url: '/nonexistent/a.wav', kind: 'local' },
    },
  };
}

describe('render admission', () => {
  it('builds no render input for a refused request, and gives the slot back when building it throws', async () => {
    const semaphore = createActor(semaphoreMachine, {
      input: { capacity: 1, queueSize: 0, now: () => Date.now() },
    }).start();
    const built: string[] = [];
    const service = new RenderService({
      semaphore,
      config: staticConfig(loadConfig({ AP_ALLOW_INSECURE: '1' })),
      renderLogic,
      renderInput: (request: RenderRequest) => {
        built.push(request.key);
        throw new Injected(`input of ${request.key}`);
      },
    });
    try {
      // The one slot is taken, the queue holds none: the next request is refused.
      const held = await call<{ type: string }>(semaphore, { type: 'request', id: 'holder' });
      expect(held.type).toBe('granted');
      const refused = await service.subscribe(requestFor('refused'), 'sub-1', () => {});
      expect(refused).toMatchObject({ type: 'failed', failure: { class: 'queue_full' } });
      expect(built).toEqual([]);

      // Admitted: the input is built, it throws, and the slot it was granted is released.
      cast(semaphore, { type: 'release', id: 'holder' });
      await expect(service.subscribe(requestFor('admitted'), 'sub-2', () => {})).rejects.toThrow(
        Injected,
      );
      expect(built).toEqual(['admitted']);
      const s = await stats(semaphore);
      expect(s.held).toBe(0);
      expect(s.queued).toBe(0);
      expect(service.live).toBe(0);
    } finally {
      semaphore.stop();
    }
  });
});
