// The system: children start in declared order and stop in reverse; a failing start unwinds
// what it started and rethrows; each stop is bounded (fake timers) and a slow or throwing child
// does not hold up the others; an actor error, or a singleton ending while the system runs, is
// fatal exactly once (logged, bounded shutdown, then the host's afterFatal hook), and a child's own
// planned stop is not. The default path, which never exits the process, is checked in a real child.
// Hooks are given at construction: a child's start is handed `supervise`, `onSupervise` sees every
// supervised actor, and `actorChild` wraps one actor (start, attach, stop, detach, watch).
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createActor, setup } from 'xstate';
import {
  type ChildSpec,
  createSystem,
  FATAL_EXIT_CODE,
  FATAL_STOP_BUDGET_MS,
  actorChild as oneActorChild,
  type SystemLogger,
} from '../../src/actors/system.js';

const singleton = setup({
  types: {} as { events: { type: 'boom' } | { type: 'finish' } },
  actions: {
    explode: () => {
      throw new Error('pure machine threw');
    },
  },
}).createMachine({
  initial: 'serving',
  states: {
    serving: { on: { boom: { actions: 'explode' }, finish: 'over' } },
    over: { type: 'final' },
  },
});
type Singleton = ReturnType<typeof createActor<typeof singleton>>;

function recorder() {
  const log: string[] = [];
  const child = (name: string, extra: Partial<ChildSpec<string>> = {}): ChildSpec<string> => ({
    name,
    start: () => {
      log.push(`start ${name}`);
      return `${name}-handle`;
    },
    stop: (handle) => {
      log.push(`stop ${handle}`);
    },
    ...extra,
  });
  return { log, child };
}

function actorChild(name: string, log: string[]): ChildSpec<Singleton> {
  return {
    name,
    start: () => {
      log.push(`start ${name}`);
      return createActor(singleton).start();
    },
    stop: (actor) => {
      log.push(`stop ${name}`);
      actor.stop();
    },
    actor: (actor) => actor,
  };
}

function quietLogger() {
  return { error: vi.fn(), warn: vi.fn() } satisfies SystemLogger;
}

afterEach(() => {
  vi.useRealTimers();
});

describe('start and stop order', () => {
  it('starts in declared order and stops in reverse', async () => {
    const { log, child } = recorder();
    const system = await createSystem([child('semaphore'), child('registry'), child('listener')]);
    expect(system.status).toBe('running');
    expect(log).toEqual(['start semaphore', 'start registry', 'start listener']);
    expect(system.get('registry')).toBe('registry-handle');
    const reports = await system.stop();
    expect(log.slice(3)).toEqual([
      'stop listener-handle',
      'stop registry-handle',
      'stop semaphore-handle',
    ]);
    expect(reports.map((r) => [r.name, r.outcome])).toEqual([
      ['listener', 'stopped'],
      ['registry', 'stopped'],
      ['semaphore', 'stopped'],
    ]);
    expect(system.status).toBe('stopped');
    expect(() => system.get('registry')).toThrow(RangeError);
  });

  it('lets a child find the handles started before it, and awaits async starts', async () => {
    const seen: unknown[] = [];
    const system = await createSystem([
      { name: 'config', start: async () => ({ capacity: 2 }), stop: () => {} },
      {
        name: 'semaphore',
        start: (started) => {
          seen.push(started.get('config'));
          return 'sem';
        },
        stop: () => {},
      },
    ]);
    expect(seen).toEqual([{ capacity: 2 }]);
    await system.stop();
  });

  it('returns the same promise from every stop() and stops each child once', async () => {
    const { log, child } = recorder();
    const system = await createSystem([child('a'), child('b')]);
    const first = system.stop();
    expect(system.stop()).toBe(first);
    await first;
    expect(log.filter((l) => l.startsWith('stop'))).toEqual(['stop b-handle', 'stop a-handle']);
  });

  it('unwinds the started children in reverse when a start fails, and rethrows', async () => {
    const { log, child } = recorder();
    const failure = new Error('port in use');
    const attempt = createSystem([
      child('a'),
      child('b'),
      child('c', {
        start: () => {
          throw failure;
        },
      }),
      child('d'),
    ]);
    await expect(attempt).rejects.toBe(failure);
    expect(log).toEqual(['start a', 'start b', 'stop b-handle', 'stop a-handle']);
  });

  it('throws TypeError for duplicate or missing names, RangeError for a bad bound', () => {
    const { child } = recorder();
    expect(() => createSystem([child('a'), child('a')])).toThrow(TypeError);
    expect(() => createSystem([child('')])).toThrow(TypeError);
    expect(() => createSystem([child('a', { stopTimeoutMs: -1 })])).toThrow(RangeError);
  });
});

