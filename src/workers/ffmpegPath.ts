/**
 * Which ffmpeg and ffprobe the proxy runs: resolved once, before any actor exists.
 *
 * Order: the operator's `AP_FFMPEG_PATH`/`AP_FFPROBE_PATH`; else the name on `PATH` (a real
 * deployment's current build, e.g. Debian's 5.1); else the fallback: the static binaries inside
 * the optional `@ffmpeg-installer/ffmpeg` and `@ffprobe-installer/ffprobe`, so `npm ci` alone
 * brings a working (2018, slower, no `deesser`) encoder. `/health` and the boot log report the
 * choice (`source: 'npm'`) and what that build cannot do (`capabilities.ts`).
 *
 * ## Invariants
 * - **Resolution never spawns.** It is file-system checks only; an unknown or non-executable
 *   binary is an `ExecutableNotFoundError` (`code` `ffmpeg_not_found`/`ffprobe_not_found`) and
 *   no process is started to discover that.
 * - **A fallback binary without its execute bit is ours to fix, or explained.** npm with
 *   `--ignore-scripts` leaves the shipped file mode 0644. When the file lies in a `node_modules`
 *   and this process may write it, resolution adds the execute bits wherever the read bits are
 *   (its one write; `madeExecutable` says so, and the boot log); otherwise the error names the
 *   file and the `chmod` that fixes it.
 * - **An explicit path is never second-guessed.** If `AP_FFMPEG_PATH` is set and unusable, that
 *   is the error; the resolver does not fall back to `PATH` and silently run something else.
 * - **`ffmpegVersion` spawns at most once per path** (argv `-version`, no shell) and caches the
 *   promise, so concurrent callers share one child.
 *
 * ## Races
 * - *The binary disappears after resolution*: the spawn then fails with ENOENT, which the render
 *   path reports as `render_failed`; resolution is a boot-time check, not a guarantee.
 *
 * ## Events
 * None. The outcome is data (`ResolvedExecutable`) or a coded error thrown at boot.
 */
