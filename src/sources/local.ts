/**
 * `local://` sources: files under `AP_LOCAL_ROOT`, confined to it.
 *
 * A local path is resolved component by component from the root, the way the kernel would, with
 * every symlink read and followed by hand: `..` pops a directory that is known to be real, a
 * relative link target is spliced in front of what is left, and nothing is trusted that was not
 * looked at. The resolved path has no symlink in it, so it is under the root by construction; a
 * final `realpath` comparison re-checks that before a path is handed out.
 *
 * ## Invariants
 * - **Every refusal is the same value.** Unset or unusable root, an absolute or empty path, more
 *   than 1024 bytes or 64 components, a NUL, `..` climbing out, an absolute symlink target (even
 *   one inside the root), more than 32 link hops, an undeterminable component, a directory, FIFO,
 *   socket or device, a missing file: all return the one frozen `LOCAL_NOT_FOUND`.
 * - **Whatever is returned lies strictly inside the resolved root** (never the root itself).
 * - **Authorisation does not depend on existence.** `authorizeLocal` tolerates missing components
 *   (what follows them is judged lexically, which is sound because a missing directory holds no
 *   links); `resolveLocal` is where absence becomes a 404.
 * - **Bounds are checked before any filesystem call**, so a hostile path costs nothing.
 * - **The root is re-resolved at most `ROOT_RECHECK_MS` after it was last resolved** (a bind
 *   mount can be re-pointed); `/` is refused as a root.
 * - **What reads a source looks at everything on every call**: `resolveLocal` walks and
 *   `openLocal` judges the opened file each time; neither keeps anything but the root.
 * - **An authorisation (`authorizeLocal`) is kept until `ROOT_RECHECK_MS` after the root
 *   reading it was judged under** (at most `LOCAL_VERDICTS_MAX` of them, oldest forgotten
 *   first; refusals are never kept), so a HIT of a hot source costs no lstat chain. It only
 *   gates answers that read nothing of the source (a 304, a stored variant); see Races.
 *
 * - **ffmpeg never opens a path.** `openLocal` opens the walked path itself (`O_NOFOLLOW`,
 *   `O_NONBLOCK`) and proves the opened file inside the root after the open; ffmpeg and ffprobe
 *   inherit that descriptor (see `workers/argv.ts`).
 *
 * ## Races
 * - **Check vs use (TOCTOU): closed.** A component swapped for a symlink between the walk and the
 *   open is seen after the open: the kernel's path of the opened file (`/proc/self/fd/N`) is
 *   outside the root, or no longer names the same inode, and the open is refused (404). A FIFO,
 *   socket or device swapped in opens without blocking and is refused by its type. What remains:
 *   a hardlink inside the root to a file outside it is inside by every path test (it needs write
 *   access to the root and the same file system: mount the root read-only), and a device node
 *   swapped in is opened (not read) before it is refused.
 * - **A kept authorisation and a link swapped in after it: a window of `ROOT_RECHECK_MS`, no
 *   read.** For up to that long after the root reading a verdict rests on, a path whose
 *   component was meanwhile swapped for a link out of the root is still *authorised*: a 304 or
 *   a stored variant (bytes the proxy rendered from the inside file before the swap) may be
 *   answered for it, as the root itself may be followed for that long after a re-point. Nothing
 *   outside the root is read in that window: a MISS or `/info` resolves and opens through the
 *   uncached walk and the post-open check above, and answers 404 (`localVerdict.test.ts`).
 *
 * ## Events
 * None. The caller maps `not_found` → 404 and `source_too_large` → 413.
 */
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { type FileHandle, lstat, open, readlink, realpath, stat } from 'node:fs/promises';
import { isAbsolute, join, resolve } from 'node:path';
import { InFlight } from '../core/inflight.js';
import type { OpenOutcome } from '../core/source.js';
import { soleLease } from './lease.js';

const MAX_PATH_BYTES = 1024; // past any real layout; PATH_MAX-sized paths could not open anyway
const MAX_COMPONENTS = 64; // a denial-of-service bound on the per-component walk
const MAX_LINK_HOPS = 32; // a cycle would otherwise be an unkillable request
const LOCAL_ETAG_MATERIAL_HEX = 32; // 128 bits: ample for a version marker