describe('bounded stops', () => {
  it('moves on when a child overruns its stop timeout, and reports it', async () => {
    vi.useFakeTimers();
    const { log, child } = recorder();
    const logger = quietLogger();
    const system = await createSystem(
      [child('a'), child('slow', { stop: () => new Promise(() => {}), stopTimeoutMs: 1_000 })],
      { logger },
    );
    const stopping = system.stop();
    await vi.advanceTimersByTimeAsync(999);
    expect(log).not.toContain('stop a-handle');
    await vi.advanceTimersByTimeAsync(1);
    const reports = await stopping;
    expect(reports).toEqual([
      { name: 'slow', outcome: 'timeout' },
      { name: 'a', outcome: 'stopped' },
    ]);
    expect(logger.warn).toHaveBeenCalledWith(
      expect.objectContaining({ child: 'slow', outcome: 'timeout' }),
      expect.any(String),
    );
    expect(vi.getTimerCount()).toBe(0);
  });

  it('uses a 5 s default bound', async () => {
    vi.useFakeTimers();
    const { child } = recorder();
    const system = await createSystem([child('slow', { stop: () => new Promise(() => {}) })], {
      logger: quietLogger(),
    });
    const stopping = system.stop();
    await vi.advanceTimersByTimeAsync(5_000);
    expect(await stopping).toEqual([{ name: 'slow', outcome: 'timeout' }]);
  });

  it('reports a stop that throws and still stops the rest', async () => {
    const { log, child } = recorder();
    const broken = new Error('close failed');
    const system = await createSystem(
      [
        child('a'),
        child('b', {
          stop: async () => {
            throw broken;
          },
        }),
      ],
      { logger: quietLogger() },
    );
    const reports = await system.stop();
    expect(reports).toEqual([
      { name: 'b', outcome: 'failed', error: broken },
      { name: 'a', outcome: 'stopped' },
    ]);
    expect(log).toContain('stop a-handle');
  });
});

