/**
 * The live view's hub on real actors (a semaphore with its telemetry forwarded, a readiness
 * latch) behind a real loopback server: nothing is subscribed while nobody watches; a client
 * gets a snapshot, then a state change at once and a details change coalesced; the feed carries
 * the semaphore's diagnostics-channel messages; a tracked actor that is stopped is announced
 * `gone`; the last client leaving detaches everything; `close()` ends the streams.
 */
import diagnostics from 'node:diagnostics_channel';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { type Actor, createActor } from 'xstate';
import { call } from '../../src/actors/call.js';
import {
  type ActorView,
  createLiveView,
  type LiveView,
  valueString,
} from '../../src/debug/liveView.js';
import { readinessMachine } from '../../src/machines/readiness.js';
import { semaphoreMachine } from '../../src/machines/semaphore.js';
import { publishTelemetry, SEMAPHORE_PREFIX } from '../../src/telemetry/channels.js';
import { get } from '../integration/harness.js';
import { openSse } from './sse.js';

const ACQUIRED = `${SEMAPHORE_PREFIX}.acquired`;

interface Rig {
  readonly view: LiveView;
  readonly url: string;
  readonly semaphore: Actor<typeof semaphoreMachine>;
  close(): Promise<void>;
}

let rig: Rig | null = null;
afterEach(async () => {
  await rig?.close();
  rig = null;
});

async function start(): Promise<Rig> {
  const semaphore = createActor(semaphoreMachine, { input: { capacity: 1, queueSize: 2 } }).start();
  const off = publishTelemetry(semaphore, SEMAPHORE_PREFIX);
  const view = createLiveView({
    actors: [{ name: 'semaphore', actor: semaphore }],
    flushIntervalMs: 20,
    heartbeatIntervalMs: 50,
  });
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?', 1)[0]!;
    if (!view.handle(req, res, path)) {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    view,
    url: `http://127.0.0.1:${port}`,
    semaphore,
    async close() {
      view.close();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      off();
      semaphore.stop();
    },
  };
}

const isActor = (r: { event: string }) => r.event === 'actor';
const v = (r: { data: unknown }) => r.data as ActorView;

describe('live view hub', () => {
  it('streams a snapshot, then deltas, and detaches when the last client leaves', async () => {
    rig = await start();
    expect(diagnostics.channel(ACQUIRED).hasSubscribers).toBe(false);
    const sse = await openSse(rig.url, '/debug/actors/events');
    const snap = (await sse.waitFor((r) => r.event === 'snapshot')).data as { actors: ActorView[] };
    expect(snap.actors).toHaveLength(1);
    expect(snap.actors[0]).toMatchObject({
      chart: 'semaphore',
      label: 'semaphore',
      parent: null,
      status: 'active',
      value: 'serving',
      active: ['semaphore', 'semaphore.serving'],
    });
    expect(snap.actors[0]!.details).toMatchObject({ held: 0, capacity: 1, queueSize: 2 });
    expect(diagnostics.channel(ACQUIRED).hasSubscribers).toBe(true);
    expect(rig.view.clients).toBe(1);

    await call(rig.semaphore, { type: 'request', id: 'one' });
    await call(rig.semaphore, { type: 'request', id: 'two', class: 'low' });
    const busy = await sse.waitFor(
      (r) => isActor(r) && v(r).details.held === 1 && v(r).details.queued_low === 1,
    );
    expect(v(busy).details).toMatchObject({ holders: 'one', waiters: 'two', queued: 1 });
    const fed = await sse.waitFor((r) => r.event === 'feed');
    expect(fed.data).toMatchObject({ channel: ACQUIRED, data: { held: 1, class: 'interactive' } });

    sse.close();
    await expect.poll(() => rig!.view.clients).toBe(0);
    expect(diagnostics.channel(ACQUIRED).hasSubscribers).toBe(false);
  });

  it('sends a state change at once and announces a stopped tracked actor as gone', async () => {
    rig = await start();
    const sse = await openSse(rig.url, '/debug/actors/events');
    await sse.waitFor((r) => r.event === 'snapshot');
    const latch = createActor(readinessMachine);
    rig.view.track(latch, 'readiness:test');
    latch.start();
    await call(latch, { type: 'check', queued: 5, threshold: 2 });
    const tripped = await sse.waitFor((r) => isActor(r) && v(r).value === 'tripped');
    expect(v(tripped)).toMatchObject({ chart: 'readiness', label: 'readiness:test' });
    expect(v(tripped).active).toEqual(['readiness', 'readiness.tripped']);
    latch.stop();
    const gone = await sse.waitFor((r) => r.event === 'gone');
    expect(gone.data).toEqual({ id: v(tripped).id });
    sse.close();
  });

  it('a client arriving later sees actors tracked while nobody watched', async () => {
    rig = await start();
    const latch = createActor(readinessMachine).start();
    rig.view.track(latch, 'readiness:early');
    const ended = createActor(readinessMachine).start();
    rig.view.track(ended, 'readiness:ended');
    ended.stop();
    const sse = await openSse(rig.url, '/debug/actors/events');
    const snap = (await sse.waitFor((r) => r.event === 'snapshot')).data as { actors: ActorView[] };
    expect(snap.actors.map((a) => a.label).sort()).toEqual(['readiness:early', 'semaphore']);
    sse.close();
    latch.stop();
  });

  it('ignores an actor that ended before it was tracked, and forgets short-lived ones that ended unwatched', async () => {
    rig = await start();
    const before = createActor(readinessMachine).start();
    before.stop();
    rig.view.track(before, 'readiness:before');
    // many short-lived actors, each tracked before start and stopped: none is kept
    for (let i = 0; i < 200; i++) {
      const a = createActor(readinessMachine);
      rig.view.track(a, `readiness:short${i}`);
      a.start();
      a.stop();
    }
    const sse = await openSse(rig.url, '/debug/actors/events');
    const snap = (await sse.waitFor((r) => r.event === 'snapshot')).data as { actors: ActorView[] };
    expect(snap.actors.map((a) => a.label)).toEqual(['semaphore']);
    sse.close();
  });

  it('routes only its own paths and methods, and ends streams on close', async () => {
    rig = await start();
    expect((await get(rig.url, '/debug/actors')).status).toBe(200);
    expect((await get(rig.url, '/debug/actors/charts')).status).toBe(200);
    expect((await get(rig.url, '/debug/actorsx')).status).toBe(404);
    expect((await get(rig.url, '/debug/actors/other')).status).toBe(404);
    expect((await get(rig.url, '/debug/actors', { method: 'POST' })).status).toBe(404);
    const sse = await openSse(rig.url, '/debug/actors/events');
    await sse.waitFor((r) => r.event === 'snapshot');
    rig.view.close();
    await sse.ended;
    expect(rig.view.clients).toBe(0);
    expect(diagnostics.channel(ACQUIRED).hasSubscribers).toBe(false);
    expect((await get(rig.url, '/debug/actors')).status).toBe(404);
  });

  it('writes nested and parallel values as dotted paths', () => {
    expect(valueString('serving')).toBe('serving');
    expect(valueString({ rendering: 'streaming' })).toBe('rendering.streaming');
    expect(valueString({ room: 'open', sweeper: 'armed' })).toBe('room.open, sweeper.armed');
    expect(valueString({ running: { timed: 'encoding' } })).toBe('running.timed.encoding');
  });
});