export type LocalRefusal =
  | { readonly ok: false; readonly reason: 'not_found' }
  | { readonly ok: false; readonly reason: 'source_too_large' };

export type LocalResult =
  | { readonly ok: true; readonly path: string; readonly size: number; readonly mtimeMs: number }
  | LocalRefusal;

/** The one refusal every confinement or existence failure returns. */
export const LOCAL_NOT_FOUND = Object.freeze({ ok: false, reason: 'not_found' } as const);
/** Over `AP_MAX_SRC_BYTES`: the only distinguishable outcome, and only for a servable file. */
export const LOCAL_TOO_LARGE = Object.freeze({ ok: false, reason: 'source_too_large' } as const);
const AUTHORIZED = Object.freeze({ ok: true } as const);

type Walk = { readonly path: string; readonly exists: boolean } | undefined;

/**
 * How long a resolved root is trusted before it is resolved again. Every request (a HIT too)
 * authorises its source, and resolving the root costs two file-system round trips through
 * libuv's pool; a re-pointed root (a bind mount or a symlink swapped on deploy) is seen within
 * this much time. Failures are never kept: a root that was missing is looked at again next time.
 */
export const ROOT_RECHECK_MS = 1_000;

/**
 * Identical checks running at once share one walk (a burst of requests for one source would
 * otherwise repeat the same lstat chain per request); nothing outlives the walk, so the window
 * between a check and ffmpeg's open is no wider than for a walk of one's own.
 */
const authorizing = new InFlight<string, { readonly ok: true } | typeof LOCAL_NOT_FOUND>();
const resolving = new InFlight<string, LocalResult>();

interface ResolvedRoot {
  readonly real: string;
  /** When it was resolved (`performance.now()`). */
  readonly at: number;
}
const resolvedRoots = new Map<string, ResolvedRoot>();

/** The resolved root, or undefined when unset, missing, not a directory, or `/`. */
async function resolveRoot(root: string | undefined): Promise<string | undefined> {
  return (await resolveRootEntry(root))?.real;
}

async function resolveRootEntry(root: string | undefined): Promise<ResolvedRoot | undefined> {
  if (root === undefined || root === '') return undefined;
  const now = performance.now();
  const known = resolvedRoots.get(root);
  if (known !== undefined && now - known.at < ROOT_RECHECK_MS) return known;
  const real = await resolveRootNow(root);
  if (real === undefined) {
    resolvedRoots.delete(root);
    return undefined;
  }
  const entry = { real, at: now };
  resolvedRoots.set(root, entry);
  return entry;
}

/** Verdicts kept at most (distinct root and path pairs); past it the oldest is forgotten. */
export const LOCAL_VERDICTS_MAX = 1_024;

/**
 * Positive authorisations, `root\0relPath` → until when (`performance.now()`) they hold: the
 * resolution time of the root they were judged under plus `ROOT_RECHECK_MS`, so a verdict is
 * never older than the oldest reading it rests on. Insertion order is age order (a renewed
 * verdict is re-inserted), so the first key is the oldest. Refusals are never kept.
 */
const verdicts = new Map<string, number>();
const AUTHORIZED_NOW = Promise.resolve(AUTHORIZED);

function keepVerdict(key: string, until: number): void {
  verdicts.delete(key);
  verdicts.set(key, until);
  if (verdicts.size > LOCAL_VERDICTS_MAX) verdicts.delete(verdicts.keys().next().value as string);
}

async function resolveRootNow(root: string): Promise<string | undefined> {
  try {
    const real = await realpath(resolve(root));
    if (real === '/') return undefined;
    return (await stat(real)).isDirectory() ? real : undefined;
  } catch {
    return undefined;
  }
}

function lexicallyRefused(relPath: string): boolean {
  return (
    typeof relPath !== 'string' ||
    relPath === '' ||
    relPath.startsWith('/') ||
    relPath.includes('\0') ||
    Buffer.byteLength(relPath, 'utf8') > MAX_PATH_BYTES ||
    relPath.split('/').length > MAX_COMPONENTS
  );
}

