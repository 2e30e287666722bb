/**
 * ffmpeg/ffprobe resolution: the env variable wins and is never second-guessed, then PATH (in
 * order), then the npm-shipped binaries; an unusable binary is a coded error; resolution runs
 * nothing (a PATH binary that records its own execution is never run). `ffmpegVersion` reads the
 * real banner of Debian's and the npm build's ffmpeg, spawning once per path. A shipped binary
 * left without its execute bit is made executable when it is ours, else explained.
 */
import { chmod, copyFile, mkdir, mkdtemp, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  ExecutableNotFoundError,
  ffmpegVersion,
  isOwnPackageFile,
  resolveFfmpeg,
  resolveFfprobe,
  whichOnPath,
} from '../../src/workers/ffmpegPath.js';

const NPM_FFMPEG = join(process.cwd(), 'node_modules/@ffmpeg-installer/linux-x64/ffmpeg');
const NPM_FFPROBE = join(process.cwd(), 'node_modules/@ffprobe-installer/linux-x64/ffprobe');

let dir: string;
let marker: string;
let fakeBin: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ffmpeg-path-'));
  marker = join(dir, 'ran');
  fakeBin = join(dir, 'bin');
  await mkdir(fakeBin);
  // A stand-in that leaves a trace if anything ever executes it.
  await writeFile(join(fakeBin, 'ffmpeg'), `#!/bin/sh\ntouch '${marker}'\necho fake\n`);
  await chmod(join(fakeBin, 'ffmpeg'), 0o755);
  await writeFile(join(fakeBin, 'ffprobe'), 'not executable\n');
  await chmod(join(fakeBin, 'ffprobe'), 0o644);
});

function expectNotFound(fn: () => unknown, code: string, path?: string) {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ExecutableNotFoundError);
    expect((error as ExecutableNotFoundError).code).toBe(code);
    expect((error as ExecutableNotFoundError).path).toBe(path);
    return error as ExecutableNotFoundError;
  }
  throw new Error('expected an ExecutableNotFoundError');
}

describe('resolveFfmpeg / resolveFfprobe', () => {
  it('takes AP_FFMPEG_PATH when it is an executable file', () => {
    expect(resolveFfmpeg({ env: { AP_FFMPEG_PATH: '/usr/bin/ffmpeg', PATH: '' } })).toEqual({
      path: '/usr/bin/ffmpeg',
      source: 'env',
    });
    expect(resolveFfprobe({ env: { AP_FFPROBE_PATH: NPM_FFPROBE } })).toEqual({
      path: NPM_FFPROBE,
      source: 'env',
    });
  });

  it('looks a bare env name up on PATH', () => {
    expect(resolveFfmpeg({ env: { AP_FFMPEG_PATH: 'ffmpeg', PATH: fakeBin } })).toEqual({
      path: join(fakeBin, 'ffmpeg'),
      source: 'env',
    });
  });

  it('refuses an unusable explicit path with a coded error and no fallback', () => {
    const env = (value: string) => ({ env: { AP_FFMPEG_PATH: value, PATH: '/usr/bin' } });
    expectNotFound(() => resolveFfmpeg(env('/nope/ffmpeg')), 'ffmpeg_not_found', '/nope/ffmpeg');
    expectNotFound(() => resolveFfmpeg(env(dir)), 'ffmpeg_not_found', dir);
    const probe = { env: { AP_FFPROBE_PATH: join(fakeBin, 'ffprobe'), PATH: '/usr/bin' } };
    expectNotFound(() => resolveFfprobe(probe), 'ffprobe_not_found', join(fakeBin, 'ffprobe'));
    expectNotFound(
      () => resolveFfmpeg(env('no-such-ffmpeg')),
      'ffmpeg_not_found',
      'no-such-ffmpeg',
    );
  });

  it('falls back to PATH, first match wins, skipping non-executables', () => {
    expect(resolveFfmpeg({ env: { PATH: `${fakeBin}:/usr/bin` } })).toEqual({
      path: join(fakeBin, 'ffmpeg'),
      source: 'path',
    });
    expect(resolveFfmpeg({ env: { PATH: `/usr/bin:${fakeBin}` } }).path).toBe('/usr/bin/ffmpeg');
    expect(resolveFfprobe({ env: { PATH: `${fakeBin}:/usr/bin` } })).toEqual({
      path: '/usr/bin/ffprobe',
      source: 'path',
    });
    expect(whichOnPath('ffprobe', { PATH: fakeBin })).toBeNull();
  });

  it('falls back to the npm-shipped binaries, with the version their package states', () => {
    expect(resolveFfmpeg({ env: { PATH: '' } })).toEqual({
      path: NPM_FFMPEG,
      source: 'npm',
      version: '20181210-g0e8eb07980',
    });
    const probe = resolveFfprobe({ env: {} });
    expect(probe).toMatchObject({ path: NPM_FFPROBE, source: 'npm' });
  });

  it('is a coded error when nothing is available anywhere', () => {
    expectNotFound(() => resolveFfmpeg({ env: { PATH: '' }, npm: () => null }), 'ffmpeg_not_found');
    const failure = expectNotFound(
      () =>
        resolveFfprobe({
          env: {},
          npm: () => {
            throw new Error('Unsupported platform/architecture: sunos-sparc');
          },
        }),
      'ffprobe_not_found',
    );
    expect((failure.cause as Error).message).toMatch(/Unsupported platform/);
    expectNotFound(
      () => resolveFfmpeg({ env: { PATH: '' }, npm: () => ({ path: join(dir, 'gone') }) }),
      'ffmpeg_not_found',
    );
  });

  it('uses an injected which, and never executes what it resolves', async () => {
    const asked: string[] = [];
    const which = (name: string) => {
      asked.push(name);
      return name === 'ffmpeg' ? join(fakeBin, 'ffmpeg') : null;
    };
    expect(resolveFfmpeg({ env: {}, which }).path).toBe(join(fakeBin, 'ffmpeg'));
    expect(asked).toEqual(['ffmpeg']);
    expect(await stat(marker).catch(() => null)).toBeNull();
  });
});

