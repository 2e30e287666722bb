/**
 * The warm service's own rules (issue #19), over a scripted render service and store: a setback
 * (refused, displaced, preempted) is retried after the semaphore's Retry-After doubled per
 * attempt and capped, for at most `AP_WARM_ATTEMPTS` attempts, then `failed` with its reason;
 * any other failure is final at once; at most `AP_WARM_ADMITTED` jobs are admitted at once and
 * the rest wait in order; one job per key; `close()` leaves no timer; a cluster peer's claim
 * means this node does not render.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { loadConfig, staticConfig } from '../../src/config/index.js';
import type { RenderFailure } from '../../src/core/failure.js';
import type { RenderRequest, SubscribeOutcome } from '../../src/core/request.js';
import type { SubscriberMessage } from '../../src/machines/renderCoordinator.js';
import { setbackOf, WarmService } from '../../src/services/warmService.js';

const request = (key: string) => ({ key }) as unknown as RenderRequest;
const entry = (key: string) => ({
  path: `/p/${key}`,
  class: 'low' as const,
  request: request(key),
});

function rig(
  env: Record<string, string> = {},
  answers: (key: string, n: number) => 'queued' | RenderFailure = () => 'queued',
) {
  const stored = new Set<string>();
  const listeners = new Map<string, (m: SubscriberMessage) => void>();
  const calls: string[] = [];
  const renders = {
    async subscribe(
      req: RenderRequest,
      _id: string,
      on: (m: SubscriberMessage) => void,
    ): Promise<SubscribeOutcome> {
      calls.push(req.key);
      const answer = answers(req.key, calls.filter((k) => k === req.key).length);
      if (answer !== 'queued') return { type: 'failed', failure: answer };
      listeners.set(req.key, on);
      return { type: 'miss', coordinator: {} as never, state: 'queued', backlog: [] };
    },
  };
  const store = {
    head: async (key: string) => (stored.has(key) ? ({ size: 1 } as never) : undefined),
  };
  const config = staticConfig(loadConfig({ AP_MAX_CONCURRENCY: '1', AP_QUEUE_SIZE: '2', ...env }));
  const warm = new WarmService({ renders, store, config, now: () => Date.now() });
  const finish = (key: string) => {
    stored.add(key);
    listeners.get(key)!({ type: 'done', info: { exitStatus: 0, bytes: 1 } });
  };
  const fail = (key: string, failure: RenderFailure) =>
    listeners.get(key)!({ type: 'error', failure });
  return { warm, calls, finish, fail, stored };
}

const settledOf = (warm: WarmService, key: string) =>
  warm.status().recent.find((j) => j.key === key);

describe('warm service', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('classifies setbacks: displaced, refused and preempted are retried; nothing else is', () => {
    expect(
      setbackOf({
        class: 'queue_full',
        retryAfterS: 2,
        detail: 'displaced by a higher admission class',
      }),
    ).toBe('displaced');
    expect(setbackOf({ class: 'queue_full', retryAfterS: 2 })).toBe('queue_full');
    expect(setbackOf({ class: 'cancelled', detail: 'preempted: no listener left' })).toBe(
      'preempted',
    );
    expect(setbackOf({ class: 'cancelled', detail: 'shutting down' })).toBeUndefined();
    expect(setbackOf({ class: 'render_failed' })).toBeUndefined();
  });

  it('a refused entry backs off (Retry-After doubled, capped) and fails after AP_WARM_ATTEMPTS', async () => {
    const { warm, calls } = rig(
      { AP_WARM_ATTEMPTS: '4', AP_WARM_BACKOFF_MAX_SECONDS: '5' },
      () => ({ class: 'queue_full', retryAfterS: 2 }),
    );
    const [report] = await warm.submit([entry('k')]);
    expect(report).toEqual({
      status: 'rejected',
      reason: 'queue_full',
      retryInS: 2,
      job: expect.any(String),
    });
    await vi.advanceTimersByTimeAsync(1_999);
    expect(calls).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1); // 2 s
    expect(calls).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(4_000); // 4 s
    expect(calls).toHaveLength(3);
    await vi.advanceTimersByTimeAsync(4_999); // min(8, 5) s
    expect(calls).toHaveLength(3);
    await vi.advanceTimersByTimeAsync(1);
    expect(calls).toHaveLength(4);
    const job = settledOf(warm, 'k')!;
    expect(job.state).toBe('failed');
    expect(job.failure).toBe('queue_full: 4 attempts');
    expect(job.history).toEqual(
      Array(4).fill('rejected(queue_full)').concat('failed(queue_full: 4 attempts)'),
    );
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a render failure is final at once; a displaced one is retried and stored', async () => {
    const { warm, fail, finish } = rig();
    await warm.submit([entry('a'), entry('b')]);
    fail('a', { class: 'render_failed', detail: 'exit 1' });
    expect(settledOf(warm, 'a')).toMatchObject({
      state: 'failed',
      failure: 'render_failed: exit 1',
    });
    fail('b', {
      class: 'queue_full',
      retryAfterS: 1,
      detail: 'displaced by a higher admission class',
    });
    expect(warm.status().jobs[0]).toMatchObject({ key: 'b', state: 'backoff', retryInS: 1 });
    await vi.advanceTimersByTimeAsync(1_000);
    finish('b');
    await vi.advanceTimersByTimeAsync(0);
    expect(settledOf(warm, 'b')!.history).toEqual([
      'started',
      'rejected(displaced)',
      'started',
      'stored',
    ]);
  });

  it('admits at most AP_WARM_ADMITTED at once, the rest wait in order; one job per key', async () => {
    const { warm, calls, finish } = rig({ AP_WARM_ADMITTED: '2' });
    const reports = await warm.submit(['a', 'b', 'c', 'a'].map(entry));
    expect(reports.map((r) => r.status === 'started' && r.state)).toEqual([
      'queued',
      'queued',
      'waiting',
      'waiting'.replace('waiting', 'queued'),
    ]);
    expect(calls).toEqual(['a', 'b']);
    finish('a');
    await vi.advanceTimersByTimeAsync(0);
    expect(calls).toEqual(['a', 'b', 'c']);
    expect(warm.status().admitted).toBe(2);
    // a stored key is a hit
    expect((await warm.submit([entry('a')]))[0]).toEqual({ status: 'hit' });
  });

  it('warm_full beyond AP_WARM_MAX_PENDING; close() fails what waits and leaves no timer', async () => {
    const { warm } = rig({ AP_WARM_ADMITTED: '1', AP_WARM_MAX_PENDING: '2' });
    const reports = await warm.submit(['a', 'b', 'c'].map(entry));
    expect(reports[2]).toEqual({ status: 'rejected', reason: 'warm_full' });
    warm.close();
    expect(settledOf(warm, 'b')).toMatchObject({ state: 'failed', failure: 'shutting_down' });
    expect((await warm.submit([entry('d')]))[0]).toEqual({
      status: 'rejected',
      reason: 'shutting_down',
    });
    expect(vi.getTimerCount()).toBe(0);
  });

  it('in cluster mode a key a peer has claimed is not rendered here', async () => {
    const calls: string[] = [];
    const released: string[] = [];
    const warm = new WarmService({
      renders: {
        async subscribe(req) {
          calls.push(req.key);
          return { type: 'miss', coordinator: {} as never, state: 'queued', backlog: [] };
        },
      },
      store: { head: async () => undefined },
      config: staticConfig(loadConfig({})),
      claim: async (key) =>
        key === 'theirs'
          ? { type: 'peer', nodeId: 'node-b' }
          : { type: 'local', release: () => released.push(key) },
    });
    const [theirs, ours] = await warm.submit([entry('theirs'), entry('ours')]);
    expect(theirs).toEqual({
      status: 'started',
      job: expect.any(String),
      state: 'peer',
      node: 'node-b',
    });
    expect(ours).toMatchObject({ status: 'started', state: 'queued' });
    expect(calls).toEqual(['ours']);
    warm.close();
  });
});
