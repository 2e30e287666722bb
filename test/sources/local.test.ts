// Proves local confinement on a real temporary tree: regular files resolve to their real path
// inside the root (through relative links, directory links and up to 32 hops); every refusal
// (absolute, empty, over-long, too many components, NUL, `..` climbing out, links escaping,
// absolute link targets even inside the root, cycles, 33 hops, directories, FIFOs, missing files,
// unusable roots) returns the one identical value; authorisation ignores existence; 413 sizing.
import { chmodSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  authorizeLocal,
  LOCAL_NOT_FOUND,
  LOCAL_TOO_LARGE,
  localEtagMaterial,
  resolveLocal,
} from '../../src/sources/local.js';
import { authorizeSource, parseSource, SOURCE_NOT_FOUND } from '../../src/sources/parse.js';
import { buildLocalTree, type LocalTree } from './localTree.js';

let tree: LocalTree;
beforeAll(() => {
  tree = buildLocalTree();
});
afterAll(() => tree.cleanup());

const track = () => join(tree.realRoot, 'previews', 'track.wav');

describe('resolveLocal: served', () => {
  it.each([
    ['previews/track.wav'],
    ['alias.wav'],
    ['dirlink/track.wav'],
    ['previews/up.wav'],
    ['previews/zigzag.wav'],
    ['previews/parent/previews/track.wav'],
    ['previews/sub/../track.wav'],
    ['previews/./track.wav'],
    ['previews//track.wav'],
    ['ok0'],
  ])('%s → the real previews/track.wav', async (rel) => {
    const r = await resolveLocal(tree.root, rel);
    expect(r).toEqual({ ok: true, path: track(), size: 8, mtimeMs: expect.any(Number) });
  });

  it('resolves the root itself when it is reached through a symlink', async () => {
    expect(await resolveLocal(tree.rootLink, 'previews/track.wav')).toMatchObject({
      ok: true,
      path: track(),
    });
  });

  it('reports the stat mtime', async () => {
    const r = await resolveLocal(tree.root, 'previews/track.wav');
    expect(r.ok && r.mtimeMs).toBe(statSync(track()).mtimeMs);
  });
});

describe('resolveLocal: every refusal is the same value', () => {
  const refused = [
    ['absolute', '/etc/passwd'],
    ['absolute into the root', () => join(tree.realRoot, 'previews/track.wav')],
    ['all slashes', '///'],
    ['empty', ''],
    ['dot', '.'],
    ['dotdot', '..'],
    ['climbing out', '../outside/secret.wav'],
    ['climbing out deeper', 'previews/../../outside/secret.wav'],
    ['far out', '../../../../../../etc/passwd'],
    ['back to the root', 'previews/..'],
    ['after a file', 'previews/track.wav/..'],
    ['after a file, out', 'previews/track.wav/../../'],
    ['through a file', 'previews/track.wav/x'],
    ['NUL', 'previews/tr\u0000ack.wav'],
    ['relative link out', 'escape.wav'],
    ['directory link out', 'elsewhere/secret.wav'],
    ['link to the root’s parent', 'previews/grandparent/outside/secret.wav'],
    ['link climbing out and back in', 'roundabout.wav'],
    ['absolute link inside the root', 'absolute.wav'],
    ['absolute link outside', 'passwd'],
    ['cycle', 'ping'],
    ['33 hops', 'bad0'],
    ['dangling link', 'dangling.wav'],
    ['directory', 'previews'],
    ['directory link', 'dirlink'],
    ['missing', 'missing.wav'],
    ['missing directory', 'nope/track.wav'],
    ['missing then back', 'previews/missing/../track.wav'],
    ['over 1024 bytes', `${'a'.repeat(1021)}.wav`],
    ['over 64 components', `${'d/'.repeat(64)}x.wav`],
  ] as const;

  it.each(refused)('%s', async (_name, rel) => {
    const path = typeof rel === 'function' ? rel() : rel;
    expect(await resolveLocal(tree.root, path)).toBe(LOCAL_NOT_FOUND);
  });

  it('a FIFO is not a regular file', async () => {
    if (!tree.hasFifo) throw new Error('mkfifo unavailable: cannot prove the FIFO rule');
    expect(await resolveLocal(tree.root, 'pipe.wav')).toBe(LOCAL_NOT_FOUND);
  });

  it.each([
    ['unset', undefined],
    ['empty', ''],
    ['missing', '/nonexistent/ap-root'],
    ['a file', () => join(tree.realRoot, 'big.wav')],
    ['the filesystem root', '/'],
  ] as const)('a root that is %s refuses everything', async (_name, root) => {
    const r = typeof root === 'function' ? root() : root;
    expect(await resolveLocal(r, 'previews/track.wav')).toBe(LOCAL_NOT_FOUND);
    expect(await resolveLocal(r, 'etc/passwd')).toBe(LOCAL_NOT_FOUND);
  });

  it('a path with many components is refused before any filesystem work', async () => {
    const deep = `${'a/'.repeat(5000)}b.wav`;
    const started = performance.now();
    expect(await resolveLocal(tree.root, deep)).toBe(LOCAL_NOT_FOUND);
    expect(await authorizeLocal(tree.root, deep)).toBe(LOCAL_NOT_FOUND);
    expect(performance.now() - started).toBeLessThan(100);
  });

  it.skipIf(process.getuid?.() === 0)('an unreadable directory is refused', async () => {
    const locked = join(tree.root, 'locked');
    mkdirSync(locked);
    writeFileSync(join(locked, 'a.wav'), 'x');
    chmodSync(locked, 0o000);
    try {
      expect(await resolveLocal(tree.root, 'locked/a.wav')).toBe(LOCAL_NOT_FOUND);
      expect(await authorizeLocal(tree.root, 'locked/a.wav')).toBe(LOCAL_NOT_FOUND);
    } finally {
      chmodSync(locked, 0o755);
    }
  });
});