describe('fatal actors', () => {
  it('logs an actor error, stops every child in reverse, then calls afterFatal once', async () => {
    const log: string[] = [];
    const logger = quietLogger();
    const afterFatal = vi.fn();
    const system = await createSystem(
      [actorChild('semaphore', log), actorChild('limiter', log), actorChild('listener', log)],
      { logger, afterFatal },
    );
    const limiter = system.get<Singleton>('limiter');
    limiter.send({ type: 'boom' });
    await vi.waitFor(() => expect(afterFatal).toHaveBeenCalled());
    expect(afterFatal).toHaveBeenCalledTimes(1);
    expect(afterFatal.mock.calls[0]![0]).toMatchObject({
      child: 'limiter',
      reason: { type: 'error' },
    });
    expect(logger.error).toHaveBeenCalledWith(
      expect.objectContaining({
        child: 'limiter',
        reason: 'error',
        err: expect.objectContaining({ message: 'pure machine threw' }),
      }),
      expect.any(String),
    );
    expect(log.slice(3)).toEqual(['stop listener', 'stop limiter', 'stop semaphore']);
    expect(system.status).toBe('stopped');
  });

  it('acts on the first failure only; later ones are logged', async () => {
    const log: string[] = [];
    const logger = quietLogger();
    const onFatal = vi.fn();
    const system = await createSystem([actorChild('a', log), actorChild('b', log)], {
      logger,
      onFatal,
    });
    system.get<Singleton>('a').send({ type: 'boom' });
    system.get<Singleton>('b').send({ type: 'boom' });
    expect(onFatal).toHaveBeenCalledTimes(1);
    expect(onFatal.mock.calls[0]![0]).toMatchObject({ child: 'a', reason: { type: 'error' } });
    expect(logger.error).toHaveBeenCalledTimes(2);
    expect(system.status).toBe('running'); // a custom onFatal decides what happens next
    await system.stop();
  });

  it('treats a singleton that finishes or is stopped from outside as fatal', async () => {
    const log: string[] = [];
    const onFatal = vi.fn();
    const system = await createSystem([actorChild('a', log), actorChild('b', log)], {
      logger: quietLogger(),
      onFatal,
    });
    system.get<Singleton>('b').send({ type: 'finish' });
    expect(onFatal.mock.calls[0]![0]).toMatchObject({ child: 'b', reason: { type: 'done' } });
    await system.stop();
  });

  it('is not fatal when a child stops its own actor during shutdown', async () => {
    const log: string[] = [];
    const onFatal = vi.fn();
    const system = await createSystem([actorChild('a', log), actorChild('b', log)], {
      logger: quietLogger(),
      onFatal,
    });
    await system.stop();
    expect(onFatal).not.toHaveBeenCalled();
    expect(log.slice(2)).toEqual(['stop b', 'stop a']);
  });

  it('treats an actor that already failed at start as fatal', async () => {
    const onFatal = vi.fn();
    const broken = createActor(singleton).start();
    broken.subscribe({ error: () => {} });
    broken.send({ type: 'boom' });
    const system = await createSystem(
      [{ name: 'broken', start: () => broken, stop: () => {}, actor: (a) => a }],
      { logger: quietLogger(), onFatal },
    );
    await Promise.resolve();
    expect(onFatal).toHaveBeenCalledTimes(1);
    await system.stop();
  });

  it('watches dynamic actors put under supervise for errors only', async () => {
    const onFatal = vi.fn();
    const system = await createSystem([], { logger: quietLogger(), onFatal });
    const finishing = createActor(singleton).start();
    system.supervise(finishing, 'coordinator:k1');
    finishing.send({ type: 'finish' });
    expect(onFatal).not.toHaveBeenCalled();
    const failing = createActor(singleton).start();
    system.supervise(failing, 'coordinator:k2');
    failing.send({ type: 'boom' });
    expect(onFatal.mock.calls[0]![0]).toMatchObject({ child: 'coordinator:k2' });
    await system.stop();
  });

  it('calls afterFatal within the fatal budget even when a child never finishes stopping', async () => {
    vi.useFakeTimers();
    const log: string[] = [];
    const afterFatal = vi.fn();
    const system = await createSystem(
      [
        actorChild('semaphore', log),
        {
          name: 'wedged',
          start: () => 'w',
          stop: () => new Promise<void>(() => {}),
          stopTimeoutMs: Number.POSITIVE_INFINITY,
        },
      ],
      { logger: quietLogger(), afterFatal },
    );
    system.get<Singleton>('semaphore').send({ type: 'boom' });
    await vi.advanceTimersByTimeAsync(FATAL_STOP_BUDGET_MS - 1);
    expect(afterFatal).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    expect(afterFatal).toHaveBeenCalledTimes(1);
  });

  it('fails the start when a child fails fatally while later children start', async () => {
    const log: string[] = [];
    const afterFatal = vi.fn();
    let release!: () => void;
    const attempt = createSystem(
      [
        actorChild('semaphore', log),
        {
          name: 'slow',
          start: (started) =>
            new Promise<string>((resolve) => {
              started.get<Singleton>('semaphore').send({ type: 'boom' });
              release = () => resolve('slow');
            }),
          stop: () => {
            log.push('stop slow');
          },
        },
        actorChild('listener', log),
      ],
      { logger: quietLogger(), afterFatal },
    );
    await Promise.resolve();
    release();
    await expect(attempt).rejects.toThrow(/stopped while starting "listener"/);
    await vi.waitFor(() => expect(afterFatal).toHaveBeenCalledTimes(1));
    expect(log).toEqual(['start semaphore', 'stop slow', 'stop semaphore']);
  });
});

