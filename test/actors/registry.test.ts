// The unique registry's start-or-join, with real XState coordinators answering joins through
// call(): 20 concurrent callers make one actor (1 started, 19 joined); a refused or throwing
// start leaves nothing registered and its waiters run their own start; a join that races a
// stopping actor retries and becomes a fresh start; 5 failed joins answer `unavailable`; the
// per-attempt deadline (fake timers) bounds a stuck start or join; unregister is exact.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createActor, setup } from 'xstate';
import { CallError, call } from '../../src/actors/call.js';
import { Registry, type StartResult } from '../../src/actors/registry.js';
import { type CallEnvelope, reply } from '../../src/core/protocol.js';

type CoordinatorEvent = ({ type: 'join' } | { type: 'leave' } | { type: 'boom' }) & CallEnvelope;

const coordinator = setup({
  types: {} as { events: CoordinatorEvent; input: { key: string } },
  actions: {
    explode: () => {
      throw new Error('coordinator bug');
    },
  },
}).createMachine({
  initial: 'running',
  states: {
    running: {
      on: {
        join: { actions: reply(() => 'backlog') },
        leave: 'gone', // stops without answering, like a coordinator whose last client left
        boom: { actions: 'explode' },
      },
    },
    gone: { type: 'final' },
  },
});

type Coordinator = ReturnType<typeof spawnCoordinator>;
const spawnCoordinator = (key: string) => createActor(coordinator, { input: { key } }).start();

const started = (actor: Coordinator): StartResult<Coordinator, string, string> => ({
  type: 'started',
  actor,
  value: 'first',
});

const join = (actor: Coordinator, _key: string, signal: AbortSignal) =>
  call<string>(actor, { type: 'join' }, { signal, timeout: Number.POSITIVE_INFINITY });

/** A promise with its resolve exposed, for starts that settle when the test says. */
function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((ok, no) => {
    resolve = ok;
    reject = no;
  });
  return { promise, resolve, reject };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('startOrJoin: one actor per key', () => {
  it('makes one actor for 20 concurrent callers: 1 started, 19 joined', async () => {
    const registry = new Registry<string, Coordinator>();
    const admission = deferred<void>();
    const start = vi.fn(async (key: string) => {
      await admission.promise;
      return started(spawnCoordinator(key));
    });
    const outcomes = Array.from({ length: 20 }, () => registry.startOrJoin('k', { start, join }));
    await Promise.resolve();
    expect(registry.starting).toBe(1);
    expect(registry.size).toBe(0);
    expect(registry.get('k')).toBeUndefined();
    admission.resolve();
    const all = await Promise.all(outcomes);
    expect(start).toHaveBeenCalledTimes(1);
    expect(all.filter((o) => o.type === 'started')).toHaveLength(1);
    expect(all.filter((o) => o.type === 'joined')).toHaveLength(19);
    const actors = new Set(
      all.map((o) => (o.type === 'started' || o.type === 'joined' ? o.actor : 0)),
    );
    expect(actors.size).toBe(1);
    expect(all[0]).toMatchObject({ type: 'started', value: 'first', attempts: 1 });
    expect(all[1]).toMatchObject({ type: 'joined', value: 'backlog', attempts: 1 });
    expect(registry.size).toBe(1);
    expect(registry.starting).toBe(0);
    expect([...registry.keys()]).toEqual(['k']);
  });

  it('keeps distinct keys independent', async () => {
    const registry = new Registry<string, Coordinator>();
    const start = vi.fn((key: string) => started(spawnCoordinator(key)));
    const [a, b] = await Promise.all([
      registry.startOrJoin('a', { start, join }),
      registry.startOrJoin('b', { start, join }),
    ]);
    expect(a.type).toBe('started');
    expect(b.type).toBe('started');
    expect(registry.get('a')).not.toBe(registry.get('b'));
    expect(registry.size).toBe(2);
  });

  it('removes the entry when the actor stops, so the next caller starts afresh', async () => {
    const registry = new Registry<string, Coordinator>();
    const start = vi.fn((key: string) => started(spawnCoordinator(key)));
    const first = await registry.startOrJoin('k', { start, join });
    if (first.type !== 'started') throw new Error('expected a start');
    first.actor.send({ type: 'leave' });
    expect(registry.size).toBe(0);
    expect(registry.get('k')).toBeUndefined();
    const second = await registry.startOrJoin('k', { start, join });
    expect(second.type).toBe('started');
    expect(second.type === 'started' && second.actor).not.toBe(first.actor);
  });

  it('removes the entry of an actor that fails and reports the error', async () => {
    const onActorError = vi.fn();
    const registry = new Registry<string, Coordinator>({ onActorError });
    const outcome = await registry.startOrJoin('k', {
      start: (key) => started(spawnCoordinator(key)),
      join,
    });
    if (outcome.type !== 'started') throw new Error('expected a start');
    outcome.actor.send({ type: 'boom' });
    expect(registry.size).toBe(0);
    expect(onActorError).toHaveBeenCalledTimes(1);
    expect(onActorError.mock.calls[0]![0]).toMatchObject({ message: 'coordinator bug' });
    expect(onActorError.mock.calls[0]![1]).toBe('k');
  });
});

