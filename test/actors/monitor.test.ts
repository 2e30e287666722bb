// watch/watchInto against every real source of "gone": an HTTP response whose client hangs up
// (a real server on port 0), an XState actor reaching done/error/stopped, an AbortSignal, a
// worker thread and a child process exiting. Each delivers exactly one reason, even when
// several sources fire; an already-gone target is reported on a microtask, never re-entrantly;
// Unwatch is idempotent, final, and detaches every listener.
import { spawn } from 'node:child_process';
import { getEventListeners, once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { assign, createActor, setup } from 'xstate';
import { type GoneEvent, type GoneReason, watch, watchInto } from '../../src/actors/monitor.js';

const participant = setup({
  types: {} as { events: { type: 'finish' } | { type: 'boom' } },
  actions: {
    explode: () => {
      throw new Error('participant bug');
    },
  },
}).createMachine({
  initial: 'live',
  states: {
    live: { on: { finish: 'over', boom: { actions: 'explode' } } },
    over: { type: 'final' },
  },
  output: () => 'result',
});

const watcherMachine = setup({
  types: {} as { context: { gone: GoneEvent[] }; events: GoneEvent },
}).createMachine({
  context: { gone: [] },
  on: { gone: { actions: assign({ gone: ({ context, event }) => [...context.gone, event] }) } },
});

const flush = async () => {
  for (let i = 0; i < 3; i++) await Promise.resolve();
};

const servers: http.Server[] = [];
afterEach(() => {
  for (const server of servers.splice(0)) server.close();
});

/** A server whose single request never gets an answer; resolves with the response object. */
async function hangingRequest(): Promise<{
  res: http.ServerResponse;
  req: http.IncomingMessage;
  hangUp: () => void;
}> {
  let captured!: (v: { res: http.ServerResponse; req: http.IncomingMessage }) => void;
  const arrived = new Promise<{ res: http.ServerResponse; req: http.IncomingMessage }>((r) => {
    captured = r;
  });
  const server = http.createServer((req, res) => captured({ req, res }));
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const client = http.get({ host: '127.0.0.1', port, path: '/' });
  client.on('error', () => {});
  const { req, res } = await arrived;
  return { req, res, hangUp: () => client.destroy() };
}

describe('watch: AbortSignal', () => {
  it('reports an abort once, with its reason', () => {
    const controller = new AbortController();
    const gone = vi.fn();
    watch(controller.signal, gone);
    expect(gone).not.toHaveBeenCalled();
    controller.abort('bye');
    expect(gone.mock.calls).toEqual([[{ type: 'aborted', reason: 'bye' }]]);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  it('reports an already-aborted signal on a microtask, not inside watch()', async () => {
    const controller = new AbortController();
    controller.abort('early');
    let inside = true;
    const seen: Array<{ reason: GoneReason; inside: boolean }> = [];
    watch(controller.signal, (reason) => seen.push({ reason, inside }));
    inside = false;
    expect(seen).toEqual([]);
    await Promise.resolve();
    expect(seen).toEqual([{ reason: { type: 'aborted', reason: 'early' }, inside: false }]);
  });

  it('delivers nothing when unwatched before the microtask runs', async () => {
    const controller = new AbortController();
    controller.abort();
    const gone = vi.fn();
    const unwatch = watch(controller.signal, gone);
    unwatch();
    await flush();
    expect(gone).not.toHaveBeenCalled();
  });

  it('is final and idempotent after unwatch, and detaches its listener', () => {
    const controller = new AbortController();
    const gone = vi.fn();
    const unwatch = watch(controller.signal, gone);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
    unwatch();
    unwatch();
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    controller.abort();
    expect(gone).not.toHaveBeenCalled();
  });
});

describe('watch: HTTP', () => {
  it('reports the response closing when the client hangs up, once', async () => {
    const { res, hangUp } = await hangingRequest();
    const gone = vi.fn();
    watch(res, gone);
    hangUp();
    await once(res, 'close');
    await flush();
    expect(gone.mock.calls).toEqual([[{ type: 'closed' }]]);
    expect(res.listenerCount('close')).toBe(0);
  });

  it('reports a response that already closed, on a microtask', async () => {
    const { res, hangUp } = await hangingRequest();
    hangUp();
    await once(res, 'close');
    const gone = vi.fn();
    watch(res, gone);
    expect(gone).not.toHaveBeenCalled();
    await Promise.resolve();
    expect(gone.mock.calls).toEqual([[{ type: 'closed' }]]);
  });

  it('reports one reason when a response closes and its abort signal fires too', async () => {
    const { req, res, hangUp } = await hangingRequest();
    const controller = new AbortController();
    const gone = vi.fn();
    watch([res, req, controller.signal], gone);
    hangUp();
    await once(res, 'close');
    controller.abort();
    await flush();
    expect(gone).toHaveBeenCalledTimes(1);
    expect(gone.mock.calls[0]![0]).toEqual({ type: 'closed' });
    expect(res.listenerCount('close')).toBe(0);
    expect(req.listenerCount('close')).toBe(0);
  });
});

describe('watch: XState actors', () => {
  it('reports done with the output', () => {
    const actor = createActor(participant).start();
    const gone = vi.fn();
    watch(actor, gone);
    actor.send({ type: 'finish' });
    expect(gone.mock.calls).toEqual([[{ type: 'done', output: 'result' }]]);
  });

  it('reports error with the thrown error', () => {
    const actor = createActor(participant).start();
    const gone = vi.fn();
    watch(actor, gone);
    actor.send({ type: 'boom' });
    expect(gone).toHaveBeenCalledTimes(1);
    expect(gone.mock.calls[0]![0]).toMatchObject({
      type: 'error',
      error: { message: 'participant bug' },
    });
  });

  it('reports stopped when stopped from outside', () => {
    const actor = createActor(participant).start();
    const gone = vi.fn();
    watch(actor, gone);
    actor.stop();
    actor.stop();
    expect(gone.mock.calls).toEqual([[{ type: 'stopped' }]]);
  });

  it.each([
    ['stopped', (a: ReturnType<typeof createActor<typeof participant>>) => a.stop()],
    ['done', (a: ReturnType<typeof createActor<typeof participant>>) => a.send({ type: 'finish' })],
  ])('reports an actor already %s on a microtask', async (type, end) => {
    const actor = createActor(participant).start();
    end(actor);
    const gone = vi.fn();
    watch(actor, gone);
    expect(gone).not.toHaveBeenCalled();
    await Promise.resolve();
    expect(gone).toHaveBeenCalledTimes(1);
    expect(gone.mock.calls[0]![0].type).toBe(type);
  });

  it('delivers nothing after unwatch', () => {
    const actor = createActor(participant).start();
    const gone = vi.fn();
    const unwatch = watch(actor, gone);
    unwatch();
    actor.stop();
    expect(gone).not.toHaveBeenCalled();
  });
});

describe('watch: threads and processes', () => {
  it('reports a worker exit with its code', async () => {
    const worker = new Worker('process.exit(3)', { eval: true });
    const gone = vi.fn();
    watch(worker, gone);
    await once(worker, 'exit');
    expect(gone.mock.calls).toEqual([[{ type: 'exit', code: 3, signal: null }]]);
  });

  it('reports a worker that exited before the watch', async () => {
    const worker = new Worker('0', { eval: true });
    await once(worker, 'exit');
    const gone = vi.fn();
    watch(worker, gone);
    await Promise.resolve();
    expect(gone.mock.calls).toEqual([[{ type: 'exit', code: null, signal: null }]]);
  });

  it('reports a child process exit once, though exit and close both fire', async () => {
    const child = spawn('sh', ['-c', 'exit 4'], { stdio: 'ignore' });
    const gone = vi.fn();
    watch(child, gone);
    await once(child, 'close');
    expect(gone.mock.calls).toEqual([[{ type: 'exit', code: 4, signal: null }]]);
  });

  it('reports a killed child with its signal', async () => {
    const child = spawn('sleep', ['30'], { stdio: 'ignore' });
    const gone = vi.fn();
    watch(child, gone);
    child.kill('SIGTERM');
    await once(child, 'close');
    expect(gone.mock.calls).toEqual([[{ type: 'exit', code: null, signal: 'SIGTERM' }]]);
  });

  it('reports a child that never spawned', async () => {
    const child = spawn('/nonexistent/audio-proxy-binary', { stdio: 'ignore' });
    child.on('error', () => {});
    const gone = vi.fn();
    watch(child, gone);
    await new Promise((resolve) => child.on('close', resolve)); // once() would reject on 'error'
    expect(gone).toHaveBeenCalledTimes(1);
    expect(gone.mock.calls[0]![0]).toMatchObject({ type: 'exit', signal: null });
  });
});

describe('watchInto', () => {
  it('sends one gone event with the participant id to the watcher', () => {
    const watcher = createActor(watcherMachine).start();
    const controller = new AbortController();
    const participantActor = createActor(participant).start();
    watchInto(watcher, 'p1', [controller.signal, participantActor]);
    controller.abort('left');
    participantActor.stop();
    expect(watcher.getSnapshot().context.gone).toEqual([
      { type: 'gone', id: 'p1', reason: { type: 'aborted', reason: 'left' } },
    ]);
  });

  it('reports an already-gone participant on a microtask', async () => {
    const watcher = createActor(watcherMachine).start();
    const controller = new AbortController();
    controller.abort();
    watchInto(watcher, 'late', controller.signal);
    expect(watcher.getSnapshot().context.gone).toEqual([]);
    await Promise.resolve();
    expect(watcher.getSnapshot().context.gone.map((e) => e.id)).toEqual(['late']);
  });

  it('drops the event silently when the watcher has stopped', () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const watcher = createActor(watcherMachine).start();
    const controller = new AbortController();
    watchInto(watcher, 'p', controller.signal);
    watcher.stop();
    controller.abort();
    expect(warn).not.toHaveBeenCalled();
    warn.mockRestore();
  });
});

describe('watch: boundaries', () => {
  it('throws TypeError for something it cannot watch, attaching nothing', () => {
    const controller = new AbortController();
    expect(() => watch({} as never, () => {})).toThrow(TypeError);
    expect(() => watch([controller.signal, 42 as never], () => {})).toThrow(TypeError);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });
});
