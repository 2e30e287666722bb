/**
 * The per-task monitor the burst bench reports (`longTasks.ts`): a callback and the microtasks,
 * ticks and `queueMicrotask`s after it are one task; two immediates in one check phase are two;
 * no task holds loop idle time. Spins are on the wall clock, so a loaded machine can only make a
 * task longer, never split or merge one: the assertions hold at any load. About 0.3 s.
 */
import { performance } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { taskMonitor } from './longTasks.js';

function spin(ms: number): void {
  const t = performance.now();
  while (performance.now() - t < ms) {
    // busy: this is the task's work
  }
}

const settle = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

describe('taskMonitor', () => {
  it('counts a callback with the microtasks and ticks after it as one task', async () => {
    const m = taskMonitor({ overMs: 10 });
    m.enable();
    await settle(5);
    await new Promise<void>((done) => {
      setTimeout(() => {
        spin(12);
        void Promise.resolve().then(() => spin(4));
        queueMicrotask(() => spin(3));
        process.nextTick(() => {
          spin(2);
          setTimeout(done, 5);
        });
      }, 1);
    });
    m.disable();
    const f = m.figures();
    const top = f.longest[0]!;
    expect(top.what).toBe('Timeout');
    expect(top.ms).toBeGreaterThanOrEqual(21);
    expect(top.parts).toBeGreaterThanOrEqual(4);
    expect(f.maxMs).toBe(top.ms);
    expect(f.over).toBeGreaterThanOrEqual(1);
    for (const t of f.longest) {
      expect(t.runMs).toBeLessThanOrEqual(t.ms);
      expect(t.idleMs).toBeLessThan(0.05);
    }
  });

  it('keeps callbacks of one loop phase apart: 40 immediates are 40 tasks', async () => {
    const m = taskMonitor();
    await settle(1);
    m.enable();
    await new Promise<void>((done) => {
      let left = 40;
      for (let i = 0; i < 40; i++)
        setImmediate(() => {
          spin(1);
          if (--left === 0) setTimeout(done, 5);
        });
    });
    m.disable();
    const f = m.figures();
    expect(f.count).toBeGreaterThanOrEqual(40);
    const immediates = f.longest.filter((t) => t.what === 'Immediate');
    expect(immediates.length).toBeGreaterThan(0);
    for (const t of immediates) expect(t.parts).toBe(1);
    // The sum of the tasks is the loop's busy time, less libuv's own work between them.
    expect(f.sumMs).toBeGreaterThanOrEqual(40);
    expect(f.idleMs).toBeLessThan(0.05);
    if (process.platform === 'linux') expect(Number.isFinite(f.maxRunMs)).toBe(true);
  });
});
