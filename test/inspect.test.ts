// The `inspect` option end to end, offline: a real proxy pointed at a Stately relay
// (`createInspectorServer`, started on a free port) streams every actor to a viewer
// (`createWebSocketReceiver`): one real render shows the semaphore and a render coordinator being
// created and the coordinator's snapshots moving through `rendering`, with bytes sent as their
// length; the proxy then closes without hanging. A function or observer is used as given, an
// unreachable relay is refused before any actor starts, and the spawned `audio-proxy inspect`
// prints its URLs, streams to its relay and exits 0 on SIGTERM.

import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { networkInterfaces } from 'node:os';
import { createWebSocketReceiver, type StatelyInspectionEvent } from '@statelyai/inspect';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import type { InspectionEvent } from 'xstate';
import { loadConfig } from '../src/config/index.js';
import {
  type InspectorRelay,
  openInspection,
  plain,
  scrubber,
  startInspectorRelay,
} from '../src/inspect.js';
import { type AudioProxy, createAudioProxy } from '../src/proxy.js';
import { startBin } from './binProcess.js';
import { makeFixtures } from './fixtures/audio.js';
import { get, waitFor } from './integration/harness.js';
import { freePort } from './ports.js';

const silent = pino({ level: 'silent' });

async function proxyOver(inspect: Parameters<typeof createAudioProxy>[0]['inspect']) {
  const fixtures = await makeFixtures();
  return { ...(await proxyIn(fixtures.dir, inspect)), root: fixtures.dir };
}

async function proxyIn(root: string, inspect: Parameters<typeof createAudioProxy>[0]['inspect']) {
  const config = loadConfig({
    AP_LOCAL_ROOT: root,
    AP_ALLOW_INSECURE: '1',
    AP_LOG_LEVEL: 'error',
    AP_MAX_CONCURRENCY: '1',
  });
  const proxy = await createAudioProxy({ config, logger: silent, inspect });
  const { url } = await proxy.listen({ host: '127.0.0.1', port: 0, metricsPort: 0 });
  return { proxy, url };
}

/** Resolves when `promise` does, or with 'timeout' after `ms`. */
function within<T>(promise: Promise<T>, ms: number): Promise<T | 'timeout'> {
  return Promise.race([promise, new Promise<'timeout'>((r) => setTimeout(r, ms, 'timeout'))]);
}

describe('inspect: { url } of a relay', () => {
  let relay: InspectorRelay | undefined;
  let proxy: AudioProxy | undefined;
  afterAll(async () => {
    await proxy?.close();
    relay?.stop();
  });

  it('streams the semaphore and a coordinator moving through rendering; close does not hang', async () => {
    relay = await startInspectorRelay({ port: 0 });
    expect(relay.port).toBeGreaterThan(0);
    const seen: StatelyInspectionEvent[] = [];
    createWebSocketReceiver({ server: relay.wsUrl }).subscribe((e) => seen.push(e));

    const started = await proxyOver({ url: relay.wsUrl });
    proxy = started.proxy;
    const r = await get(started.url, '/insecure/f:mp3/plain/local://stereo.wav');
    expect(r.status).toBe(200);
    expect(r.body.length).toBeGreaterThan(1000);

    const actorNames = () =>
      new Set(seen.flatMap((e) => (e.type === '@xstate.actor' ? [e.name] : [])));
    const actorNamed = (name: string) =>
      seen.find((e) => e.type === '@xstate.actor' && e.name === name);
    await waitFor(
      () => actorNamed('semaphore') !== undefined && actorNamed('renderCoordinator') !== undefined,
      10_000,
    );
    // Every root the proxy starts, and the per-request ones, reach the viewer.
    expect([...actorNames()]).toEqual(
      expect.arrayContaining([
        'semaphore',
        'probeLimiter',
        'readiness',
        'processSupervisor',
        'probeCoordinator',
        'renderCoordinator',
        'delivery',
      ]),
    );
    const coordinator = actorNamed('renderCoordinator')!;
    // The definition travels with the actor: the viewer draws the chart from it.
    expect(JSON.parse((coordinator as { definition: string }).definition).id).toBe(
      'renderCoordinator',
    );
    const valuesOf = (sessionId: string) =>
      seen
        .filter((e) => e.type === '@xstate.snapshot' && e.sessionId === sessionId)
        .map((e) => (e as { snapshot: { value?: unknown } }).snapshot.value)
        .map((v) => (typeof v === 'object' && v !== null ? Object.keys(v)[0] : v));
    await waitFor(() => valuesOf(coordinator.sessionId).includes('completed'), 10_000);
    const values = valuesOf(coordinator.sessionId);
    expect(values).toContain('rendering');
    expect(values.indexOf('rendering')).toBeLessThan(values.indexOf('completed'));
    // The Render is the coordinator's child, inspected through the same system.
    expect(
      seen.some(
        (e) =>
          e.type === '@xstate.actor' &&
          (e as { parentId?: string }).parentId === coordinator.sessionId,
      ),
    ).toBe(true);
    // Chunks arrive as their length, not as arrays of numbers.
    const chunk = seen.find(
      (e) =>
        e.type === '@xstate.event' &&
        (e as { event: { type: string } }).event.type === 'render.chunk',
    ) as { event: { data: unknown } } | undefined;
    expect(chunk?.event.data).toEqual({ bytes: expect.any(Number) });
    // The request's delivery streamed, then ended in `done` with its response.
    const delivery = actorNamed('delivery')!;
    await waitFor(() => valuesOf(delivery.sessionId).includes('done'), 10_000);
    expect(valuesOf(delivery.sessionId)).toContain('streaming');

    expect(await within(proxy.close(), 20_000)).not.toBe('timeout');
    proxy = undefined;
  }, 30_000);
});