describe('a shipped binary without its execute bit (npm --ignore-scripts)', () => {
  const nonExecutableCopy = async (name: string) => {
    const copy = join(await mkdtemp(join(tmpdir(), `ffmpeg-${name}-`)), 'ffmpeg');
    await copyFile(NPM_FFMPEG, copy);
    await chmod(copy, 0o644);
    return copy;
  };

  it('is made executable when it is ours, and says so', async () => {
    const copy = await nonExecutableCopy('ours');
    const resolved = resolveFfmpeg({
      env: { PATH: '' },
      npm: () => ({ path: copy, version: '20181210-g0e8eb07980', ours: true }),
    });
    expect(resolved).toEqual({
      path: copy,
      source: 'npm',
      version: '20181210-g0e8eb07980',
      madeExecutable: true,
    });
    expect((await stat(copy)).mode & 0o777).toBe(0o755);
    expect(await ffmpegVersion(copy)).toMatch(/^ffmpeg version N-47683/);
    // Once fixed, it is simply executable.
    expect(resolveFfmpeg({ env: { PATH: '' }, npm: () => ({ path: copy, ours: true }) })).toEqual({
      path: copy,
      source: 'npm',
    });
  });

  it('is explained, naming the file and the fix, when it is not ours', async () => {
    const copy = await nonExecutableCopy('theirs');
    const failure = expectNotFound(
      () => resolveFfprobe({ env: {}, npm: () => ({ path: copy, ours: false }) }),
      'ffprobe_not_found',
      copy,
    );
    expect(failure.message).toBe(
      `${copy}, the npm-shipped ffprobe fallback, is not executable (mode 0644; installed with ` +
        `--ignore-scripts?): run chmod +x '${copy}', or install a system ffprobe (or set AP_FFPROBE_PATH)`,
    );
    expect((await stat(copy)).mode & 0o777).toBe(0o644);
  });

  it('is ours only inside a node_modules this process may write', async () => {
    const root = await mkdtemp(join(tmpdir(), 'ffmpeg-own-'));
    const inPackage = join(root, 'node_modules', '@ffmpeg-installer', 'linux-x64', 'ffmpeg');
    await mkdir(join(inPackage, '..'), { recursive: true });
    await writeFile(inPackage, '');
    await writeFile(join(root, 'ffmpeg'), '');
    expect(isOwnPackageFile(inPackage)).toBe(true);
    expect(isOwnPackageFile(join(root, 'ffmpeg'))).toBe(false);
    expect(isOwnPackageFile(join(root, 'node_modules', 'absent'))).toBe(false);
  });

  it('an explicit path is never changed: the error says it is not executable, and the fix', () => {
    const probe = join(fakeBin, 'ffprobe');
    const failure = expectNotFound(
      () => resolveFfprobe({ env: { AP_FFPROBE_PATH: probe } }),
      'ffprobe_not_found',
      probe,
    );
    expect(failure.message).toBe(
      `AP_FFPROBE_PATH=${probe} is not executable (mode 0644): chmod +x '${probe}'`,
    );
  });
});

describe('ffmpegVersion', () => {
  it('reads the first line of the banner, once per path', async () => {
    const first = ffmpegVersion('/usr/bin/ffmpeg');
    expect(ffmpegVersion('/usr/bin/ffmpeg')).toBe(first);
    expect(await first).toMatch(/^ffmpeg version 5\.1/);
    expect(await ffmpegVersion(NPM_FFMPEG)).toMatch(/^ffmpeg version N-47683-g0e8eb07980-static/);
  });

  it('rejects for a missing binary and does not cache the failure', async () => {
    const missing = join(dir, 'missing-ffmpeg');
    const first = ffmpegVersion(missing);
    await expect(first).rejects.toThrow();
    expect(ffmpegVersion(missing)).not.toBe(first);
    await expect(ffmpegVersion(missing)).rejects.toThrow();
  });
});
