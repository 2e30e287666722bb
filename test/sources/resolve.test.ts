/**
 * `resolveSource`, the request path's one resolver: a local file under the root is resolved
 * with its size, mtime and an opener; a missing one is 404; past AP_MAX_SRC_BYTES is 413 only
 * when the size is enforced (a render), not for `/info`; a remote source goes to the resolver
 * given (with the same `enforceSize`), and is 404 without one.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ResolvedSource, Source } from '../../src/core/source.js';
import { resolveSource } from '../../src/sources/resolve.js';

const root = mkdtempSync(join(tmpdir(), 'ap-resolve-'));
writeFileSync(join(root, 'a.wav'), Buffer.alloc(2_000));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const config = { localRoot: root, maxSrcBytes: 1_000_000 };
const local = (path: string): Source => ({ scheme: 'local', path });
const remote: Source = { scheme: 'https', url: 'https://x.test/a.wav', host: 'x.test' };

describe('resolveSource', () => {
  it('resolves a local file with size, mtime and an opener that leases it', async () => {
    const r = (await resolveSource(config, local('a.wav'), 'local://a.wav', {
      enforceSize: true,
    })) as ResolvedSource;
    expect(r).toMatchObject({ canonical: 'local://a.wav', size: 2_000, input: { kind: 'local' } });
    expect(typeof r.mtimeMs).toBe('number');
    const opened = await r.open!();
    expect(opened.ok).toBe(true);
    if (opened.ok) {
      expect(opened.lease.size).toBe(2_000);
      opened.lease.release();
    }
  });

  it('answers 404 for a missing file and 413 past the bound only when it is enforced', async () => {
    expect(
      await resolveSource(config, local('b.wav'), 'local://b.wav', { enforceSize: true }),
    ).toEqual({
      failure: { type: 'not_found' },
    });
    const small = { ...config, maxSrcBytes: 1_000 };
    expect(
      await resolveSource(small, local('a.wav'), 'local://a.wav', { enforceSize: true }),
    ).toEqual({
      failure: { type: 'source_too_large' },
    });
    const described = await resolveSource(small, local('a.wav'), 'local://a.wav', {
      enforceSize: false,
    });
    expect(described).toMatchObject({ size: 2_000 });
  });

  it('hands a remote source to the resolver given, and answers 404 without one', async () => {
    const asked: unknown[] = [];
    const answer: ResolvedSource = {
      source: remote,
      canonical: 'https://x.test/a.wav',
      input: { url: 'https://x.test/a.wav', kind: 'https' },
    };
    const viaRemote = await resolveSource(config, remote, 'https://x.test/a.wav', {
      enforceSize: false,
      remote: async (source, canonical, options) => {
        asked.push([source, canonical, options]);
        return answer;
      },
    });
    expect(viaRemote).toBe(answer);
    expect(asked).toEqual([[remote, 'https://x.test/a.wav', { enforceSize: false }]]);
    expect(
      await resolveSource(config, remote, 'https://x.test/a.wav', { enforceSize: true }),
    ).toEqual({
      failure: { type: 'not_found' },
    });
  });
});