/** A non-loopback IPv4 address of this host, if it has one. */
function externalIPv4(): string | undefined {
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return undefined;
}

/**
 * A raw WebSocket handshake with the given headers: 101 if the relay upgraded it (the socket is
 * closed at once), else the status it refused with; 'refused' if nothing listens.
 */
function handshake(host: string, port: number, headers: Record<string, string> = {}) {
  return new Promise<number | 'refused'>((resolve) => {
    const req = request({
      host,
      port,
      path: '/',
      headers: {
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': randomBytes(16).toString('base64'),
        ...headers,
      },
    });
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      resolve(res.statusCode ?? 0);
    });
    req.on('response', (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', () => resolve('refused'));
    req.end();
  });
}

describe('the relay is a closed door', () => {
  let relay: InspectorRelay | undefined;
  let proxy: AudioProxy | undefined;
  afterAll(async () => {
    await proxy?.close();
    relay?.stop();
  });

  it('listens on loopback only, by default', async () => {
    relay = await startInspectorRelay({ port: 0 });
    expect(await handshake('127.0.0.1', relay.port)).toBe(101);
    const outside = externalIPv4();
    if (outside) expect(await handshake(outside, relay.port)).toBe('refused');
    relay.stop();
    relay = undefined;
  });

  it("refuses a foreign page's Origin; admits its own page and non-browser clients", async () => {
    relay = await startInspectorRelay({ port: 0 });
    const p = relay.port;
    for (const origin of [
      'https://evil.example',
      'http://evil.example:8080',
      `http://attacker.localhost.evil.example:${p}`,
      'null',
      `http://localhost:${p + 1}`,
      `https://localhost:${p}`,
    ]) {
      expect(await handshake('127.0.0.1', p, { origin }), origin).toBe(403);
    }
    // DNS rebinding: a foreign name resolving to 127.0.0.1 is refused by its Host, too.
    expect(await handshake('127.0.0.1', p, { host: `evil.example:${p}` })).toBe(403);
    for (const origin of [`http://localhost:${p}`, `http://127.0.0.1:${p}`, `http://[::1]:${p}`]) {
      expect(await handshake('127.0.0.1', p, { origin }), origin).toBe(101);
    }
    expect(await handshake('127.0.0.1', p)).toBe(101); // no Origin: a terminal or the proxy
    relay.stop();
    relay = undefined;
  });

  it('what it relays and replays names no absolute filesystem path', async () => {
    relay = await startInspectorRelay({ port: 0 });
    const fixtures = await makeFixtures();
    const started = await proxyIn(fixtures.dir, { url: relay.wsUrl });
    proxy = started.proxy;
    const ok = await get(started.url, '/insecure/f:mp3/t:0:1/plain/local://stereo.wav');
    expect(ok.status).toBe(200);
    await get(started.url, '/insecure/info/plain/local://stereo.wav');
    // A viewer joining afterwards gets the replay.
    const replayed: string[] = [];
    createWebSocketReceiver({ server: relay.wsUrl }).subscribe((e) => {
      replayed.push(JSON.stringify(e));
    });
    await waitFor(() => replayed.some((e) => e.includes('renderCoordinator')), 10_000);
    await new Promise((r) => setTimeout(r, 200));
    const all = replayed.join('\n');
    expect(all).toContain('stereo.wav'); // the witness: sources are named
    expect(all).not.toContain(fixtures.dir);
    expect(all).not.toContain(process.cwd());
    await proxy.close();
    proxy = undefined;
  }, 30_000);
});