describe('the default fatal path', () => {
  it('logs to stderr, stops the system and leaves the real process to its host', () => {
    const fixture = fileURLToPath(new URL('./fixtures/fatalSystem.ts', import.meta.url));
    const run = spawnSync(process.execPath, ['--import', 'tsx', fixture], {
      encoding: 'utf8',
      timeout: 20_000,
    });
    // The library never exits: the loop empties once the listener is stopped, and the process
    // ends by itself with 0 (the CLI passes afterFatal and exits FATAL_EXIT_CODE instead).
    expect(run.status).toBe(0);
    expect(FATAL_EXIT_CODE).toBe(70);
    expect(run.stderr).toContain('a machine threw');
    expect(run.stdout).toContain('stopped: listener,semaphore');
  });
});

describe('hooks given at construction', () => {
  it("hands each child's start the system: earlier handles and supervise", async () => {
    const onFatal = vi.fn();
    const seen: string[] = [];
    const system = await createSystem(
      [
        { name: 'first', start: () => 'one', stop: () => {} },
        {
          name: 'service',
          // a service built inside its child supervises its dynamic actors from the start
          start: (sys) => ({
            first: sys.get<string>('first'),
            spawn: (name: string) => {
              const actor = createActor(singleton).start();
              sys.supervise(actor, name);
              return actor;
            },
          }),
          stop: () => {},
        },
      ],
      {
        logger: quietLogger(),
        onFatal,
        onSupervise: (_actor, name) => seen.push(name),
      },
    );
    const service = system.get<{ first: string; spawn(name: string): Singleton }>('service');
    expect(service.first).toBe('one');
    service.spawn('coordinator:k').send({ type: 'boom' });
    expect(seen).toEqual(['coordinator:k']);
    expect(onFatal.mock.calls[0]![0]).toMatchObject({ child: 'coordinator:k' });
    await system.stop();
  });

  it('calls onSupervise for system.supervise too, before the actor is watched', async () => {
    const order: string[] = [];
    const system = await createSystem([], {
      logger: quietLogger(),
      onFatal: () => order.push('fatal'),
      onSupervise: () => order.push('hook'),
    });
    const broken = createActor(singleton).start();
    broken.subscribe({ error: () => {} });
    broken.send({ type: 'boom' });
    system.supervise(broken, 'late');
    await Promise.resolve();
    expect(order).toEqual(['hook', 'fatal']);
    await system.stop();
  });
});

describe('actorChild', () => {
  it('starts the actor, attaches, and on stop stops it and then detaches', async () => {
    const log: string[] = [];
    const actor = createActor(singleton);
    actor.subscribe({ complete: () => log.push('actor stopped') });
    const system = await createSystem(
      [
        oneActorChild('semaphore', actor, (a) => {
          log.push(`attached while ${a.getSnapshot().status}`);
          return () => log.push('detached');
        }),
      ],
      { logger: quietLogger() },
    );
    expect(system.get('semaphore')).toBe(actor);
    await system.stop();
    expect(log).toEqual(['attached while active', 'actor stopped', 'detached']);
  });

  it('is watched: an error or an outside stop is fatal, its own stop is not', async () => {
    const onFatal = vi.fn();
    const a = createActor(singleton);
    const b = createActor(singleton);
    const system = await createSystem([oneActorChild('a', a), oneActorChild('b', b)], {
      logger: quietLogger(),
      onFatal,
    });
    b.stop();
    expect(onFatal.mock.calls[0]![0]).toMatchObject({ child: 'b', reason: { type: 'stopped' } });
    await system.stop();
    expect(onFatal).toHaveBeenCalledTimes(1);
  });
});
