// The pool, with renders running in real worker threads: output through a worker is the same
// bytes as a direct run; Piscina's own queue stays empty and a task without a free slot fails
// fast (ERR_POOL_QUEUE); cancel over Comlink is a barrier that leaves the thread alive; a worker
// thread that dies or hangs mid-render still ends with its ffmpeg killed from the main thread;
// a task module that throws at load makes the pool unhealthy instead of hanging; stop drains.
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { RenderOutcome } from '../../src/core/worker.js';
import { isAlive } from '../../src/workers/liveness.js';
import {
  createWorkerPool,
  PoolError,
  type WorkerPool,
  workerExecArgv,
} from '../../src/workers/pool.js';
import {
  CANCEL_CONFIRM_MS,
  runProbe,
  runRender,
  startRender,
  type TaskHandle,
} from '../../src/workers/renderClient.js';
import {
  direct,
  expectNoSurvivors,
  expectReaped,
  fake,
  procState,
  seenPids,
  sineArgv,
} from './harness.js';

const LONG_MS = 30_000;

let pool: WorkerPool;

beforeAll(async () => {
  pool = createWorkerPool({ name: 'render-test', size: 2 });
  await pool.start();
});

afterAll(async () => {
  await pool.destroy();
});

afterEach(() => {
  expect(pool.queueSize).toBe(0);
  expectNoSurvivors();
});

/** Starts a render and resolves once ffmpeg's pid is known. */
function started(spec: Parameters<typeof startRender>[1], on: WorkerPool = pool) {
  let settle!: (outcome: RenderOutcome) => void;
  const outcome = new Promise<RenderOutcome>((resolve) => {
    settle = resolve;
  });
  const chunks: Buffer[] = [];
  let resolvePid!: (pid: number) => void;
  const pid = new Promise<number>((resolve) => {
    resolvePid = resolve;
  });
  const handle: TaskHandle = startRender(on, spec, {
    onPid: (p) => {
      seenPids.add(p);
      resolvePid(p);
    },
    onChunk: (data) => {
      chunks.push(data);
      handle.ack(data.length);
    },
    onSettled: settle,
  });
  return { handle, outcome, chunks, pid };
}

describe('construction and lifecycle', () => {
  it('validates its options at the boundary', () => {
    expect(() => createWorkerPool({ name: 'x', size: 0 })).toThrow(RangeError);
    expect(() => createWorkerPool({ name: '', size: 1 })).toThrow(TypeError);
  });

  it('runs size + 1 threads (one spare for health) and answers a health round trip', async () => {
    expect(pool.threads).toHaveLength(3);
    expect(await pool.healthy(2_000)).toBe(true);
    expect(await pool.run({ kind: 'echo', value: 42 })).toBe(42);
  });

  it('stop drains running tasks, then refuses work; start brings it back', async () => {
    const own = createWorkerPool({ name: 'stop-test', size: 1 });
    await own.start();
    const run = started(
      { executable: fake('slow-drip.sh'), argv: ['5', '0.05'], timeoutMs: LONG_MS },
      own,
    );
    await run.pid;
    await own.stop({ drainMs: 5_000 });
    expect(await run.outcome).toMatchObject({ type: 'done', bytes: 5 });
    await expect(own.run({ kind: 'echo', value: 1 })).rejects.toMatchObject({
      code: 'ERR_POOL_STOPPED',
    });
    expect(await own.healthy()).toBe(false);
    await own.start();
    expect(await own.run({ kind: 'echo', value: 2 })).toBe(2);
    await own.destroy();
  });

  it('a task module that throws at load makes the pool unhealthy, not hung', async () => {
    const broken = createWorkerPool({
      name: 'broken',
      size: 1,
      filename: new URL('../fixtures/workers/throwingTask.ts', import.meta.url),
    });
    const failure = await broken.start().catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(PoolError);
    expect(failure).toMatchObject({ code: 'ERR_POOL_START' });
    expect(broken.failure).not.toBeNull();
    expect(await broken.healthy(500)).toBe(false);
    await expect(broken.run({ kind: 'echo', value: 1 })).rejects.toMatchObject({
      code: 'ERR_POOL_FAILED',
    });
    await broken.destroy();
  });
});

