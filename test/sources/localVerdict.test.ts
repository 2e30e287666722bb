// The authorisation verdict is remembered for a HIT (no lstat chain per request), and that memory
// never lets a request read outside the root: a directory swapped for a symlink to an outside
// directory after a verdict was kept is refused by the render path at once (its walk and its
// open are never cached), and by authorisation itself once the root's recheck window has passed.
// Refusals are not remembered, and the memory is bounded (the oldest verdict is walked again).
import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import {
  authorizeLocal,
  LOCAL_NOT_FOUND,
  LOCAL_VERDICTS_MAX,
  openLocal,
  ROOT_RECHECK_MS,
  resolveLocal,
} from '../../src/sources/local.js';

const base = mkdtempSync(join(tmpdir(), 'ap-verdict-'));
afterAll(() => rmSync(base, { recursive: true, force: true }));
afterEach(() => vi.restoreAllMocks());

let trees = 0;
/** `root/d/a.wav` (inside) and `outside/a.wav` (the secret), each test a tree of its own. */
function tree(): { root: string; realRoot: string; swap: () => void } {
  const dir = join(base, `t${trees++}`);
  const root = join(dir, 'root');
  mkdirSync(join(root, 'd'), { recursive: true });
  mkdirSync(join(dir, 'outside'));
  writeFileSync(join(root, 'd', 'a.wav'), 'INSIDE');
  writeFileSync(join(dir, 'outside', 'a.wav'), 'SECRET');
  return {
    root,
    realRoot: realpathSync(root),
    // The attack: the directory becomes a relative symlink that climbs out of the root.
    swap: () => {
      renameSync(join(root, 'd'), join(root, 'd.old'));
      symlinkSync('../outside', join(root, 'd'));
    },
  };
}

function clock(start: number): { advance: (ms: number) => void } {
  let now = start;
  vi.spyOn(performance, 'now').mockImplementation(() => now);
  return { advance: (ms) => (now += ms) };
}

describe('a kept verdict and a symlink swapped in after it', () => {
  it('the render path refuses at once: its walk and its open are never cached', async () => {
    const t = tree();
    clock(10_000_000);
    expect(await authorizeLocal(t.root, 'd/a.wav')).toEqual({ ok: true });
    const before = await resolveLocal(t.root, 'd/a.wav');
    expect(before).toMatchObject({ ok: true, path: join(t.realRoot, 'd', 'a.wav') });
    t.swap();
    expect(readFileSync(join(t.root, 'd', 'a.wav'), 'utf8')).toBe('SECRET'); // the swap works
    // Within the same instant: authorisation may still say yes (the documented window) …
    expect(await authorizeLocal(t.root, 'd/a.wav')).toEqual({ ok: true });
    // … but nothing that reads the source follows it out of the root.
    expect(await resolveLocal(t.root, 'd/a.wav')).toBe(LOCAL_NOT_FOUND);
    const opened = await openLocal(t.root, (before as { path: string }).path);
    expect(opened).toEqual({ ok: false, refusal: 'not_found' });
  });

  it('authorisation refuses once the root recheck window has passed', async () => {
    const t = tree();
    const c = clock(20_000_000);
    expect(await authorizeLocal(t.root, 'd/a.wav')).toEqual({ ok: true });
    t.swap();
    c.advance(ROOT_RECHECK_MS - 1);
    expect(await authorizeLocal(t.root, 'd/a.wav')).toEqual({ ok: true });
    c.advance(2);
    expect(await authorizeLocal(t.root, 'd/a.wav')).toBe(LOCAL_NOT_FOUND);
  });

  it('a verdict lives no longer than the root reading it rests on', async () => {
    const t = tree();
    const c = clock(30_000_000);
    await resolveLocal(t.root, 'd/a.wav'); // the root is resolved now
    c.advance(ROOT_RECHECK_MS - 100);
    expect(await authorizeLocal(t.root, 'd/a.wav')).toEqual({ ok: true }); // walked now
    t.swap();
    c.advance(101); // the root's reading is ROOT_RECHECK_MS + 1 old, the walk only 101 ms
    expect(await authorizeLocal(t.root, 'd/a.wav')).toBe(LOCAL_NOT_FOUND);
  });

  it('refusals are not remembered: a path fixed on disk is authorised at once', async () => {
    const t = tree();
    clock(40_000_000);
    t.swap();
    expect(await authorizeLocal(t.root, 'd/a.wav')).toBe(LOCAL_NOT_FOUND);
    rmSync(join(t.root, 'd'));
    renameSync(join(t.root, 'd.old'), join(t.root, 'd'));
    expect(await authorizeLocal(t.root, 'd/a.wav')).toEqual({ ok: true });
  });

  it('verdicts are bounded: the oldest is forgotten and walked again', async () => {
    const t = tree();
    clock(50_000_000);
    expect(await authorizeLocal(t.root, 'd/a.wav')).toEqual({ ok: true });
    // Missing files are authorised (existence is not policy): LOCAL_VERDICTS_MAX newer verdicts.
    for (let i = 0; i < LOCAL_VERDICTS_MAX; i++) {
      expect(await authorizeLocal(t.root, `m${i}.wav`)).toEqual({ ok: true });
    }
    t.swap();
    expect(await authorizeLocal(t.root, 'd/a.wav')).toBe(LOCAL_NOT_FOUND);
  });

  it('a verdict is per root: the same path under another root is walked', async () => {
    const a = tree();
    const b = tree();
    clock(60_000_000);
    expect(await authorizeLocal(a.root, 'd/a.wav')).toEqual({ ok: true });
    b.swap();
    expect(await authorizeLocal(b.root, 'd/a.wav')).toBe(LOCAL_NOT_FOUND);
  });
});