describe('bounds, just inside', () => {
  it('60 components and a 1024-byte path still work', async () => {
    const nested = Array.from({ length: 60 }, () => 'd').join('/');
    mkdirSync(join(tree.root, nested), { recursive: true });
    writeFileSync(join(tree.root, nested, 'track.wav'), 'RIFF');
    expect((await resolveLocal(tree.root, `${nested}/track.wav`)).ok).toBe(true);

    const dirs = ['a', 'b', 'c', 'd'].map((c) => c.repeat(200));
    const file = 'f'.repeat(1024 - 4 * 200 - 4);
    const rel = [...dirs, file].join('/');
    expect(Buffer.byteLength(rel)).toBe(1024);
    mkdirSync(join(tree.root, ...dirs), { recursive: true });
    writeFileSync(join(tree.root, rel), 'RIFF');
    expect((await resolveLocal(tree.root, rel)).ok).toBe(true);
  });
});

describe('size', () => {
  it('over maxSrcBytes is source_too_large; equal is served; /info skips the check', async () => {
    expect(await resolveLocal(tree.root, 'big.wav', { maxSrcBytes: 4095 })).toBe(LOCAL_TOO_LARGE);
    expect(await resolveLocal(tree.root, 'big.wav', { maxSrcBytes: 4096 })).toMatchObject({
      ok: true,
      size: 4096,
    });
    expect(await resolveLocal(tree.root, 'big.wav')).toMatchObject({ ok: true, size: 4096 });
  });

  it('a refused path is never too large: confinement first', async () => {
    expect(await resolveLocal(tree.root, 'escape.wav', { maxSrcBytes: 0 })).toBe(LOCAL_NOT_FOUND);
  });
});

describe('authorizeLocal', () => {
  it.each([
    'previews/track.wav',
    'alias.wav',
    'missing.wav',
    'nope/deeper/x.wav',
    'previews/missing/../track.wav',
    'previews',
    'pipe.wav',
  ])('authorises %s (existence is not policy)', async (rel) => {
    expect(await authorizeLocal(tree.root, rel)).toEqual({ ok: true });
  });

  it.each([
    '/etc/passwd',
    '',
    '..',
    'missing/../../outside/secret.wav',
    'escape.wav',
    'elsewhere/secret.wav',
    'absolute.wav',
    'ping',
    'bad0',
    'previews/..',
  ])('refuses %s', async (rel) => {
    expect(await authorizeLocal(tree.root, rel)).toBe(LOCAL_NOT_FOUND);
  });

  it('refuses everything without a root', async () => {
    expect(await authorizeLocal(undefined, 'previews/track.wav')).toBe(LOCAL_NOT_FOUND);
  });
});

describe('localEtagMaterial', () => {
  // python3 -c "import hashlib; print(hashlib.sha256(b'4096-1700000000').hexdigest()[:32])"
  it('is the first 32 hex of sha256("size-mtimeSeconds")', () => {
    expect(localEtagMaterial(4096, 1_700_000_000_000)).toBe('32071eb515f2d117efba32b6afadb7de');
    expect(localEtagMaterial(4096, 1_700_000_000_999)).toBe('32071eb515f2d117efba32b6afadb7de');
    expect(localEtagMaterial(4097, 1_700_000_000_000)).not.toBe('32071eb515f2d117efba32b6afadb7de');
  });
});

describe('authorizeSource (through the parser)', () => {
  it('local sources are confined, remote ones allowlisted', async () => {
    const policy = { allowlist: [] as string[], localRoot: tree.root };
    const local = parseSource('plain/local://missing-but-inside.wav');
    const escaping = parseSource('plain/local://%2E%2E/outside/secret.wav');
    const s3 = parseSource('plain/s3://masters/a.wav');
    const https = parseSource('plain/https://media.example/a.wav');
    if (!local.ok || !escaping.ok || !s3.ok || !https.ok) throw new Error('fixtures must parse');
    expect(await authorizeSource(local.source, policy)).toEqual({ ok: true });
    expect(await authorizeSource(escaping.source, policy)).toBe(SOURCE_NOT_FOUND);
    expect(await authorizeSource(local.source, { ...policy, localRoot: undefined })).toBe(
      SOURCE_NOT_FOUND,
    );
    expect(await authorizeSource(s3.source, policy)).toEqual({ ok: true });
    expect(await authorizeSource(https.source, policy)).toBe(SOURCE_NOT_FOUND);
    expect(
      await authorizeSource(https.source, { ...policy, allowlist: ['*.example', 'media.example'] }),
    ).toEqual({ ok: true });
    expect(await authorizeSource(s3.source, { ...policy, allowlist: ['media.example'] })).toBe(
      SOURCE_NOT_FOUND,
    );
  });
});