describe('renders in worker threads', () => {
  it('output is byte-identical to the same argv run directly; the pid is reaped', async () => {
    const argv = sineArgv(5);
    const [result, expected] = await Promise.all([
      runRender(pool, { executable: 'ffmpeg', argv, timeoutMs: LONG_MS }),
      direct('ffmpeg', argv),
    ]);
    seenPids.add(result.pid!);
    expect(result.outcome).toMatchObject({ type: 'done', bytes: expected.length });
    expect(Buffer.concat(result.chunks).equals(expected)).toBe(true);
    expectReaped(result.pid);
    expect(pool.inFlight).toBe(0);
  });

  it('Piscina never queues: size renders run at once, one more is refused with ERR_POOL_QUEUE', async () => {
    const a = started({ executable: fake('hang.sh'), argv: [], timeoutMs: LONG_MS });
    const b = started({ executable: fake('hang.sh'), argv: [], timeoutMs: LONG_MS });
    await Promise.all([a.pid, b.pid]);
    expect(pool.inFlight).toBe(2);
    expect(pool.queueSize).toBe(0);
    const refused = await pool.run({ kind: 'echo', value: 1 }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(PoolError);
    expect((refused as PoolError).code).toBe('ERR_POOL_QUEUE');
    expect(pool.queueSize).toBe(0);
    // A render submitted without a grant fails at once, as data, with nothing spawned.
    const third = await runRender(pool, {
      executable: fake('hang.sh'),
      argv: [],
      timeoutMs: 1_000,
    });
    expect(third.pid).toBeNull();
    expect(third.outcome).toMatchObject({ type: 'error', class: 'render_failed' });
    expect(third.outcome.type === 'error' && third.outcome.detail).toMatch(/ERR_POOL_QUEUE/);
    // The spare thread still answers health checks while every slot is busy.
    expect(await pool.healthy(2_000)).toBe(true);
    await Promise.all([a.handle.cancel(), b.handle.cancel()]);
    expect(pool.inFlight).toBe(0);
  });

  it('a timeout of 100 ms on a hanging script: class timeout and the process is gone', async () => {
    const run = started({ executable: fake('hang.sh'), argv: [], timeoutMs: 100 });
    const pid = await run.pid;
    expect(await run.outcome).toMatchObject({ type: 'error', class: 'timeout' });
    expectReaped(pid);
  });

  it('crash after N bytes through a worker: render_failed after exactly those bytes', async () => {
    const result = await runRender(pool, {
      executable: fake('crash-after.sh'),
      argv: ['200000', '2'],
      timeoutMs: LONG_MS,
    });
    seenPids.add(result.pid!);
    expect(result.outcome).toMatchObject({ type: 'error', class: 'render_failed', bytes: 200_000 });
    expect(Buffer.concat(result.chunks).length).toBe(200_000);
  });
});

describe('cancel and the kill discipline across the thread boundary', () => {
  it('cancel resolves only once ffmpeg is dead (ESRCH right after) and the thread is free', async () => {
    const run = started({ executable: fake('hang.sh'), argv: [], timeoutMs: LONG_MS });
    const pid = await run.pid;
    const threads = pool.threads.map((t) => t.threadId);
    const report = await run.handle.cancel();
    expectReaped(pid);
    expect(report).toEqual({ pid, by: 'worker', outcome: 'terminated' });
    expect(pool.inFlight).toBe(0);
    expect(pool.threads.map((t) => t.threadId)).toEqual(threads); // no respawn
    expect(await run.outcome).toMatchObject({ type: 'error', class: 'cancelled' });
  });

  it('a script that ignores SIGTERM makes cancel take the 2 s grace, then it is killed', async () => {
    const run = started({ executable: fake('ignore-term.sh'), argv: [], timeoutMs: LONG_MS });
    const pid = await run.pid;
    await vi.waitFor(() => expect(run.chunks.length).toBeGreaterThan(0));
    const t0 = performance.now();
    const report = await run.handle.cancel();
    const elapsed = performance.now() - t0;
    expectReaped(pid);
    expect(report.outcome).toBe('killed');
    expect(elapsed).toBeGreaterThanOrEqual(2_000);
  });

  it('the worker thread dying mid-render: render_failed, and the main thread kills ffmpeg', async () => {
    const run = started({ executable: fake('hang.sh'), argv: [], timeoutMs: LONG_MS });
    const pid = await run.pid;
    await Promise.all(pool.threads.map((thread) => thread.terminate()));
    const outcome = await run.outcome;
    expect(outcome).toMatchObject({ type: 'error', class: 'render_failed' });
    expect(outcome.type === 'error' && outcome.detail).toMatch(/worker thread died/);
    // Killed, but its reaper (the worker's event loop) is gone: the pid stays a zombie until
    // this process exits. It runs nothing; `isAlive` counts it as dead.
    expect(isAlive(pid)).toBe(false);
    expect(['Z', null]).toContain(procState(pid));
    // The pool replaced its threads and works.
    expect(await pool.run({ kind: 'echo', value: 'again' })).toBe('again');
  });

  it('a hung worker: cancel waits CANCEL_CONFIRM_MS, then kills from the main thread', async () => {
    const hung = createWorkerPool({
      name: 'hung',
      size: 1,
      filename: new URL('../fixtures/workers/hangingRenderTask.ts', import.meta.url),
    });
    await hung.start();
    const run = started({ executable: fake('hang.sh'), argv: [], timeoutMs: LONG_MS }, hung);
    const pid = await run.pid;
    await new Promise((resolve) => setTimeout(resolve, 400)); // the worker is now blocked
    const t0 = performance.now();
    const report = await run.handle.cancel();
    const elapsed = performance.now() - t0;
    expect(report).toMatchObject({ pid, by: 'main', outcome: 'terminated' });
    expect(isAlive(pid)).toBe(false);
    expect(elapsed).toBeGreaterThanOrEqual(CANCEL_CONFIRM_MS);
    expect(await run.outcome).toMatchObject({ type: 'error', class: 'cancelled' });
    expect(hung.inFlight).toBe(0);
    await hung.destroy();
  });

  it('a consumer that detaches: the worker kills ffmpeg without being asked twice', async () => {
    let settled = false;
    const run = started({ executable: fake('hang.sh'), argv: [], timeoutMs: LONG_MS });
    void run.outcome.then(() => {
      settled = true;
    });
    const pid = await run.pid;
    run.handle.detach();
    await vi.waitFor(() => expectReaped(pid), { timeout: 3_000 });
    await vi.waitFor(() => expect(pool.inFlight).toBe(0));
    expect(settled).toBe(false); // a detached consumer hears nothing more
  });
});

describe('probe through a worker', () => {
  it('returns ffprobe JSON; aborting kills the process through the worker', async () => {
    const ok = await runProbe(pool, {
      executable: 'ffprobe',
      argv: ['-v', 'error', '-f', 'lavfi', '-i', 'sine=duration=1', '-show_format', '-of', 'json'],
      timeoutMs: LONG_MS,
    });
    expect(ok.type).toBe('ok');
    expect(JSON.parse(ok.type === 'ok' ? ok.stdout : '{}').format.format_name).toBe('lavfi');

    const abort = new AbortController();
    const pending = runProbe(
      pool,
      { executable: fake('hang.sh'), argv: [], timeoutMs: LONG_MS },
      { signal: abort.signal },
    );
    setTimeout(() => abort.abort(), 100);
    expect(await pending).toMatchObject({ type: 'error', class: 'cancelled' });
    expect(pool.inFlight).toBe(0);
  });
});

describe('workerExecArgv', () => {
  it('drops tsx loaders and V8 flags a worker would refuse, keeps the rest in order', () => {
    expect(
      workerExecArgv([
        '--max-semi-space-size=2',
        '--enable-source-maps',
        '--import',
        '/repo/node_modules/tsx/dist/esm/index.mjs',
        '--trace-gc',
        '--conditions',
        'development',
        '--import=./other.mjs',
        '--stack-size',
        '2000',
        '--no-warnings',
      ]),
    ).toEqual([
      '--enable-source-maps',
      '--conditions',
      'development',
      '--import=./other.mjs',
      '--no-warnings',
    ]);
  });
});
