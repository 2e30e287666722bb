// The Render chart: pure transitions plan the right commands (watchdog armed at start, acks and
// cancel forwarded to the worker, cancels parked until the kill is confirmed); with a provided
// fake worker the parent hears exactly one terminal event, chunks during a cancel are dropped,
// every parked cancel is answered after `worker.dead`, and the watchdog (fake timers) kills
// from the main thread only while ffmpeg has not exited. Then the real thing through a real
// pool: byte-exact output, the cancel barrier (ESRCH right after the reply), a dead worker.

import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  type AnyActorLogic,
  type AnyActorRef,
  createActor,
  fromCallback,
  initialTransition,
  setup,
  transition,
} from 'xstate';
import { call } from '../../../src/actors/call.js';
import type {
  CancelReport,
  RenderWorkerCommand,
  RenderWorkerEvent,
  RenderWorkerInput,
} from '../../../src/core/worker.js';
import {
  BATCH_BYTES,
  HIGH_WATER_BYTES,
  KILL_WAIT_MS,
  TERM_GRACE_MS,
} from '../../../src/core/worker.js';
import {
  type CancelReply,
  type RenderInput,
  type RenderParentEvent,
  renderMachine,
  WATCHDOG_SLACK_MS,
} from '../../../src/machines/render.js';
import { renderLogic } from '../../../src/services/renderLogic.js';
import { isAlive } from '../../../src/workers/liveness.js';
import { createWorkerPool, type WorkerPool } from '../../../src/workers/pool.js';
import {
  direct,
  expectNoSurvivors,
  expectReaped,
  fake,
  seenPids,
  sineArgv,
} from '../../workers/harness.js';

const SPEC = { executable: 'ffmpeg', argv: ['-version'], timeoutMs: 10_000 };
const NO_POOL = {} as WorkerPool; // the fake worker never touches it
const WATCHDOG_MS = SPEC.timeoutMs + TERM_GRACE_MS + KILL_WAIT_MS + WATCHDOG_SLACK_MS;
const DEAD: CancelReport = { pid: 41, by: 'worker', outcome: 'terminated' };

/** A worker actor the test drives: it records commands and sends whatever the test says. */
function fakeWorker() {
  const commands: RenderWorkerCommand[] = [];
  let sendBack: ((event: RenderWorkerEvent) => void) | null = null;
  let stopped = false;
  const logic = fromCallback<RenderWorkerCommand, RenderWorkerInput, RenderWorkerEvent>(
    ({ sendBack: send, receive }) => {
      sendBack = send;
      receive((command) => commands.push(command));
      return () => {
        stopped = true;
      };
    },
  );
  return {
    logic,
    commands,
    send: (event: RenderWorkerEvent) => sendBack!(event),
    stopped: () => stopped,
  };
}

/** A parent that invokes the Render, records what it hears, and (optionally) acks chunks. */
function harness(render: AnyActorLogic, input: RenderInput, autoAck = true) {
  const heard: RenderParentEvent[] = [];
  const parent = setup({ actors: { render } }).createMachine({
    invoke: { id: 'render', src: 'render', input },
    on: {
      '*': {
        actions: ({ event, self }) => {
          if (!event.type.startsWith('render.')) return;
          const message = event as RenderParentEvent;
          heard.push(message);
          if (autoAck && message.type === 'render.chunk') {
            self.getSnapshot().children.render?.send({ type: 'ack', bytes: message.data.length });
          }
        },
      },
    },
  });
  const actor = createActor(parent).start();
  const child = actor.getSnapshot().children.render as AnyActorRef;
  const types = () => heard.map((e) => e.type);
  return { actor, child, heard, types };
}

