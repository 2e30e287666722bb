/**
 * `openLocal`: the proxy's own open of a resolved local path, judged after the open. Each swap
 * below happens after `resolveLocal` answered, exactly where ffmpeg used to open the path itself.
 */
import { execFileSync } from 'node:child_process';
import {
  fstatSync,
  mkdirSync,
  mkdtempSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openLocal, resolveLocal } from '../../src/sources/local.js';

let base: string;
let root: string;

beforeAll(() => {
  base = realpathSync(mkdtempSync(join(tmpdir(), 'ap-open-')));
  root = join(base, 'root');
  mkdirSync(join(root, 'd'), { recursive: true });
  mkdirSync(join(base, 'outside'));
  writeFileSync(join(root, 'd', 'a.wav'), 'inside');
  writeFileSync(join(root, 'plain.wav'), 'inside, 22 bytes long!');
  writeFileSync(join(base, 'outside', 'a.wav'), 'OUTSIDE');
});
afterAll(() => rmSync(base, { recursive: true, force: true }));

async function resolved(rel: string): Promise<string> {
  const r = await resolveLocal(root, rel);
  if (!r.ok) throw new Error(`${rel} did not resolve`);
  return r.path;
}

describe('openLocal', () => {
  it('opens a regular file inside the root; the lease owns the descriptor until released', async () => {
    const o = await openLocal(root, await resolved('plain.wav'));
    if (!o.ok) throw new Error(o.refusal);
    expect(o.lease.size).toBe(22);
    expect(fstatSync(o.lease.fd).size).toBe(22);
    o.lease.release();
    o.lease.release(); // idempotent
    await new Promise((r) => setTimeout(r, 20));
    expect(() => fstatSync(o.lease.fd)).toThrow(/EBADF/);
  });

  it('a directory swapped for a symlink to outside after the walk: refused', async () => {
    const path = await resolved('d/a.wav');
    renameSync(join(root, 'd'), join(root, 'd.real'));
    symlinkSync('../outside', join(root, 'd'));
    try {
      expect(await openLocal(root, path)).toEqual({ ok: false, refusal: 'not_found' });
    } finally {
      rmSync(join(root, 'd'));
      renameSync(join(root, 'd.real'), join(root, 'd'));
    }
  });

  it('the file swapped for a symlink (even one inside): refused, the link is not followed', async () => {
    const path = await resolved('d/a.wav');
    renameSync(path, `${path}.real`);
    symlinkSync('../plain.wav', path);
    try {
      expect(await openLocal(root, path)).toEqual({ ok: false, refusal: 'not_found' });
    } finally {
      rmSync(path);
      renameSync(`${path}.real`, path);
    }
  });

  it('the file swapped for a FIFO: refused at once, not waiting for a writer', async () => {
    const path = await resolved('d/a.wav');
    renameSync(path, `${path}.real`);
    execFileSync('mkfifo', [path]);
    try {
      const t0 = performance.now();
      expect(await openLocal(root, path)).toEqual({ ok: false, refusal: 'not_found' });
      expect(performance.now() - t0).toBeLessThan(1_000);
    } finally {
      rmSync(path);
      renameSync(`${path}.real`, path);
    }
  });

  it('a path outside the root, the root itself, or a vanished file: refused', async () => {
    expect(await openLocal(root, join(base, 'outside', 'a.wav'))).toEqual({
      ok: false,
      refusal: 'not_found',
    });
    expect(await openLocal(root, root)).toEqual({ ok: false, refusal: 'not_found' });
    expect(await openLocal(root, join(root, 'gone.wav'))).toEqual({
      ok: false,
      refusal: 'not_found',
    });
    expect(await openLocal(undefined, join(root, 'plain.wav'))).toEqual({
      ok: false,
      refusal: 'not_found',
    });
  });

  it('over maxSrcBytes, measured on the opened file: source_too_large', async () => {
    const path = await resolved('plain.wav');
    expect(await openLocal(root, path, { maxSrcBytes: 21 })).toEqual({
      ok: false,
      refusal: 'source_too_large',
    });
    const fits = await openLocal(root, path, { maxSrcBytes: 22 });
    expect(fits.ok).toBe(true);
    if (fits.ok) fits.lease.release();
  });
});