function errorCode(e: unknown): string | undefined {
  return typeof e === 'object' && e !== null ? (e as { code?: string }).code : undefined;
}

/**
 * Resolves `relPath` under `root` (already real) following links by hand. Undefined = refused.
 * `exists: false` when some component is missing (the rest was judged lexically).
 */
async function walk(root: string, relPath: string): Promise<Walk> {
  const stack: string[] = [];
  const pending = relPath.split('/');
  let hops = 0;
  let missing = false;
  // Whether the last resolved component is a directory; anything after a non-directory is ENOTDIR.
  let lastIsDir = true;
  while (pending.length > 0) {
    const comp = pending.shift()!;
    if (!missing && !lastIsDir) return undefined;
    if (comp === '' || comp === '.') continue;
    if (comp === '..') {
      if (stack.length === 0) return undefined;
      stack.pop();
      lastIsDir = true;
      continue;
    }
    if (missing) {
      stack.push(comp);
      continue;
    }
    const candidate = join(root, ...stack, comp);
    let info: Awaited<ReturnType<typeof lstat>>;
    try {
      info = await lstat(candidate);
    } catch (e) {
      // Only "does not exist" means carry on; EACCES, ENOTDIR, ENAMETOOLONG… mean we could not
      // tell what this component is, and a check on a path we failed to resolve is no check.
      if (errorCode(e) !== 'ENOENT') return undefined;
      missing = true;
      stack.push(comp);
      continue;
    }
    if (info.isSymbolicLink()) {
      hops += 1;
      if (hops > MAX_LINK_HOPS) return undefined;
      let target: string;
      try {
        target = await readlink(candidate, 'utf8');
      } catch {
        return undefined;
      }
      // Absolute targets are refused even when they point inside the root: the root's own
      // location is deployment detail a link must not depend on.
      if (target === '' || isAbsolute(target) || target.includes('\0')) return undefined;
      pending.unshift(...target.split('/'));
      continue;
    }
    stack.push(comp);
    lastIsDir = info.isDirectory();
  }
  if (stack.length === 0) return undefined; // the root itself is not a source
  return { path: join(root, ...stack), exists: !missing };
}

/**
 * May `relPath` be served from `root`? Confinement only: a path that would resolve inside the root
 * is authorised whether or not the file exists.
 */
export function authorizeLocal(
  root: string | undefined,
  relPath: string,
): Promise<{ readonly ok: true } | typeof LOCAL_NOT_FOUND> {
  if (lexicallyRefused(relPath)) return Promise.resolve(LOCAL_NOT_FOUND);
  const key = `${root}\0${relPath}`;
  const until = verdicts.get(key);
  if (until !== undefined) {
    if (performance.now() < until) return AUTHORIZED_NOW;
    verdicts.delete(key);
  }
  return authorizing.run(key, () => authorizeLocalNow(root, relPath, key));
}

async function authorizeLocalNow(
  root: string | undefined,
  relPath: string,
  key: string,
): Promise<{ readonly ok: true } | typeof LOCAL_NOT_FOUND> {
  const resolved = await resolveRootEntry(root);
  if (resolved === undefined) return LOCAL_NOT_FOUND;
  if ((await walk(resolved.real, relPath)) === undefined) return LOCAL_NOT_FOUND;
  keepVerdict(key, resolved.at + ROOT_RECHECK_MS);
  return AUTHORIZED;
}

/**
 * Resolves `relPath` under `root` to a regular file: its absolute resolved path, size and mtime.
 * `maxSrcBytes` set → a larger file is `source_too_large` (omit it for `/info`).
 */
export function resolveLocal(
  root: string | undefined,
  relPath: string,
  opts: { readonly maxSrcBytes?: number } = {},
): Promise<LocalResult> {
  if (lexicallyRefused(relPath)) return Promise.resolve(LOCAL_NOT_FOUND);
  return resolving.run(`${root}\0${relPath}\0${opts.maxSrcBytes ?? ''}`, () =>
    resolveLocalNow(root, relPath, opts),
  );
}