describe('startOrJoin: a start that does not start', () => {
  it('leaves nothing registered after a refusal; waiters run their own start', async () => {
    const registry = new Registry<string, Coordinator>();
    const admission = deferred<void>();
    let calls = 0;
    const start = vi.fn(async (key: string): Promise<StartResult<Coordinator, string, string>> => {
      calls += 1;
      if (calls === 1) {
        await admission.promise;
        return { type: 'failed', failure: 'queue_full' };
      }
      return started(spawnCoordinator(key));
    });
    const first = registry.startOrJoin('k', { start, join });
    const waiters = [1, 2, 3].map(() => registry.startOrJoin('k', { start, join }));
    await Promise.resolve();
    admission.resolve();
    expect(await first).toEqual({ type: 'failed', failure: 'queue_full', attempts: 1 });
    const rest = await Promise.all(waiters);
    expect(rest.map((o) => o.type).sort()).toEqual(['joined', 'joined', 'started']);
    expect(rest.every((o) => o.attempts === 1)).toBe(true);
    expect(start).toHaveBeenCalledTimes(2);
    expect(registry.size).toBe(1);
  });

  it('leaves nothing registered when start throws, and rethrows to its caller only', async () => {
    const registry = new Registry<string, Coordinator>();
    const admission = deferred<void>();
    const start = vi
      .fn<(key: string) => Promise<StartResult<Coordinator, string, string>>>()
      .mockImplementationOnce(async () => {
        await admission.promise;
        throw new Error('ffmpeg missing');
      })
      .mockImplementation(async (key) => started(spawnCoordinator(key)));
    const first = registry.startOrJoin('k', { start, join });
    const waiter = registry.startOrJoin('k', { start, join });
    await Promise.resolve();
    admission.resolve();
    await expect(first).rejects.toThrow('ffmpeg missing');
    expect(await waiter).toMatchObject({ type: 'started', attempts: 1 });
  });

  it('throws TypeError for a malformed start answer, leaving no entry', async () => {
    const registry = new Registry<string, Coordinator>();
    await expect(
      registry.startOrJoin('k', { start: () => ({ type: 'maybe' }) as never, join }),
    ).rejects.toThrow(TypeError);
    expect(registry.size + registry.starting).toBe(0);
  });

  it('does not register an actor that was already stopped when start answered', async () => {
    const registry = new Registry<string, Coordinator>();
    const outcome = await registry.startOrJoin('k', {
      start: (key) => {
        const actor = spawnCoordinator(key);
        actor.send({ type: 'leave' });
        return started(actor);
      },
      join,
    });
    expect(outcome.type).toBe('started');
    expect(registry.size + registry.starting).toBe(0);
  });
});

describe('startOrJoin: joins that race a stop', () => {
  it('retries a join that hits a stopping actor and becomes a fresh start', async () => {
    const registry = new Registry<string, Coordinator>();
    const start = vi.fn((key: string) => started(spawnCoordinator(key)));
    const first = await registry.startOrJoin('k', { start, join });
    if (first.type !== 'started') throw new Error('expected a start');
    const racing = await registry.startOrJoin('k', {
      start,
      // The coordinator's last client leaves just as our JOIN is on its way.
      join: (actor, key, signal) => {
        actor.send({ type: 'leave' });
        return join(actor, key, signal);
      },
    });
    expect(racing).toMatchObject({ type: 'started', attempts: 2 });
    expect(racing.type === 'started' && racing.actor).not.toBe(first.actor);
    expect(registry.get('k')).toBe(racing.type === 'started' ? racing.actor : undefined);
  });

  it('answers unavailable after 5 attempts against an actor that keeps refusing joins', async () => {
    const registry = new Registry<string, Coordinator>();
    const start = vi.fn((key: string) => started(spawnCoordinator(key)));
    await registry.startOrJoin('k', { start, join });
    const refusing = vi.fn(async () => {
      throw new CallError('ERR_CALLEE_STOPPED', 'stopping');
    });
    const outcome = await registry.startOrJoin('k', { start, join: refusing });
    expect(outcome).toEqual({ type: 'unavailable', reason: 'attempts_exhausted', attempts: 5 });
    expect(refusing).toHaveBeenCalledTimes(5);
    expect(start).toHaveBeenCalledTimes(1);
    const three = await registry.startOrJoin('k', { start, join: refusing, attempts: 3 });
    expect(three).toMatchObject({ type: 'unavailable', attempts: 3 });
  });

  it('rethrows a join error that is not about stopping', async () => {
    const registry = new Registry<string, Coordinator>();
    const start = (key: string) => started(spawnCoordinator(key));
    await registry.startOrJoin('k', { start, join });
    await expect(
      registry.startOrJoin('k', {
        start,
        join: () => {
          throw new TypeError('bad join');
        },
      }),
    ).rejects.toThrow(TypeError);
  });
});