describe('inspect: other forms', () => {
  it('a function or an observer is handed to the actors as it is', async () => {
    const fn = (_e: InspectionEvent) => {};
    const observer = { next: fn };
    expect((await openInspection(fn)).observer).toBe(fn);
    expect((await openInspection(observer)).observer).toBe(observer);
  });

  it('copies contexts as bounded plain data: bytes by length, refs by id, maps as objects', () => {
    const ref = { id: 'semaphore', sessionId: 'x:1', send: () => {} };
    const copied = plain({
      backlog: [Buffer.alloc(65_536)],
      holders: new Map([['a', { since: 1 }]]),
      waiters: new Set(['b']),
      semaphore: ref,
      limits: function limits() {},
      long: Array.from({ length: 80 }, (_, i) => i),
      deep: { a: { b: { c: { d: { e: { f: { g: 1 } } } } } } },
    }) as Record<string, unknown>;
    expect(copied.backlog).toEqual([{ bytes: 65_536 }]);
    expect(copied.holders).toEqual({ a: { since: 1 } });
    expect(copied.waiters).toEqual(['b']);
    expect(copied.semaphore).toEqual({ xstate$$type: 1, id: 'semaphore' });
    expect(copied.limits).toEqual({ type: 'limits' });
    expect((copied.long as unknown[]).length).toBe(51);
    expect((copied.long as unknown[])[50]).toBe('…');
    expect(JSON.stringify(copied.deep)).toContain('"…"');
  });

  it('scrubs directory prefixes at path boundaries, the longest first, keys and messages too', () => {
    const scrub = scrubber([
      ['/srv', '<home>'],
      ['/srv/music/', '<AP_LOCAL_ROOT>'],
    ])!;
    const copied = plain(
      {
        path: '/srv/music/a.flac',
        argv: ['-i', 'file:/srv/music/b c.wav', '/srvx/keep', '/srv'],
        '/srv/music/key': new Error('ENOENT: /srv/music/gone.wav'),
      },
      6,
      scrub,
    );
    expect(copied).toEqual({
      path: '<AP_LOCAL_ROOT>/a.flac',
      argv: ['-i', 'file:<AP_LOCAL_ROOT>/b c.wav', '/srvx/keep', '<home>'],
      '<AP_LOCAL_ROOT>/key': { name: 'Error', message: 'ENOENT: <AP_LOCAL_ROOT>/gone.wav' },
    });
    expect(scrubber([])).toBeUndefined();
  });

  it('an unreachable relay is refused with ERR_INSPECTOR_UNREACHABLE; bad options throw', async () => {
    const port = await freePort();
    await expect(openInspection({ url: `ws://127.0.0.1:${port}` })).rejects.toMatchObject({
      code: 'ERR_INSPECTOR_UNREACHABLE',
    });
    await expect(openInspection({ url: 'http://127.0.0.1:1' })).rejects.toThrow(TypeError);
    await expect(openInspection(42 as never)).rejects.toThrow(TypeError);
    expect((await openInspection(undefined)).observer).toBeUndefined();
  });
});

describe('audio-proxy inspect (spawned)', () => {
  let child: ChildProcess | undefined;
  afterAll(() => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
  });

  it('prints the relay and proxy URLs, streams to the relay and exits 0 on SIGTERM', async () => {
    const [port, metricsPort, inspectorPort] = [
      await freePort(),
      await freePort(),
      await freePort(),
    ];
    const bin = startBin(['inspect', '--inspector-port', String(inspectorPort)], {
      ...process.env,
      AP_PORT: String(port),
      AP_METRICS_PORT: String(metricsPort),
    });
    child = bin.child;
    const { exited } = bin;
    const out = () => bin.output();
    await waitFor(() => out().includes('Ctrl-C to stop'), 60_000, 50);
    expect(out()).toContain(`ws://127.0.0.1:${inspectorPort}`);
    expect(out()).toContain(`http://localhost:${inspectorPort}`);
    expect(out()).toContain(`http://127.0.0.1:${port}`);

    // A viewer joining late still gets the boot (the relay replays its recent events).
    const names = new Set<string>();
    createWebSocketReceiver({ server: `ws://127.0.0.1:${inspectorPort}` }).subscribe((e) => {
      if (e.type === '@xstate.actor') names.add(e.name);
    });
    await waitFor(() => names.has('semaphore'), 10_000);

    child.kill('SIGTERM');
    expect(await within(exited, 20_000)).toBe(0);
  }, 90_000);
});