describe('pure transitions', () => {
  const input: RenderInput = { spec: SPEC, pool: NO_POOL };

  it('starts by spawning the worker and arming the watchdog for timeout + kill budget + slack', () => {
    const [snapshot, actions] = initialTransition(renderMachine, input);
    expect(snapshot.value).toEqual({ active: { timed: 'starting' } });
    expect(actions.map((a) => a.type)).toEqual(['xstate.spawnChild', 'xstate.raise']);
    expect((actions[1]!.params as { delay: number }).delay).toBe(WATCHDOG_MS);
  });

  it('forwards acks to the worker; a cancel parks its caller and asks the worker', () => {
    const [s0] = initialTransition(renderMachine, input);
    const [s1, ackActions] = transition(renderMachine, s0, { type: 'ack', bytes: 10 });
    expect(s1.value).toEqual({ active: { timed: 'starting' } });
    expect(ackActions.map((a) => a.type)).toEqual(['xstate.sendTo']);
    expect((ackActions[0]!.params as { event: unknown }).event).toEqual({ type: 'ack', bytes: 10 });

    const [s2, cancelActions] = transition(renderMachine, s1, { type: 'cancel', callId: 7 });
    expect(s2.value).toEqual({ active: 'cancelling' });
    expect(s2.context.parked).toEqual([{ callId: 7 }]);
    const sent = cancelActions.filter((a) => a.type === 'xstate.sendTo');
    expect(sent.map((a) => (a.params as { event: unknown }).event)).toEqual([{ type: 'cancel' }]);
    // Leaving `timed` cancels the watchdog.
    expect(cancelActions.map((a) => a.type)).toContain('xstate.cancel');

    const [s3, again] = transition(renderMachine, s2, { type: 'cancel', callId: 8 });
    expect(s3.value).toEqual({ active: 'cancelling' });
    expect(s3.context.parked.map((p) => p.callId)).toEqual([7, 8]);
    expect(again.filter((a) => a.type === 'xstate.sendTo')).toHaveLength(0); // asked once
  });

  it("ffmpeg's exit disarms the watchdog: draining is the consumer's pace", () => {
    const [s0] = initialTransition(renderMachine, input);
    const [s1, actions] = transition(renderMachine, s0, { type: 'worker.exited', exitStatus: 0 });
    expect(s1.value).toEqual({ active: 'draining' });
    expect(actions.map((a) => a.type)).toEqual(['xstate.cancel']);
  });
});

