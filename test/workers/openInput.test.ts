/**
 * A render task whose source the main thread opens (`RenderSpec.openInput`): ffmpeg reads the
 * descriptor as fd 3 through the argv builder's `/proc/self/fd/3`; the lease is released once,
 * after the task is over; a refusal settles without running anything; a cancel while the source
 * is still opening submits nothing.
 */
import { readdirSync, readlinkSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OpenOutcome } from '../../src/core/source.js';
import type { RenderOutcome } from '../../src/core/worker.js';
import { parseOptions } from '../../src/http/options.js';
import { soleLease } from '../../src/sources/lease.js';
import { buildRenderArgv, FD_INPUT_PATH } from '../../src/workers/argv.js';
import { resolveFfmpeg } from '../../src/workers/ffmpegPath.js';
import { createWorkerPool, type WorkerPool } from '../../src/workers/pool.js';
import { runRender, startRender } from '../../src/workers/renderClient.js';
import { makeFixtures } from '../fixtures/audio.js';

const ffmpeg = resolveFfmpeg({ env: process.env }).path;
let pool: WorkerPool;
let wavPath: string;
/**
 * Descriptors of this process open on `path`. Counting every descriptor would be racy: a spawn in
 * flight on a worker thread holds /dev/null and pipe descriptors for a moment.
 */
function fdsOn(path: string): number {
  let n = 0;
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`) === path) n++;
    } catch {
      // closed between the listing and the read: not open on `path`
    }
  }
  return n;
}

function mp3Argv(): string[] {
  const parsed = parseOptions('f:mp3');
  if (!parsed.ok) throw new Error('options');
  return buildRenderArgv(parsed.options, { url: FD_INPUT_PATH, kind: 'local' });
}

async function openWav(): Promise<OpenOutcome> {
  const fh = await open(wavPath, 'r');
  return { ok: true, lease: soleLease(fh, (await fh.stat()).size) };
}

beforeAll(async () => {
  wavPath = (await makeFixtures()).stereoWav;
  pool = createWorkerPool({ name: 'open-input-test', size: 2 });
  await pool.start();
});
afterAll(async () => {
  await pool.stop();
});

describe('RenderSpec.openInput', () => {
  it('ffmpeg reads the opened file as fd 3; the descriptor is closed after the task', async () => {
    let during = 0;
    const r = await runRender(pool, {
      executable: ffmpeg,
      argv: mp3Argv(),
      timeoutMs: 20_000,
      openInput: async () => {
        const opened = await openWav();
        during = fdsOn(wavPath);
        return opened;
      },
    });
    expect(r.outcome.type, JSON.stringify(r.outcome)).toBe('done');
    expect(during).toBe(1); // the counter sees the lease's descriptor while it is open
    expect(Buffer.concat(r.chunks).length).toBeGreaterThan(10_000);
    await new Promise((res) => setTimeout(res, 50));
    expect(fdsOn(wavPath)).toBe(0);
  });

  it('a refusal settles the task without running it (not_found keeps its class)', async () => {
    const r = await runRender(pool, {
      executable: ffmpeg,
      argv: mp3Argv(),
      timeoutMs: 20_000,
      openInput: async () => ({ ok: false, refusal: 'not_found' }),
    });
    expect(r.pid).toBeNull();
    expect(r.outcome).toMatchObject({ type: 'error', class: 'not_found' });
    const big = await runRender(pool, {
      executable: ffmpeg,
      argv: mp3Argv(),
      timeoutMs: 20_000,
      openInput: async () => ({ ok: false, refusal: 'source_too_large' }),
    });
    expect(big.outcome).toMatchObject({ type: 'error', class: 'render_failed' });
  });

  it('a cancel while the source is opening submits nothing and releases the late lease', async () => {
    let released = 0;
    let sawAbort = false;
    const outcome = await new Promise<RenderOutcome>((resolve) => {
      const handle = startRender(
        pool,
        {
          executable: ffmpeg,
          argv: mp3Argv(),
          timeoutMs: 20_000,
          openInput: async (signal) => {
            await new Promise((r) => setTimeout(r, 100));
            sawAbort = signal?.aborted ?? false;
            const opened = await openWav();
            if (!opened.ok) return opened;
            const { lease } = opened;
            return {
              ok: true,
              lease: {
                fd: lease.fd,
                size: lease.size,
                release: () => {
                  released++;
                  lease.release();
                },
              },
            };
          },
        },
        { onSettled: resolve },
      );
      void handle.cancel();
    });
    expect(outcome).toMatchObject({ type: 'error', class: 'cancelled' });
    expect(sawAbort).toBe(true);
    expect(released).toBe(1);
    expect(pool.inFlight).toBe(0);
  });
});
