// Liveness and the main thread's kill: ESRCH is dead, a live pid is alive, a zombie whose
// reaper thread is gone counts as dead (kill -0 alone would say alive), a recycled pid (other
// start time) is not ours, pids that would signal a process group are refused, and
// killAndReap escalates TERM → KILL only when the grace runs out.
import { spawn } from 'node:child_process';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { isAlive, killAndReap, processStartTime } from '../../src/workers/liveness.js';
import { expectReaped, fake, procState } from './harness.js';

function spawnChild(path: string) {
  const child = spawn(path, [], { stdio: ['ignore', 'pipe', 'ignore'] });
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  return { pid: child.pid!, child, exited };
}

describe('isAlive', () => {
  it('refuses pids that would signal a process group', () => {
    for (const pid of [0, -1, 1.5, Number.NaN]) expect(() => isAlive(pid)).toThrow(RangeError);
  });

  it('is true for a live process and false once it is reaped', async () => {
    expect(isAlive(process.pid)).toBe(true);
    const { pid, child, exited } = spawnChild(fake('hang.sh'));
    expect(isAlive(pid)).toBe(true);
    child.kill('SIGKILL');
    await exited;
    expect(isAlive(pid)).toBe(false);
    expectReaped(pid);
  });

  it('a start time that does not match means the pid is no longer ours', () => {
    const startTime = processStartTime(process.pid);
    expect(startTime).toMatch(/^\d+$/);
    expect(isAlive(process.pid, startTime)).toBe(true);
    expect(isAlive(process.pid, `${startTime}0`)).toBe(false);
  });

  it('a zombie left by a terminated worker thread counts as dead', async () => {
    const worker = new Worker(
      `const { spawn } = require('node:child_process');
       const { parentPort } = require('node:worker_threads');
       parentPort.postMessage(spawn('sleep', ['30'], { stdio: 'ignore' }).pid);`,
      { eval: true },
    );
    const pid = await new Promise<number>((resolve) => worker.once('message', resolve));
    await worker.terminate(); // nobody will ever waitpid() this child now
    process.kill(pid, 'SIGKILL');
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(procState(pid)).toBe('Z');
    expect(() => process.kill(pid, 0)).not.toThrow(); // kill -0 says alive…
    expect(isAlive(pid)).toBe(false); // …but it runs nothing
  });
});

describe('killAndReap', () => {
  it('reports already_dead for a process that is gone', async () => {
    const { pid, child, exited } = spawnChild(fake('hang.sh'));
    child.kill('SIGKILL');
    await exited;
    expect(await killAndReap(pid)).toMatchObject({ pid, outcome: 'already_dead' });
  });

  it('SIGTERM is enough for a process that honours it', async () => {
    const { pid, exited } = spawnChild(fake('hang.sh'));
    const report = await killAndReap(pid, { termGraceMs: 2_000 });
    expect(report.outcome).toBe('terminated');
    expect(report.elapsedMs).toBeLessThan(2_000);
    // Dead at once; this thread's own loop reaps it on its next turn (a zombie until then).
    expect(isAlive(pid)).toBe(false);
    await exited;
    expectReaped(pid);
  });

  it('a process that ignores SIGTERM is killed once the grace runs out', async () => {
    const { pid, child, exited } = spawnChild(fake('ignore-term.sh'));
    await new Promise((resolve) => child.stdout!.once('data', resolve)); // the trap is set
    const report = await killAndReap(pid, { termGraceMs: 200, pollMs: 10 });
    expect(report.outcome).toBe('killed');
    expect(report.elapsedMs).toBeGreaterThanOrEqual(200);
    expect(isAlive(pid)).toBe(false);
    await exited;
    expectReaped(pid);
  });
});
