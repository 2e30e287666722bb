// After a fatal failure: the proxy is closed without draining, bounded by the fatal budget, and
// only then is the host's hook called; a hook that throws or rejects is logged, never left as an
// unhandled rejection; with no hook the failure is logged and the host left running.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { FATAL_STOP_BUDGET_MS, type Fatal } from '../../src/actors/system.js';
import { closeOnFatal } from '../../src/proxy/fatal.js';

const fatal: Fatal = { child: 'readiness', reason: { type: 'stopped' } as Fatal['reason'] };

afterEach(() => {
  vi.useRealTimers();
});

describe('closeOnFatal', () => {
  it('closes with no drain, then calls the hook', async () => {
    const order: string[] = [];
    const close = vi.fn(async (opts: { drainMs: number }) => {
      order.push(`close ${opts.drainMs}`);
    });
    const logger = { error: vi.fn() };
    await closeOnFatal(fatal, {
      close,
      logger,
      onFatal: (f) => {
        order.push(`hook ${f.child}`);
      },
    });
    expect(order).toEqual(['close 0', 'hook readiness']);
    expect(logger.error).not.toHaveBeenCalled();
  });

  it('calls the hook at the budget when the close hangs, and after a close that fails', async () => {
    vi.useFakeTimers();
    const onFatal = vi.fn();
    const logger = { error: vi.fn() };
    const done = closeOnFatal(fatal, { close: () => new Promise(() => {}), logger, onFatal });
    await vi.advanceTimersByTimeAsync(FATAL_STOP_BUDGET_MS - 1);
    expect(onFatal).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    await done;
    expect(onFatal).toHaveBeenCalledTimes(1);
    vi.useRealTimers();
    await closeOnFatal(fatal, { close: () => Promise.reject(new Error('x')), logger, onFatal });
    expect(onFatal).toHaveBeenCalledTimes(2);
  });

  it('logs a hook that throws or rejects', async () => {
    const logger = { error: vi.fn() };
    const close = async () => {};
    await closeOnFatal(fatal, {
      close,
      logger,
      onFatal: () => {
        throw new Error('sync');
      },
    });
    await closeOnFatal(fatal, { close, logger, onFatal: () => Promise.reject(new Error('async')) });
    expect(logger.error).toHaveBeenCalledTimes(2);
    expect(logger.error.mock.calls.map((c) => (c[0] as { err: Error }).err.message)).toEqual([
      'sync',
      'async',
    ]);
  });

  it('with no hook, logs the failure and leaves the host alone', async () => {
    const logger = { error: vi.fn() };
    await closeOnFatal(fatal, { close: async () => {}, logger, budgetMs: 10 });
    expect(logger.error).toHaveBeenCalledWith(
      { child: 'readiness', reason: 'stopped' },
      expect.stringContaining('no onFatal hook was given'),
    );
  });
});