describe('with a provided worker', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('forwards pid, chunks and done in order, and acks reach the worker', () => {
    const worker = fakeWorker();
    const h = harness(renderMachine.provide({ actors: { renderWorker: worker.logic } }), {
      spec: SPEC,
      pool: NO_POOL,
    });
    worker.send({ type: 'worker.pid', pid: 41 });
    worker.send({ type: 'worker.chunk', data: Buffer.from('abc') });
    worker.send({ type: 'worker.chunk', data: Buffer.from('de') });
    worker.send({ type: 'worker.exited', exitStatus: 0 });
    worker.send({
      type: 'worker.settled',
      outcome: { type: 'done', exitStatus: 0, bytes: 5, stderrTail: '' },
    });
    expect(h.types()).toEqual(['render.pid', 'render.chunk', 'render.chunk', 'render.done']);
    expect(h.heard.at(-1)).toEqual({ type: 'render.done', info: { exitStatus: 0, bytes: 5 } });
    expect(worker.commands).toEqual([
      { type: 'ack', bytes: 3 },
      { type: 'ack', bytes: 2 },
    ]);
    expect(h.child.getSnapshot().status).toBe('done');
    expect(worker.stopped()).toBe(true);
  });

  it('a failed task becomes render.error with its class, exit status and stderr tail', () => {
    const worker = fakeWorker();
    const h = harness(renderMachine.provide({ actors: { renderWorker: worker.logic } }), {
      spec: SPEC,
      pool: NO_POOL,
    });
    worker.send({
      type: 'worker.settled',
      outcome: {
        type: 'error',
        class: 'undecodable',
        exitStatus: 1,
        stderrTail: 'Invalid data found when processing input',
        bytes: 0,
      },
    });
    expect(h.heard).toEqual([
      {
        type: 'render.error',
        failure: {
          class: 'undecodable',
          exitStatus: 1,
          stderrTail: 'Invalid data found when processing input',
        },
      },
    ]);
  });

  it('cancel: chunks are dropped, every parked call is answered after worker.dead, once', async () => {
    const worker = fakeWorker();
    const h = harness(renderMachine.provide({ actors: { renderWorker: worker.logic } }), {
      spec: SPEC,
      pool: NO_POOL,
    });
    worker.send({ type: 'worker.pid', pid: 41 });
    let answered = 0;
    const first = call<CancelReply>(h.child, { type: 'cancel' }).then((r) => {
      answered++;
      return r;
    });
    const second = call<CancelReply>(h.child, { type: 'cancel' }).then((r) => {
      answered++;
      return r;
    });
    worker.send({ type: 'worker.chunk', data: Buffer.from('late') });
    worker.send({
      type: 'worker.settled',
      outcome: { type: 'error', class: 'cancelled', exitStatus: null, stderrTail: '', bytes: 0 },
    });
    await Promise.resolve();
    expect(answered).toBe(0); // not before the kill is confirmed
    expect(worker.commands).toEqual([{ type: 'cancel' }]);
    worker.send({ type: 'worker.dead', report: DEAD });
    expect(await first).toEqual({ type: 'dead', ...DEAD });
    expect(await second).toEqual({ type: 'dead', ...DEAD });
    expect(h.types()).toEqual(['render.pid', 'render.cancelled']);
    expect(h.child.getSnapshot().status).toBe('done');
  });

  it('a cast cancel (no callId) still ends in render.cancelled after the kill', () => {
    const worker = fakeWorker();
    const h = harness(renderMachine.provide({ actors: { renderWorker: worker.logic } }), {
      spec: SPEC,
      pool: NO_POOL,
    });
    h.child.send({ type: 'cancel' });
    expect(h.types()).toEqual([]);
    worker.send({ type: 'worker.dead', report: DEAD });
    expect(h.heard).toEqual([{ type: 'render.cancelled', report: DEAD }]);
  });

  it('the watchdog kills from the main thread when the worker goes silent', () => {
    vi.useFakeTimers();
    const worker = fakeWorker();
    const h = harness(renderMachine.provide({ actors: { renderWorker: worker.logic } }), {
      spec: SPEC,
      pool: NO_POOL,
    });
    worker.send({ type: 'worker.pid', pid: 41 });
    vi.advanceTimersByTime(WATCHDOG_MS - 1);
    expect(worker.commands).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(worker.commands).toEqual([{ type: 'kill', reason: 'timeout' }]);
    worker.send({ type: 'worker.chunk', data: Buffer.from('ignored') });
    worker.send({ type: 'worker.dead', report: { ...DEAD, by: 'main' } });
    expect(h.types()).toEqual(['render.pid', 'render.error']);
    const error = h.heard[1] as Extract<RenderParentEvent, { type: 'render.error' }>;
    expect(error.failure.class).toBe('timeout');
    expect(error.failure.detail).toMatch(/killed from the main thread/);
  });

  it('after ffmpeg exited, no watchdog: a slow drain is never killed', () => {
    vi.useFakeTimers();
    const worker = fakeWorker();
    const h = harness(
      renderMachine.provide({ actors: { renderWorker: worker.logic } }),
      { spec: SPEC, pool: NO_POOL },
      false,
    );
    worker.send({ type: 'worker.pid', pid: 41 });
    worker.send({ type: 'worker.exited', exitStatus: 0 });
    vi.advanceTimersByTime(WATCHDOG_MS * 10);
    expect(worker.commands).toEqual([]);
    worker.send({
      type: 'worker.settled',
      outcome: { type: 'done', exitStatus: 0, bytes: 0, stderrTail: '' },
    });
    expect(h.types()).toEqual(['render.pid', 'render.done']);
  });

  it('stopping the Render mid-task stops the worker actor (which detaches)', () => {
    const worker = fakeWorker();
    const h = harness(renderMachine.provide({ actors: { renderWorker: worker.logic } }), {
      spec: SPEC,
      pool: NO_POOL,
    });
    h.actor.stop();
    expect(worker.stopped()).toBe(true);
  });
});