describe('startOrJoin: deadlines', () => {
  it('answers join_timeout when a join is not answered in time, aborting its signal', async () => {
    vi.useFakeTimers();
    const registry = new Registry<string, Coordinator>();
    const start = (key: string) => started(spawnCoordinator(key));
    await registry.startOrJoin('k', { start, join });
    let seen: AbortSignal | undefined;
    const pending = registry.startOrJoin('k', {
      start,
      join: (_actor, _key, signal) => {
        seen = signal;
        return new Promise<string>(() => {});
      },
    });
    await vi.advanceTimersByTimeAsync(4_999);
    expect(seen?.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(await pending).toEqual({ type: 'unavailable', reason: 'join_timeout', attempts: 1 });
    expect(seen?.aborted).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('maps a join rejected by its aborted signal to join_timeout', async () => {
    vi.useFakeTimers();
    const registry = new Registry<string, Coordinator>({ joinTimeoutMs: 100 });
    const start = (key: string) => started(spawnCoordinator(key));
    const first = await registry.startOrJoin('k', { start, join });
    if (first.type !== 'started') throw new Error('expected a start');
    const pending = registry.startOrJoin('k', {
      start,
      join: (actor, _key, signal) =>
        new Promise<string>((_ok, no) => {
          signal.addEventListener('abort', () => no(signal.reason));
          void actor;
        }),
    });
    await vi.advanceTimersByTimeAsync(100);
    expect(await pending).toMatchObject({ type: 'unavailable', reason: 'join_timeout' });
  });

  it('bounds the wait for a stuck start by the same deadline', async () => {
    vi.useFakeTimers();
    const registry = new Registry<string, Coordinator>();
    const never = new Promise<StartResult<Coordinator, string, string>>(() => {});
    void registry.startOrJoin('k', { start: () => never, join });
    const waiter = registry.startOrJoin('k', { start: () => never, join });
    await vi.advanceTimersByTimeAsync(5_000);
    expect(await waiter).toEqual({ type: 'unavailable', reason: 'join_timeout', attempts: 1 });
    expect(registry.starting).toBe(1);
  });

  it('arms no timer for the caller that starts', async () => {
    vi.useFakeTimers();
    const registry = new Registry<string, Coordinator>();
    const admission = deferred<void>();
    const first = registry.startOrJoin('k', {
      start: async (key) => {
        await admission.promise;
        return started(spawnCoordinator(key));
      },
      join,
    });
    expect(vi.getTimerCount()).toBe(0);
    admission.resolve();
    await first;
  });
});

describe('unregister and options', () => {
  it('removes only the entry that still maps to the named actor', async () => {
    const registry = new Registry<string, Coordinator>();
    const start = (key: string) => started(spawnCoordinator(key));
    const first = await registry.startOrJoin('k', { start, join });
    if (first.type !== 'started') throw new Error('expected a start');
    const stranger = spawnCoordinator('k');
    expect(registry.unregister('k', stranger)).toBe(false);
    expect(registry.get('k')).toBe(first.actor);
    expect(registry.unregister('k', first.actor)).toBe(true);
    expect(registry.unregister('k', first.actor)).toBe(false);
    const second = await registry.startOrJoin('k', { start, join });
    expect(second.type).toBe('started');
    // The old actor, unregistered but still alive, stops later: its successor stays.
    first.actor.send({ type: 'leave' });
    expect(registry.unregister('k', first.actor)).toBe(false);
    expect(registry.get('k')).toBe(second.type === 'started' ? second.actor : undefined);
    expect(registry.size).toBe(1);
  });

  it('throws RangeError for invalid attempts or timeouts', () => {
    expect(() => new Registry({ attempts: 0 })).toThrow(RangeError);
    expect(() => new Registry({ joinTimeoutMs: -1 })).toThrow(RangeError);
    const registry = new Registry<string, Coordinator>();
    const start = (key: string) => started(spawnCoordinator(key));
    expect(() => registry.startOrJoin('k', { start, join, attempts: 1.5 })).toThrow(RangeError);
    expect(registry.starting).toBe(0);
  });
});
