// call/cast/reply/inbox against real XState actors, one path per test: a reply by emit and by
// sendTo between two machines, timeout and abort (fake timers) that leave the callee untouched,
// callee stopped before, during and inside `send`, late replies dropped and never delivered to
// another caller, re-entrant calls from a notify handler, and pendingCalls() back at 0.
// The sync fast path is checked to arm no timer at all.
import diagnostics from 'node:diagnostics_channel';
import { getEventListeners } from 'node:events';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { assign, createActor, emit, sendTo, setup } from 'xstate';
import { CallError, call, cast, inbox, newCallId, pendingCalls } from '../../src/actors/call.js';
import { type CallEnvelope, type ReplyEvent, reply } from '../../src/core/protocol.js';

type CalleeEvent = (
  | { type: 'echo'; value: unknown }
  | { type: 'hold' }
  | { type: 'answer'; id: number; value: unknown }
  | { type: 'count' }
  | { type: 'finish' }
  | { type: 'finishWithReply' }
  | { type: 'boom' }
  | { type: 'poke'; to: string }
  | { type: 'tell'; to: string; message: unknown; value: unknown; notifyFirst: boolean }
) &
  CallEnvelope;

const payloadSeen = vi.fn();

const callee = setup({
  types: {} as { context: { count: number; held: number[] }; events: CalleeEvent; emitted: any },
  actions: {
    answerEcho: reply(({ event }: { context: unknown; event: CalleeEvent }) => {
      payloadSeen();
      return event.type === 'echo' ? event.value : undefined;
    }),
    answerCount: reply(({ context }: { context: { count: number }; event: CalleeEvent }) => {
      payloadSeen();
      return context.count;
    }),
    explode: () => {
      throw new Error('machine bug');
    },
  },
}).createMachine({
  context: { count: 0, held: [] },
  initial: 'serving',
  states: {
    serving: {
      on: {
        echo: { actions: 'answerEcho' },
        hold: {
          actions: assign({
            held: ({ context, event }) => [...context.held, event.callId ?? -1],
          }),
        },
        answer: {
          actions: emit(({ event }) => ({ type: 'reply', callId: event.id, payload: event.value })),
        },
        count: {
          actions: [assign({ count: ({ context }) => context.count + 1 }), 'answerCount'],
        },
        finish: 'finished',
        finishWithReply: { target: 'finished', actions: reply(() => 'last words') },
        boom: { actions: 'explode' },
        poke: {
          actions: [
            emit(({ event }) => ({ type: 'notify', to: event.to, message: null })),
            assign({ held: ({ context, event }) => [...context.held, event.callId ?? -1] }),
          ],
        },
        tell: [
          {
            guard: ({ event }) => event.notifyFirst,
            actions: [
              emit(({ event }) => ({ type: 'notify', to: event.to, message: event.message })),
              reply(({ event }: { context: unknown; event: CalleeEvent }) =>
                event.type === 'tell' ? event.value : undefined,
              ),
            ],
          },
          {
            actions: [
              reply(({ event }: { context: unknown; event: CalleeEvent }) =>
                event.type === 'tell' ? event.value : undefined,
              ),
              emit(({ event }) => ({ type: 'notify', to: event.to, message: event.message })),
            ],
          },
        ],
      },
    },
    finished: { type: 'final' },
  },
});

const start = () => createActor(callee).start();

async function settled<T>(promise: Promise<T>): Promise<'pending' | 'settled'> {
  let state: 'pending' | 'settled' = 'pending';
  promise.then(
    () => {
      state = 'settled';
    },
    () => {
      state = 'settled';
    },
  );
  for (let i = 0; i < 5; i++) await Promise.resolve();
  return state;
}

