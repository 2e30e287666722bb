// The resolved root is kept for ROOT_RECHECK_MS and no longer: a root symlink re-pointed on
// deploy is followed once that window has passed (never before the clock says so), and a root
// that went missing is looked at again on the next call rather than remembered.
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { LOCAL_NOT_FOUND, ROOT_RECHECK_MS, resolveLocal } from '../../src/sources/local.js';

const base = mkdtempSync(join(tmpdir(), 'ap-root-recheck-'));
afterAll(() => rmSync(base, { recursive: true, force: true }));
afterEach(() => vi.restoreAllMocks());

function release(name: string): string {
  const dir = join(base, name);
  mkdirSync(dir);
  writeFileSync(join(dir, 'a.wav'), name);
  return dir;
}

describe('the resolved root', () => {
  it('follows a re-pointed root only after ROOT_RECHECK_MS', async () => {
    const v1 = release('v1');
    const v2 = release('v2');
    const root = join(base, 'current');
    symlinkSync('v1', root);
    let now = 1_000_000;
    vi.spyOn(performance, 'now').mockImplementation(() => now);
    expect(await resolveLocal(root, 'a.wav')).toMatchObject({ path: join(v1, 'a.wav') });
    unlinkSync(root);
    symlinkSync('v2', root); // the deploy swaps the link
    now += ROOT_RECHECK_MS - 1;
    expect(await resolveLocal(root, 'a.wav')).toMatchObject({ path: join(v1, 'a.wav') });
    now += 2;
    expect(await resolveLocal(root, 'a.wav')).toMatchObject({ path: join(v2, 'a.wav') });
  });

  it('does not remember a missing root', async () => {
    const root = join(base, 'later');
    vi.spyOn(performance, 'now').mockReturnValue(5_000_000);
    expect(await resolveLocal(root, 'a.wav')).toBe(LOCAL_NOT_FOUND);
    mkdirSync(root);
    writeFileSync(join(root, 'a.wav'), 'x');
    expect(await resolveLocal(root, 'a.wav')).toMatchObject({ path: join(root, 'a.wav') });
  });
});