async function resolveLocalNow(
  root: string | undefined,
  relPath: string,
  opts: { readonly maxSrcBytes?: number },
): Promise<LocalResult> {
  const realRoot = await resolveRoot(root);
  if (realRoot === undefined) return LOCAL_NOT_FOUND;
  const walked = await walk(realRoot, relPath);
  if (walked === undefined || !walked.exists) return LOCAL_NOT_FOUND;
  try {
    // Regular files only, decided on the resolved path (no link left in it to follow), and the
    // path re-checked against the kernel's own resolution in case something moved meanwhile.
    const info = await lstat(walked.path);
    if (!info.isFile()) return LOCAL_NOT_FOUND;
    if ((await realpath(walked.path)) !== walked.path) return LOCAL_NOT_FOUND;
    if (!walked.path.startsWith(`${realRoot}/`)) return LOCAL_NOT_FOUND;
    if (opts.maxSrcBytes !== undefined && info.size > opts.maxSrcBytes) return LOCAL_TOO_LARGE;
    return { ok: true, path: walked.path, size: info.size, mtimeMs: info.mtimeMs };
  } catch {
    return LOCAL_NOT_FOUND;
  }
}

/**
 * How a local source is opened: read-only, the last component never followed, and without
 * blocking (a FIFO swapped in opens at once and is then refused by its type, instead of holding
 * the request until a writer appears). Node adds `O_CLOEXEC`: no other child inherits it.
 */
const OPEN_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
/** Where the kernel says what an open descriptor refers to (Linux procfs). */
const FD_LINK_DIR = '/proc/self/fd';

/**
 * Opens the file `path` (a path `resolveLocal` returned) for one run, and proves after the open
 * what was opened: a regular file, whose kernel path (`/proc/self/fd/N`) lies strictly inside
 * the resolved root and names the same inode (dev, ino) as a fresh stat of that path. Whatever
 * was swapped into the path between the walk and the open (a symlinked directory, a FIFO, a
 * device), the open file is judged, not the name. Every refusal is `not_found`; over
 * `maxSrcBytes` (of the opened file) is `source_too_large`. The lease owns the descriptor.
 */
export async function openLocal(
  root: string | undefined,
  path: string,
  opts: { readonly maxSrcBytes?: number } = {},
): Promise<OpenOutcome> {
  const realRoot = await resolveRoot(root);
  if (realRoot === undefined || typeof path !== 'string' || !path.startsWith(`${realRoot}/`)) {
    return { ok: false, refusal: 'not_found' };
  }
  let handle: FileHandle;
  try {
    handle = await open(path, OPEN_FLAGS);
  } catch {
    return { ok: false, refusal: 'not_found' };
  }
  try {
    const opened = await handle.stat();
    if (!opened.isFile()) throw new Error('not a regular file');
    const where = await readlink(`${FD_LINK_DIR}/${handle.fd}`);
    if (!where.startsWith(`${realRoot}/`)) throw new Error('opened outside the root');
    const named = await lstat(where);
    if (!named.isFile() || named.dev !== opened.dev || named.ino !== opened.ino) {
      throw new Error('the path no longer names the opened file');
    }
    if (opts.maxSrcBytes !== undefined && opened.size > opts.maxSrcBytes) {
      await handle.close();
      return { ok: false, refusal: 'source_too_large' };
    }
    return { ok: true, lease: soleLease(handle, opened.size) };
  } catch {
    await handle.close().catch(() => {});
    return { ok: false, refusal: 'not_found' };
  }
}

/**
 * ETag material for a local file: the first 32 hex characters of `sha256("size-mtime")`, mtime in
 * whole Unix seconds. Size and mtime rather than content: hashing a multi-gigabyte master to answer
 * `/info` would defeat the point.
 */
export function localEtagMaterial(size: number, mtimeMs: number): string {
  if (!Number.isSafeInteger(size) || size < 0) throw new RangeError('size must be a byte count');
  if (!Number.isFinite(mtimeMs)) throw new RangeError('mtimeMs must be finite');
  return createHash('sha256')
    .update(`${size}-${Math.floor(mtimeMs / 1000)}`)
    .digest('hex')
    .slice(0, LOCAL_ETAG_MATERIAL_HEX);
}
