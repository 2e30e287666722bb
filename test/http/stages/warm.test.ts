/**
 * `POST /warm` without a variant store (issue #19): there is no warm service, so the route does
 * not exist (404 `No such resource`), before any body is read; a GET of it is the same 404 with
 * one. The warm route's behaviour with a store is tested through HTTP in
 * test/integration/warm.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { warmStage } from '../../../src/http/stages/warm.js';
import { contextOf, exchange } from './harness.js';

describe('warm stage', () => {
  it('answers 404 No such resource without a store, whatever the method', async () => {
    for (const method of ['POST', 'GET']) {
      const r = await exchange((x) => warmStage(x, contextOf(), method), { method, path: '/warm' });
      expect(r.status).toBe(404);
      expect(JSON.parse(r.body)).toEqual({ error: 'not_found', message: 'No such resource' });
    }
  });

  it('answers 404 to a GET even with a warm service: warming is a POST', async () => {
    const warm = {
      submit: async () => {
        throw new Error('not reached');
      },
    };
    const r = await exchange((x) => warmStage(x, contextOf({}, { warm }), 'GET'), {
      path: '/warm',
    });
    expect(r.status).toBe(404);
  });
});

describe('the trim that continues a trim', () => {
  it('moves t:S:D on by D, in canonical numbers; nothing continues past the end or without D', async () => {
    const { nextTrimPath } = await import('../../../src/http/stages/prefetch.js');
    expect(nextTrimPath('/f:mp3/t:0:30/plain/local://a.wav', 100)).toBe(
      '/f:mp3/t:30:30/plain/local://a.wav',
    );
    expect(nextTrimPath('/f:mp3/t:0.1:0.2/plain/local://a.wav', undefined)).toBe(
      '/f:mp3/t:0.3:0.2/plain/local://a.wav',
    );
    expect(nextTrimPath('/f:mp3/t:60:30/plain/local://a.wav', 100)).toBe(
      '/f:mp3/t:90:30/plain/local://a.wav',
    );
    expect(nextTrimPath('/f:mp3/t:80:20/plain/local://a.wav', 100)).toBeUndefined();
    expect(nextTrimPath('/f:mp3/t:30/plain/local://a.wav', 100)).toBeUndefined();
    expect(nextTrimPath('/pr:podcast/plain/local://a.wav', 100)).toBeUndefined();
  });
});

describe('the HLS segments that follow a segment', () => {
  it('names hls_seg:N+1 … N+count, never the last index or past it, never after the init part', async () => {
    const { nextSegmentPaths } = await import('../../../src/http/stages/prefetch.js');
    const p = (n: number | string) => `/f:hls/hls_len:2/hls_seg:${n}/plain/local://a.wav`;
    expect(nextSegmentPaths(p(0), 0, 1, 5)).toEqual([p(1)]);
    expect(nextSegmentPaths(p(1), 1, 3, 5)).toEqual([p(2), p(3), p(4)]);
    expect(nextSegmentPaths(p(3), 3, 3, 5)).toEqual([p(4)]);
    expect(nextSegmentPaths(p(4), 4, 3, 5)).toEqual([]);
    expect(nextSegmentPaths(p(0), 0, 0, 5)).toEqual([]);
    expect(nextSegmentPaths(p('init'), 'init', 2, 5)).toEqual([]);
    expect(nextSegmentPaths('/f:hls/plain/local://a.wav', undefined, 2, 5)).toEqual([]);
    // only the option segment is replaced, not a source path that happens to spell one
    expect(nextSegmentPaths('/f:hls/hls_seg:1/plain/local://hls_seg:1', 1, 1, 5)).toEqual([
      '/f:hls/hls_seg:2/plain/local://hls_seg:1',
    ]);
  });
});