beforeEach(() => {
  vi.useFakeTimers();
  payloadSeen.mockClear();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('call: replies', () => {
  it('resolves with the emitted reply inside send, arming no timer', async () => {
    const actor = start();
    const request = { type: 'echo', value: 42 };
    const answer = call<number>(actor, request);
    expect(vi.getTimerCount()).toBe(0);
    expect(pendingCalls(actor)).toBe(0);
    await expect(answer).resolves.toBe(42);
    expect(typeof (request as { callId?: number }).callId).toBe('number');
  });

  it('stamps a fresh, increasing callId on every request', async () => {
    const actor = start();
    const first = { type: 'echo', value: 1 };
    const second = { type: 'echo', value: 2 };
    await call(actor, first);
    await call(actor, second);
    const a = (first as { callId?: number }).callId!;
    const b = (second as { callId?: number }).callId!;
    expect(b).toBeGreaterThan(a);
    expect(newCallId()).toBeGreaterThan(b);
  });

  it('delivers an answer given later, from a different transition, to the caller that asked', async () => {
    const actor = start();
    const held = call<string>(actor, { type: 'hold' });
    expect(pendingCalls(actor)).toBe(1);
    expect(vi.getTimerCount()).toBe(1);
    const id = actor.getSnapshot().context.held[0]!;
    actor.send({ type: 'answer', id, value: 'later' });
    await expect(held).resolves.toBe('later');
    expect(pendingCalls(actor)).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('answers a machine caller through sendTo(replyTo), not through emit', () => {
    const server = start();
    const emitted = vi.fn();
    server.on('reply', emitted);
    const client = setup({
      types: {} as {
        context: { asked: number; got: unknown; gotId: number };
        events: { type: 'go' } | ReplyEvent<unknown>;
      },
    }).createMachine({
      context: { asked: 0, got: undefined, gotId: 0 },
      on: {
        go: {
          actions: [
            assign({ asked: () => newCallId() }),
            sendTo(server, ({ context, self }) => ({
              type: 'echo' as const,
              value: 'to-machine',
              callId: context.asked,
              replyTo: self,
            })),
          ],
        },
        reply: {
          actions: assign({
            got: ({ event }) => event.payload,
            gotId: ({ event }) => event.callId,
          }),
        },
      },
    });
    const asker = createActor(client).start();
    asker.send({ type: 'go' });
    const { asked, got, gotId } = asker.getSnapshot().context;
    expect(got).toBe('to-machine');
    expect(gotId).toBe(asked);
    expect(emitted).not.toHaveBeenCalled();
  });

  it('resolves a reply emitted in the transition that also stops the callee', async () => {
    const actor = start();
    await expect(call(actor, { type: 'finishWithReply' })).resolves.toBe('last words');
    expect(actor.getSnapshot().status).toBe('done');
  });
});

describe('call: giving up', () => {
  it('times out with ERR_CALL_TIMEOUT and leaves the callee untouched', async () => {
    const actor = start();
    const held = call(actor, { type: 'hold' }, { timeout: 100 });
    const before = actor.getSnapshot();
    const outcome = expect(held).rejects.toMatchObject({ code: 'ERR_CALL_TIMEOUT' });
    await vi.advanceTimersByTimeAsync(99);
    expect(await settled(held)).toBe('pending');
    await vi.advanceTimersByTimeAsync(1);
    await outcome;
    await expect(held).rejects.toBeInstanceOf(CallError);
    expect(actor.getSnapshot()).toBe(before); // no event reached the callee
    expect(pendingCalls(actor)).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('uses the 5 s default timeout', async () => {
    const actor = start();
    const held = call(actor, { type: 'hold' });
    const outcome = expect(held).rejects.toMatchObject({ code: 'ERR_CALL_TIMEOUT' });
    await vi.advanceTimersByTimeAsync(4_999);
    expect(await settled(held)).toBe('pending');
    await vi.advanceTimersByTimeAsync(1);
    await outcome;
  });

  it('drops a late reply and never hands it to another caller', async () => {
    const actor = start();
    const first = call(actor, { type: 'hold' }, { timeout: 50 });
    const firstDone = expect(first).rejects.toMatchObject({ code: 'ERR_CALL_TIMEOUT' });
    await vi.advanceTimersByTimeAsync(50);
    await firstDone;
    const second = call<string>(actor, { type: 'hold' }, { timeout: 1_000 });
    const [firstId, secondId] = actor.getSnapshot().context.held;
    expect(secondId).not.toBe(firstId);

    actor.send({ type: 'answer', id: firstId!, value: 'for the first' });
    expect(await settled(second)).toBe('pending');
    expect(pendingCalls(actor)).toBe(1);

    actor.send({ type: 'answer', id: secondId!, value: 'for the second' });
    await expect(second).resolves.toBe('for the second');
    expect(pendingCalls(actor)).toBe(0);
  });

  it('waits forever with timeout Infinity, arming no timer', async () => {
    const actor = start();
    const held = call<string>(actor, { type: 'hold' }, { timeout: Number.POSITIVE_INFINITY });
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(3_600_000);
    expect(await settled(held)).toBe('pending');
    actor.send({ type: 'answer', id: actor.getSnapshot().context.held[0]!, value: 'eventually' });
    await expect(held).resolves.toBe('eventually');
  });

  it('aborts with ERR_CALL_ABORTED carrying the reason, and clears its timer', async () => {
    const actor = start();
    const controller = new AbortController();
    const held = call(actor, { type: 'hold' }, { signal: controller.signal, timeout: 1_000 });
    const before = actor.getSnapshot();
    const reason = new Error('client left');
    controller.abort(reason);
    const error = await held.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CallError);
    expect(error).toMatchObject({ code: 'ERR_CALL_ABORTED', cause: reason });
    expect(actor.getSnapshot()).toBe(before);
    expect(pendingCalls(actor)).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('rejects at once for an already-aborted signal, without sending anything', async () => {
    const actor = start();
    const controller = new AbortController();
    controller.abort('gone already');
    await expect(
      call(actor, { type: 'count' }, { signal: controller.signal }),
    ).rejects.toMatchObject({ code: 'ERR_CALL_ABORTED', cause: 'gone already' });
    expect(actor.getSnapshot().context.count).toBe(0);
    expect(pendingCalls(actor)).toBe(0);
  });

  it('settles a call whose signal aborts while its own send is still running', async () => {
    const actor = start();
    const controller = new AbortController();
    inbox(actor, 'self', () => controller.abort('gave up mid-send'));
    // The callee notifies (the handler aborts) and holds the call: no reply inside send.
    const poked = call(actor, { type: 'poke', to: 'self' }, { signal: controller.signal });
    await expect(poked).rejects.toMatchObject({
      code: 'ERR_CALL_ABORTED',
      cause: 'gave up mid-send',
    });
    expect(pendingCalls(actor)).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('resolves a call answered inside send even if its signal aborted meanwhile', async () => {
    const actor = start();
    const controller = new AbortController();
    inbox(actor, 'self', () => controller.abort());
    const told = call(
      actor,
      { type: 'tell', to: 'self', message: null, value: 'answered', notifyFirst: true },
      { signal: controller.signal },
    );
    await expect(told).resolves.toBe('answered');
  });

  it('ignores an abort after the reply, and removes its listener', async () => {
    const actor = start();
    const controller = new AbortController();
    const held = call<string>(actor, { type: 'hold' }, { signal: controller.signal });
    actor.send({ type: 'answer', id: actor.getSnapshot().context.held[0]!, value: 'first' });
    await expect(held).resolves.toBe('first');
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    controller.abort();
    expect(pendingCalls(actor)).toBe(0);
  });
});

describe('call: the callee stops', () => {
  it('rejects with ERR_CALLEE_STOPPED when the actor was stopped before the call', async () => {
    const actor = start();
    actor.stop();
    await expect(call(actor, { type: 'echo', value: 1 })).rejects.toMatchObject({
      code: 'ERR_CALLEE_STOPPED',
    });
  });

  it('rejects with ERR_CALLEE_STOPPED for an actor that finished or failed earlier', async () => {
    const done = start();
    done.send({ type: 'finish' });
    const failed = start();
    failed.subscribe({ error: () => {} });
    failed.send({ type: 'boom' });
    expect(failed.getSnapshot().status).toBe('error');
    await expect(call(done, { type: 'count' })).rejects.toMatchObject({
      code: 'ERR_CALLEE_STOPPED',
    });
    await expect(call(failed, { type: 'count' })).rejects.toMatchObject({
      code: 'ERR_CALLEE_STOPPED',
    });
  });

  it('rejects pending calls when the actor stops while they wait', async () => {
    const actor = start();
    const a = call(actor, { type: 'hold' });
    const b = call(actor, { type: 'hold' });
    expect(pendingCalls(actor)).toBe(2);
    actor.stop();
    await expect(a).rejects.toMatchObject({ code: 'ERR_CALLEE_STOPPED' });
    await expect(b).rejects.toMatchObject({ code: 'ERR_CALLEE_STOPPED' });
    expect(pendingCalls(actor)).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('rejects pending calls when the actor fails while they wait', async () => {
    const actor = start();
    const waiting = call(actor, { type: 'hold' });
    actor.send({ type: 'boom' });
    await expect(waiting).rejects.toMatchObject({ code: 'ERR_CALLEE_STOPPED' });
  });

  it('rejects a request whose own transition stops the callee without a reply', async () => {
    const actor = start();
    await expect(call(actor, { type: 'finish' })).rejects.toMatchObject({
      code: 'ERR_CALLEE_STOPPED',
    });
    expect(pendingCalls(actor)).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe('call: boundaries', () => {
  it('throws RangeError for a negative, NaN or over-long timeout', () => {
    const actor = start();
    for (const timeout of [-1, Number.NaN, 2 ** 31]) {
      expect(() => call(actor, { type: 'echo', value: 0 }, { timeout })).toThrow(RangeError);
    }
    expect(actor.getSnapshot().context.count).toBe(0);
  });

  it('throws TypeError for a request that names its own replyTo', () => {
    const actor = start();
    expect(() => call(actor, { type: 'echo', value: 0, replyTo: actor })).toThrow(TypeError);
  });

  it('settles every kind of call and leaves pendingCalls() at 0', async () => {
    const actor = start();
    const controller = new AbortController();
    const calls = [
      call(actor, { type: 'echo', value: 1 }),
      call(actor, { type: 'hold' }, { timeout: 10 }),
      call(actor, { type: 'hold' }, { signal: controller.signal }),
      call(actor, { type: 'hold' }),
      call(actor, { type: 'hold' }),
    ];
    const results = Promise.allSettled(calls);
    expect(pendingCalls(actor)).toBe(4);
    controller.abort();
    await vi.advanceTimersByTimeAsync(10);
    actor.send({ type: 'answer', id: actor.getSnapshot().context.held[2]!, value: 'ok' });
    actor.stop();
    expect(
      (await results).map((r) => (r.status === 'fulfilled' ? r.value : r.reason.code)),
    ).toEqual([1, 'ERR_CALL_TIMEOUT', 'ERR_CALL_ABORTED', 'ok', 'ERR_CALLEE_STOPPED']);
    expect(pendingCalls(actor)).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe('cast', () => {
  it('sends without a callId; the callee acts but replies to nobody', () => {
    const actor = start();
    const replies = vi.fn();
    actor.on('reply', replies);
    cast(actor, { type: 'count' });
    cast(actor, { type: 'count' });
    expect(actor.getSnapshot().context.count).toBe(2);
    expect(replies).not.toHaveBeenCalled();
    expect(payloadSeen).not.toHaveBeenCalled(); // reply() does not even compute a payload
  });

  it('drops silently on a stopped actor', () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const actor = start();
    actor.stop();
    expect(() => cast(actor, { type: 'count' })).not.toThrow();
    expect(warn).not.toHaveBeenCalled();
    warn.mockRestore();
  });
});

describe('inbox and notify', () => {
  it('a throwing inbox is reported, cut off and made a gone for its owner, never a crash', () => {
    const owner = createActor(
      setup({
        types: {} as {
          context: { gone: string[] };
          events: { type: 'tell'; to: string } | { type: 'gone'; id: string };
          emitted: any;
        },
      }).createMachine({
        context: { gone: [] },
        on: {
          tell: { actions: emit(({ event }) => ({ type: 'notify', to: event.to, message: 1 })) },
          gone: { actions: assign({ gone: ({ context, event }) => [...context.gone, event.id] }) },
        },
      }),
    ).start();
    const published: unknown[] = [];
    const listener = (m: unknown) => published.push(m);
    diagnostics.subscribe('audio_proxy.internal_error', listener);
    try {
      const broken = vi.fn(() => {
        throw new Error('consumer bug');
      });
      inbox(owner, 'x', broken);
      owner.send({ type: 'tell', to: 'x' });
      owner.send({ type: 'tell', to: 'x' });
      expect(broken).toHaveBeenCalledTimes(1);
      expect(owner.getSnapshot().context.gone).toEqual(['x']);
      expect(published).toEqual([{ stage: 'notify', error: new Error('consumer bug') }]);
      // A crash would come from the timer XState arms to rethrow an unhandled listener error.
      expect(() => vi.runAllTimers()).not.toThrow();
    } finally {
      diagnostics.unsubscribe('audio_proxy.internal_error', listener);
      owner.stop();
    }
  });

  it('routes a notify only to the inbox of its participant', async () => {
    const actor = start();
    const a = vi.fn();
    const b = vi.fn();
    inbox(actor, 'a', a);
    inbox(actor, 'b', b);
    await call(actor, { type: 'tell', to: 'a', message: 'hello a', value: 0, notifyFirst: true });
    await call(actor, { type: 'tell', to: 'nobody', message: 'lost', value: 0, notifyFirst: true });
    expect(a.mock.calls).toEqual([['hello a']]);
    expect(b).not.toHaveBeenCalled();
  });

  it('stops delivering after removal; a replaced inbox survives the old remover', async () => {
    const actor = start();
    const old = vi.fn();
    const fresh = vi.fn();
    const removeOld = inbox(actor, 'p', old);
    inbox(actor, 'p', fresh);
    removeOld();
    await call(actor, { type: 'tell', to: 'p', message: 1, value: 0, notifyFirst: false });
    expect(old).not.toHaveBeenCalled();
    expect(fresh.mock.calls).toEqual([[1]]);
    const removeFresh = inbox(actor, 'p', fresh);
    removeFresh();
    removeFresh();
    await call(actor, { type: 'tell', to: 'p', message: 2, value: 0, notifyFirst: false });
    expect(fresh).toHaveBeenCalledTimes(1);
  });

  it.each([
    ['notify before the reply', true],
    ['notify after the reply', false],
  ])('keeps outer and nested replies apart when an inbox calls back in (%s)', async (_, first) => {
    const actor = start();
    let inner: Promise<unknown> | undefined;
    inbox(actor, 'w', () => {
      inner = call(actor, { type: 'echo', value: 'inner' });
    });
    const outer = call(actor, {
      type: 'tell',
      to: 'w',
      message: null,
      value: 'outer',
      notifyFirst: first,
    });
    expect(await settled(outer)).toBe('settled'); // fail fast instead of hanging on a lost reply
    expect(await settled(inner!)).toBe('settled');
    await expect(outer).resolves.toBe('outer');
    await expect(inner).resolves.toBe('inner');
    expect(pendingCalls(actor)).toBe(0);
    await expect(call(actor, { type: 'echo', value: 'after' })).resolves.toBe('after');
  });
});