import { execFile } from 'node:child_process';
import { accessSync, chmodSync, constants, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { delimiter, isAbsolute, join, resolve, sep } from 'node:path';

/** How long `-version` may take; a binary that cannot print its banner in this is unusable. */
export const VERSION_TIMEOUT_MS = 5_000; // the 68 MB static build starts in well under a second

export type ExecutableSource = 'env' | 'path' | 'npm';

export interface ResolvedExecutable {
  readonly path: string;
  readonly source: ExecutableSource;
  /** Known without spawning only for the npm binaries (their package says). */
  readonly version?: string;
  /** True when resolution made the npm binary executable (`chmod +x`; see the header). */
  readonly madeExecutable?: true;
}

/** The npm-shipped binary as its package names it. */
export interface ShippedBinary {
  readonly path: string;
  readonly version?: string;
  /** Ours to `chmod +x` when it lacks the bit: in a `node_modules`, writable by this process. */
  readonly ours?: boolean;
}

export interface ResolveOptions {
  /** The environment to read (`AP_FFMPEG_PATH`/`AP_FFPROBE_PATH`, `PATH`). */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Looks a bare name up on `PATH`. @default a search of `env.PATH` for an executable file */
  readonly which?: (
    name: string,
    env: Readonly<Record<string, string | undefined>>,
  ) => string | null;
  /** The npm-shipped binary, or null when its package is absent. @default the installer package */
  readonly npm?: () => ShippedBinary | null;
}

export type ExecutableNotFoundCode = 'ffmpeg_not_found' | 'ffprobe_not_found';

export class ExecutableNotFoundError extends Error {
  override readonly name = 'ExecutableNotFoundError';
  readonly code: ExecutableNotFoundCode;
  /** The explicit path that was refused, when there was one. */
  readonly path: string | undefined;

  constructor(code: ExecutableNotFoundCode, message: string, path?: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.code = code;
    this.path = path;
  }
}

interface Tool {
  readonly name: 'ffmpeg' | 'ffprobe';
  readonly envVar: string;
  readonly npmPackage: string;
  readonly code: ExecutableNotFoundCode;
}

const FFMPEG: Tool = {
  name: 'ffmpeg',
  envVar: 'AP_FFMPEG_PATH',
  npmPackage: '@ffmpeg-installer/ffmpeg',
  code: 'ffmpeg_not_found',
};
const FFPROBE: Tool = {
  name: 'ffprobe',
  envVar: 'AP_FFPROBE_PATH',
  npmPackage: '@ffprobe-installer/ffprobe',
  code: 'ffprobe_not_found',
};

export function resolveFfmpeg(options: ResolveOptions): ResolvedExecutable {
  return resolveTool(FFMPEG, options);
}

export function resolveFfprobe(options: ResolveOptions): ResolvedExecutable {
  return resolveTool(FFPROBE, options);
}

/** True when `path` names a regular file this process may execute. */
export function isExecutableFile(path: string): boolean {
  try {
    if (!statSync(path).isFile()) return false;
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Searches `env.PATH` for an executable file called `name`. */
export function whichOnPath(
  name: string,
  env: Readonly<Record<string, string | undefined>>,
): string | null {
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue;
    const candidate = join(dir, name);
    if (isExecutableFile(candidate)) return resolve(candidate);
  }
  return null;
}

const versions = new Map<string, Promise<string>>();

/** The first line of `<path> -version`, spawned once per path (the promise is cached). */
export function ffmpegVersion(path: string): Promise<string> {
  let pending = versions.get(path);
  if (pending === undefined) {
    pending = new Promise<string>((resolvePromise, reject) => {
      execFile(path, ['-version'], { timeout: VERSION_TIMEOUT_MS }, (error, stdout) => {
        if (error) reject(error);
        else resolvePromise(stdout.split('\n', 1)[0]!.trim());
      });
    });
    // A failure is not cached: a later call may find the binary fixed.
    pending.catch(() => versions.delete(path));
    versions.set(path, pending);
  }
  return pending;
}

// ---------------------------------------------------------------------------------------------

function resolveTool(tool: Tool, options: ResolveOptions): ResolvedExecutable {
  const { env } = options;
  const which = options.which ?? whichOnPath;
  const explicit = env[tool.envVar];
  if (explicit !== undefined && explicit !== '') {
    const path = explicit.includes('/') ? explicit : which(explicit, env);
    if (path !== null && isExecutableFile(path)) {
      return { path: isAbsolute(path) ? path : resolve(path), source: 'env' };
    }
    const why =
      path !== null && isRegularFile(path)
        ? `is not executable (mode ${modeOf(path)}): chmod +x '${path}'`
        : 'is not an executable file';
    throw new ExecutableNotFoundError(tool.code, `${tool.envVar}=${explicit} ${why}`, explicit);
  }
  const onPath = which(tool.name, env);
  if (onPath !== null) return { path: onPath, source: 'path' };
  let shipped: ShippedBinary | null;
  try {
    shipped = (options.npm ?? (() => npmBinary(tool)))();
  } catch (error) {
    throw new ExecutableNotFoundError(
      tool.code,
      `no ${tool.name} on PATH and ${tool.npmPackage} is unusable`,
      undefined,
      error,
    );
  }
  if (shipped !== null && isRegularFile(shipped.path)) {
    const madeExecutable = !isExecutableFile(shipped.path) && makeExecutable(tool, shipped);
    return {
      path: shipped.path,
      source: 'npm',
      ...(shipped.version === undefined ? {} : { version: shipped.version }),
      ...(madeExecutable ? { madeExecutable } : {}),
    };
  }
  throw new ExecutableNotFoundError(
    tool.code,
    `no ${tool.name}: set ${tool.envVar}, put ${tool.name} on PATH, or install ${tool.npmPackage}`,
  );
}

/**
 * Adds the execute bits where the read bits are (0644 → 0755) to a shipped binary that is ours,
 * and answers true; else throws the error that names the file and the fix.
 */
function makeExecutable(tool: Tool, shipped: ShippedBinary): true {
  const { path } = shipped;
  const mode = modeOf(path);
  if (shipped.ours) {
    try {
      const bits = statSync(path).mode & 0o7777;
      chmodSync(path, bits | ((bits & 0o444) >> 2));
    } catch {
      // not ours after all: explained below
    }
    if (isExecutableFile(path)) return true;
  }
  throw new ExecutableNotFoundError(
    tool.code,
    `${path}, the npm-shipped ${tool.name} fallback, is not executable (mode ${mode}; ` +
      `installed with --ignore-scripts?): run chmod +x '${path}', or install a system ` +
      `${tool.name} (or set ${tool.envVar})`,
    path,
  );
}

/** True when `path` lies in a `node_modules` and this process may write it. */
export function isOwnPackageFile(path: string): boolean {
  if (!resolve(path).split(sep).includes('node_modules')) return false;
  try {
    accessSync(path, constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

function isRegularFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

function modeOf(path: string): string {
  try {
    return `0${(statSync(path).mode & 0o777).toString(8)}`;
  } catch {
    return 'unknown';
  }
}

/** The installer packages throw (sometimes a bare string) on an unsupported platform. */
function npmBinary(tool: Tool): ShippedBinary | null {
  const require = createRequire(import.meta.url);
  let found: unknown;
  try {
    found = require(tool.npmPackage);
  } catch (error) {
    if ((error as { code?: string })?.code === 'MODULE_NOT_FOUND') return null;
    throw error instanceof Error ? error : new Error(String(error));
  }
  const { path, version } = (found ?? {}) as { path?: unknown; version?: unknown };
  if (typeof path !== 'string') return null;
  const ours = isOwnPackageFile(path);
  return typeof version === 'string' ? { path, version, ours } : { path, ours };
}
