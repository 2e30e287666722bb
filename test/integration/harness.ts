/**
 * A real proxy on loopback port 0 over the generated fixtures, with an ffmpeg wrapper that
 * records every spawn (its pid, then `exec`s the real binary, so the pid is ffmpeg's own) and
 * helpers to fetch, count processes and check that none survive. The boot's capability listings
 * (`ffmpeg -filters` …, see src/workers/capabilities.ts) are recorded apart, and answered by a
 * real ffmpeg even when the target is a fake: a fault script stands in for renders, not for that.
 */
import { chmod, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { expect } from 'vitest';
import { loadConfig, type MutableConfigProvider, mutableConfig } from '../../src/config/index.js';
import { type AudioProxy, createAudioProxy } from '../../src/proxy.js';
import { stats } from '../../src/services/semaphoreClient.js';
import { resolveFfmpeg } from '../../src/workers/ffmpegPath.js';
import { isAlive as isAliveOs } from '../../src/workers/liveness.js';
import { parseMp3Header, splitForInfoFrame } from '../../src/workers/xingFrame.js';
import { type AudioFixtures, makeFixtures } from '../fixtures/audio.js';

export interface Harness {
  readonly proxy: AudioProxy;
  readonly url: string;
  readonly metricsUrl: string;
  readonly config: MutableConfigProvider;
  readonly fixtures: AudioFixtures;
  /** pids of every ffmpeg the proxy spawned, in order (its capability listings apart) */
  spawns(): Promise<number[]>;
  /** pids of the capability listings the proxy's boot spawned */
  listings(): Promise<number[]>;
  close(): Promise<void>;
}

/**
 * Whether `pid` is a running process, asked of the OS. A zombie is dead: killed, not yet reaped.
 * (A child spawned by a worker thread that was terminated is never reaped by Node; it stays a
 * zombie, holding no resources but its table entry, until the server process exits.)
 */
export function isAlive(pid: number): boolean {
  return isAliveOs(pid);
}

/**
 * A wrapper that logs its pid and execs `target` (real ffmpeg, or a fault script). A capability
 * listing (`-filters`, `-encoders`, `-decoders`, `-formats`) is logged apart and execs `lister`
 * (default: `target`) without the fixed `args`.
 */
export async function spawnLogger(
  target: string,
  args: readonly string[] = [],
  lister: string = target,
) {
  const dir = await mkdtemp(join(tmpdir(), 'ap-spawns-'));
  const log = join(dir, 'spawns.log');
  const listings = join(dir, 'listings.log');
  const script = join(dir, 'ffmpeg');
  const fixed = args.map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
  await writeFile(
    script,
    [
      '#!/bin/sh',
      'case "$1" in',
      `  -filters|-encoders|-decoders|-formats) echo "$$" >> '${listings}'; exec '${lister}' "$@" ;;`,
      'esac',
      `echo "$$" >> '${log}'`,
      `exec '${target}' ${fixed} "$@"`,
      '',
    ].join('\n'),
  );
  await chmod(script, 0o755);
  await writeFile(log, '');
  await writeFile(listings, '');
  const pidsOf = async (file: string) =>
    (await readFile(file, 'utf8'))
      .split('\n')
      .filter(Boolean)
      .map((l) => Number(l));
  return {
    path: script,
    pids: () => pidsOf(log),
    /** pids of the capability listings (four at each boot that read them). */
    listings: () => pidsOf(listings),
  };
}

export async function startHarness(
  env: Record<string, string> = {},
  opts: {
    ffmpegTarget?: string;
    ffmpegArgs?: readonly string[];
    /** Receives the proxy's logs (default: silent). */
    logger?: import('pino').Logger;
    /** The proxy's `inspect` option (XState inspection events). */
    inspect?: import('../../src/inspect.js').InspectOption;
  } = {},
): Promise<Harness> {
  const fixtures = await makeFixtures();
  const realFfmpeg = resolveFfmpeg({ env: process.env }).path;
  const target = opts.ffmpegTarget ?? realFfmpeg;
  // A target not named `ffmpeg` is a fault script: a real ffmpeg lists the capabilities.
  const lister = basename(target) === 'ffmpeg' ? target : realFfmpeg;
  const logger = await spawnLogger(target, opts.ffmpegArgs ?? [], lister);
  const config = mutableConfig(
    loadConfig({
      AP_LOCAL_ROOT: fixtures.dir,
      AP_ALLOW_INSECURE: '1',
      AP_LOG_LEVEL: 'error',
      AP_MAX_CONCURRENCY: '2',
      AP_FFMPEG_PATH: logger.path,
      ...env,
    }),
  );
  const logger_ = opts.logger ?? (await import('pino')).pino({ level: 'silent' });
  const proxy = await createAudioProxy({
    config,
    logger: logger_,
    ...(opts.inspect ? { inspect: opts.inspect } : {}),
  });
  const { url, metricsUrl } = await proxy.listen({
    host: '127.0.0.1',
    port: 0,
    metricsHost: '127.0.0.1',
    metricsPort: 0,
  });
  return {
    proxy,
    url,
    metricsUrl,
    config,
    fixtures,
    spawns: () => logger.pids(),
    listings: () => logger.listings(),
    close: () => proxy.close(),
  };
}

export interface RawResponse {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: Buffer;
  /** false when the connection was torn down before the terminating chunk */
  readonly complete: boolean;
}

/** GET/HEAD with node:http, keeping the raw path byte for byte (`local://` keeps its `//`). */
export function get(
  base: string,
  path: string,
  opts: {
    method?: string;
    headers?: Record<string, string>;
    signal?: AbortSignal;
    onFirstByte?: () => void;
  } = {},
): Promise<RawResponse> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        path,
        method: opts.method ?? 'GET',
        headers: opts.headers,
        signal: opts.signal,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let first = true;
        res.on('data', (c: Buffer) => {
          if (first) {
            first = false;
            opts.onFirstByte?.();
          }
          chunks.push(c);
        });
        const done = (complete: boolean) =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks),
            complete,
          });
        res.on('end', () => done(true));
        res.on('error', () => done(false));
        res.on('aborted', () => done(false));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/**
 * The leak check every fault test ends with: no render slot held, every ffmpeg the proxy spawned
 * dead (asked of the OS), then the proxy closed.
 */
