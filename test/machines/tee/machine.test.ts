/**
 * The Tee chart, walked with a recording writer and fake timers: chunks are forwarded in order
 * and `done` ends the write; the silence deadline restarts on every message; `error`, the
 * coordinator going away and silence abort (stopping the writer); `finishing` ignores the
 * coordinator's departure; a writer failure or a stuck commit is `write_failed` with one
 * `write_failure` emitted; each ending is one final state with its outcome as output.
 * The real writer over real stores is proved in test/services/teeService.test.ts.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { type AnyActorRef, createActor, fromCallback } from 'xstate';
import { teeMachine, type WriterEvent } from '../../../src/machines/tee.js';

const DEADLINE_MS = 5_000;

function setup() {
  const received: WriterEvent[] = [];
  let writer: AnyActorRef | null = null;
  let stopped = 0;
  let sendBack: ((e: { type: string; [k: string]: unknown }) => void) | null = null;
  const machine = teeMachine.provide({
    actors: {
      writer: fromCallback(({ receive, self, sendBack: back }) => {
        writer = self;
        sendBack = back as typeof sendBack;
        receive((e) => received.push(e as WriterEvent));
        return () => {
          stopped++;
        };
      }),
    },
  });
  const tee = createActor(machine, { input: { key: 'k1', deadlineMs: DEADLINE_MS } });
  const failures: unknown[] = [];
  tee.on('write_failure', (e) => failures.push(e));
  tee.start();
  return {
    tee,
    received,
    failures,
    writer: () => writer,
    stopped: () => stopped,
    report: (
      e: { type: 'writer.committed'; size: number } | { type: 'writer.failed'; reason: string },
    ) => sendBack!(e),
  };
}

const chunk = (s: string) => ({ type: 'chunk' as const, data: Buffer.from(s) });

describe('tee chart', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('forwards chunks in order, ends the write on done, and commits', () => {
    const t = setup();
    t.tee.send({ type: 'rendering' });
    t.tee.send(chunk('ab'));
    t.tee.send(chunk('cde'));
    t.tee.send({ type: 'done', info: { exitStatus: 0, bytes: 5 } });
    expect(t.received.map((e) => (e.type === 'write' ? e.data.toString() : e.type))).toEqual([
      'ab',
      'cde',
      'end',
    ]);
    expect(t.tee.getSnapshot().value).toEqual({ active: 'finishing' });
    t.report({ type: 'writer.committed', size: 5 });
    expect(t.tee.getSnapshot().status).toBe('done');
    expect(t.tee.getSnapshot().output).toEqual({ outcome: 'committed', bytes: 5 });
    expect(t.failures).toEqual([]);
  });

  it('restarts the silence deadline on every message, then aborts', () => {
    const t = setup();
    vi.advanceTimersByTime(DEADLINE_MS - 1);
    t.tee.send(chunk('x'));
    vi.advanceTimersByTime(DEADLINE_MS - 1);
    t.tee.send({ type: 'rendering' });
    vi.advanceTimersByTime(DEADLINE_MS - 1);
    expect(t.tee.getSnapshot().status).toBe('active');
    expect(t.stopped()).toBe(0);
    vi.advanceTimersByTime(1);
    expect(t.tee.getSnapshot().output).toEqual({ outcome: 'aborted', bytes: 1 });
    expect(t.stopped()).toBe(1); // the writer was stopped: its put is abandoned
    expect(t.received.some((e) => e.type === 'end')).toBe(false);
  });

  it('a render error aborts silently and stops the writer', () => {
    const t = setup();
    t.tee.send(chunk('abc'));
    t.tee.send({ type: 'error', failure: { class: 'render_failed' } });
    expect(t.tee.getSnapshot().output).toMatchObject({ outcome: 'aborted' });
    expect(t.stopped()).toBe(1);
    expect(t.failures).toEqual([]);
  });

  it('the coordinator going away aborts while streaming, but not while finishing', () => {
    const a = setup();
    a.tee.send({ type: 'coordinator.gone' });
    expect(a.tee.getSnapshot().output).toMatchObject({ outcome: 'aborted' });

    const b = setup();
    b.tee.send(chunk('abc'));
    b.tee.send({ type: 'done', info: { exitStatus: 0, bytes: 3 } });
    b.tee.send({ type: 'coordinator.gone' }); // its linger ended; the commit goes on
    expect(b.tee.getSnapshot().value).toEqual({ active: 'finishing' });
    b.report({ type: 'writer.committed', size: 3 });
    expect(b.tee.getSnapshot().output).toMatchObject({ outcome: 'committed' });
  });

  it('a writer failure is write_failed with exactly one write_failure', () => {
    const t = setup();
    t.tee.send(chunk('abc'));
    t.report({ type: 'writer.failed', reason: 'eacces' });
    expect(t.tee.getSnapshot().output).toEqual({
      outcome: 'write_failed',
      bytes: 3,
      reason: 'eacces',
    });
    expect(t.failures).toEqual([{ type: 'write_failure', key: 'k1', reason: 'eacces' }]);
  });

  it('a commit that never finishes is a write failure after the deadline', () => {
    const t = setup();
    t.tee.send({ type: 'done', info: { exitStatus: 0, bytes: 0 } });
    vi.advanceTimersByTime(DEADLINE_MS);
    expect(t.tee.getSnapshot().output).toMatchObject({
      outcome: 'write_failed',
      reason: 'timeout',
    });
    expect(t.failures).toHaveLength(1);
    expect(t.stopped()).toBe(1);
  });

  it('refuses a deadline that is not a positive integer', () => {
    const machine = teeMachine.provide({ actors: { writer: fromCallback(() => {}) } });
    const tee = createActor(machine, { input: { key: 'k', deadlineMs: 0 } });
    tee.subscribe({ error: () => {} });
    tee.start();
    expect(tee.getSnapshot().status).toBe('error');
    expect(String(tee.getSnapshot().error)).toContain('deadlineMs');
  });
});
