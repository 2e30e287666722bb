// A temporary directory tree for the local-source confinement tests: a root with regular files,
// directories, a FIFO and every kind of symlink (relative inside, relative escaping, absolute
// inside, directory links, a cycle, hop chains), and a sibling `outside` directory that an escape
// would reach.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface LocalTree {
  /** The root as created (under the OS temp dir, possibly reached through a symlink). */
  readonly root: string;
  /** `realpath(root)`: what resolved paths start with. */
  readonly realRoot: string;
  readonly outside: string;
  /** A symlink to the root, to prove the root itself is resolved. */
  readonly rootLink: string;
  readonly hasFifo: boolean;
  readonly cleanup: () => void;
}

export const MAX_HOPS_OK = 32;

export function buildLocalTree(): LocalTree {
  const base = mkdtempSync(join(tmpdir(), 'ap-local-'));
  const root = join(base, 'root');
  const outside = join(base, 'outside');
  mkdirSync(join(root, 'previews', 'sub'), { recursive: true });
  mkdirSync(outside);
  writeFileSync(join(root, 'previews', 'track.wav'), 'RIFFfake');
  writeFileSync(join(root, 'big.wav'), Buffer.alloc(4096, 1));
  writeFileSync(join(outside, 'secret.wav'), 'SECRET');
  writeFileSync(join(base, 'beside.wav'), 'BESIDE');

  symlinkSync('previews/track.wav', join(root, 'alias.wav'));
  symlinkSync(join(root, 'previews', 'track.wav'), join(root, 'absolute.wav'));
  symlinkSync('../outside/secret.wav', join(root, 'escape.wav'));
  symlinkSync('../outside', join(root, 'elsewhere'));
  symlinkSync('previews', join(root, 'dirlink'));
  symlinkSync('../alias.wav', join(root, 'previews', 'up.wav'));
  symlinkSync('sub/../../previews/track.wav', join(root, 'previews', 'zigzag.wav'));
  symlinkSync('..', join(root, 'previews', 'parent'));
  symlinkSync('../..', join(root, 'previews', 'grandparent'));
  symlinkSync('pong', join(root, 'ping'));
  symlinkSync('ping', join(root, 'pong'));
  symlinkSync('/etc/passwd', join(root, 'passwd'));
  symlinkSync('missing-target.wav', join(root, 'dangling.wav'));
  symlinkSync('../root/previews/track.wav', join(root, 'roundabout.wav'));
  // chainN → chainN+1 → … → previews/track.wav: `ok0` takes exactly 32 hops, `bad0` 33.
  for (let i = 0; i < MAX_HOPS_OK; i++) {
    symlinkSync(i === MAX_HOPS_OK - 1 ? 'previews/track.wav' : `ok${i + 1}`, join(root, `ok${i}`));
  }
  for (let i = 0; i <= MAX_HOPS_OK; i++) {
    symlinkSync(i === MAX_HOPS_OK ? 'previews/track.wav' : `bad${i + 1}`, join(root, `bad${i}`));
  }
  let hasFifo = true;
  try {
    execFileSync('mkfifo', [join(root, 'pipe.wav')]);
  } catch {
    hasFifo = false;
  }
  const rootLink = join(base, 'rootlink');
  symlinkSync(root, rootLink);
  return {
    root,
    realRoot: realpathSync(root),
    outside,
    rootLink,
    hasFifo,
    cleanup: () => rmSync(base, { recursive: true, force: true }),
  };
}