export async function closeLeavingNothing(h: Harness): Promise<void> {
  await waitFor(async () => (await stats(h.proxy.actors.semaphore)).held === 0, 10_000);
  for (const pid of await h.spawns()) expect(isAlive(pid)).toBe(false);
  await h.close();
}

export async function waitFor(
  predicate: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
  stepMs = 20,
): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await predicate()) return;
    await new Promise((r) => setTimeout(r, stepMs));
  }
  throw new Error('condition not met in time');
}

/**
 * A stored mp3 against the MISS that streamed it: same length, and every byte the same but
 * inside the info frame after the ID3v2 tag, which the store completed at commit
 * (`src/workers/xingFrame.ts`). Returns that frame's `[start, end)`.
 */
export function expectSameButInfoFrame(miss: Buffer, hit: Buffer): [number, number] {
  expect(hit.length).toBe(miss.length);
  const split = splitForInfoFrame(hit);
  if (typeof split === 'string') throw new Error(`no info frame in the stored mp3 (${split})`);
  const end = split.offset + parseMp3Header(hit, split.offset)!.length;
  expect(hit.subarray(0, split.offset).equals(miss.subarray(0, split.offset))).toBe(true);
  expect(hit.subarray(end).equals(miss.subarray(end))).toBe(true);
  expect(hit.subarray(split.offset, end).toString('latin1')).toMatch(/Xing|Info/);
  return [split.offset, end];
}