describe('through a real pool and real ffmpeg', () => {
  let pool: WorkerPool;

  beforeAll(async () => {
    pool = createWorkerPool({ name: 'render-machine', size: 1 });
    await pool.start();
  });

  afterAll(async () => {
    await pool.destroy();
  });

  afterEach(() => {
    expect(pool.queueSize).toBe(0);
    expectNoSurvivors();
  });

  function pidOf(heard: RenderParentEvent[]): number {
    const event = heard.find((e) => e.type === 'render.pid');
    if (event?.type !== 'render.pid') throw new Error('no pid reported');
    seenPids.add(event.pid);
    return event.pid;
  }

  function finished(h: ReturnType<typeof harness>): Promise<void> {
    return new Promise((resolve) => {
      h.child.subscribe({ complete: () => resolve() });
    });
  }

  it('the parent receives output byte-identical to a direct run, then done', async () => {
    const argv = sineArgv(4);
    const h = harness(renderLogic, {
      spec: { executable: 'ffmpeg', argv, timeoutMs: 30_000 },
      pool,
    });
    await finished(h);
    const expected = await direct('ffmpeg', argv);
    const pid = pidOf(h.heard);
    expect(h.types()[0]).toBe('render.pid');
    expect(h.types().at(-1)).toBe('render.done');
    const body = Buffer.concat(h.heard.flatMap((e) => (e.type === 'render.chunk' ? [e.data] : [])));
    expect(body.equals(expected)).toBe(true);
    expect(h.heard.at(-1)).toEqual({
      type: 'render.done',
      info: { exitStatus: 0, bytes: expected.length },
    });
    expectReaped(pid);
  });

  it('a parent that never acks holds the render at the window; acks release it byte-exact', async () => {
    const argv = sineArgv(20, 's16le');
    const expected = await direct('ffmpeg', argv);
    const h = harness(
      renderLogic,
      { spec: { executable: 'ffmpeg', argv, timeoutMs: 30_000 }, pool },
      false,
    );
    const received = () =>
      h.heard.reduce((n, e) => n + (e.type === 'render.chunk' ? e.data.length : 0), 0);
    await vi.waitFor(() => expect(received()).toBeGreaterThanOrEqual(HIGH_WATER_BYTES));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(received()).toBeLessThanOrEqual(HIGH_WATER_BYTES + BATCH_BYTES);
    expect(h.types()).not.toContain('render.done');
    let acked = 0;
    const acker = setInterval(() => {
      const now = received();
      if (now > acked) h.child.send({ type: 'ack', bytes: now - acked });
      acked = now;
    }, 2);
    await finished(h);
    clearInterval(acker);
    pidOf(h.heard);
    const body = Buffer.concat(h.heard.flatMap((e) => (e.type === 'render.chunk' ? [e.data] : [])));
    expect(body.equals(expected)).toBe(true);
    expect(h.types().at(-1)).toBe('render.done');
  });

  it('the cancel call answers only once ffmpeg is dead: ESRCH right after the reply', async () => {
    const h = harness(renderLogic, {
      spec: { executable: fake('ignore-term.sh'), argv: [], timeoutMs: 30_000 },
      pool,
    });
    await vi.waitFor(() => expect(h.types()).toContain('render.chunk')); // the trap is set
    const pid = pidOf(h.heard);
    const t0 = performance.now();
    const reply = await call<CancelReply>(h.child, { type: 'cancel' }, { timeout: 15_000 });
    expectReaped(pid);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(TERM_GRACE_MS);
    expect(reply).toEqual({ type: 'dead', pid, by: 'worker', outcome: 'killed' });
    expect(h.types().at(-1)).toBe('render.cancelled');
    expect(h.types().filter((t) => t === 'render.cancelled' || t === 'render.error')).toHaveLength(
      1,
    );
  });

  it('a worker that dies mid-render: render.error render_failed, and ffmpeg is dead', async () => {
    const h = harness(renderLogic, {
      spec: { executable: fake('hang.sh'), argv: [], timeoutMs: 30_000 },
      pool,
    });
    await vi.waitFor(() => expect(h.types()).toContain('render.pid'));
    const pid = pidOf(h.heard);
    await Promise.all(pool.threads.map((thread) => thread.terminate()));
    await finished(h);
    const last = h.heard.at(-1);
    expect(last?.type).toBe('render.error');
    expect(last?.type === 'render.error' && last.failure.class).toBe('render_failed');
    // Killed from the main thread; a zombie at most, since its reaper thread is gone.
    expect(isAlive(pid)).toBe(false);
  });

  it('timeout: render.error timeout and the process is gone', async () => {
    const h = harness(renderLogic, {
      spec: { executable: fake('hang.sh'), argv: [], timeoutMs: 100 },
      pool,
    });
    await finished(h);
    const pid = pidOf(h.heard);
    expect(h.heard.at(-1)).toMatchObject({ type: 'render.error', failure: { class: 'timeout' } });
    expectReaped(pid);
  });
});
