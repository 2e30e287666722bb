/**
 * Stderr classification: each documented pattern maps to its class, a clean exit is never a
 * failure, and the tail keeps exactly the newest 4096 bytes however stderr is chunked. Then real
 * ffmpeg and ffprobe fail on a missing file, a garbage file and a file with no audio, and their
 * actual stderr classifies as the HTTP layer expects (404, 415, 500).
 */
import { join } from 'node:path';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseOptions } from '../../src/http/options.js';
import { buildRenderArgv } from '../../src/workers/argv.js';
import {
  appendTail,
  classifyFailure,
  exitOutcome,
  STDERR_TAIL_BYTES,
} from '../../src/workers/classify.js';
import { buildProbeArgv } from '../../src/workers/probe.js';
import { type AudioFixtures, makeFixtures, runTool } from '../fixtures/audio.js';

describe('classifyFailure', () => {
  it.each([
    ['/srv/a.wav: No such file or directory', 'not_found'],
    ['https://h/a: Server returned 404 Not Found', 'not_found'],
    ['Server returned 403 Forbidden (access denied)', 'not_found'],
    ['[https @ 0x1] HTTP error 404 Not Found', 'not_found'],
    ['HTTP error 403', 'not_found'],
    ['upstream said 404 not found', 'not_found'],
    ['garbage.bin: Invalid data found when processing input', 'undecodable'],
    ['[mp3 @ 0x1] Could not find codec parameters for stream 0', 'undecodable'],
    ['Output file #0 does not contain any stream', 'render_failed'],
    ["No such filter: 'deesser'", 'render_failed'],
    ['Server returned 500 Internal Server Error', 'render_failed'],
    ['HTTP error 401 Unauthorized', 'render_failed'],
    ['', 'render_failed'],
  ] as const)('%j → %s', (stderr, expected) => {
    expect(classifyFailure(1, stderr)).toBe(expected);
    expect(classifyFailure(1, Buffer.from(stderr))).toBe(expected);
  });

  it('prefers not_found when both kinds of line are present', () => {
    const both = 'Invalid data found when processing input\nx: No such file or directory\n';
    expect(classifyFailure(1, both)).toBe('not_found');
  });

  it('classifies a death by signal (status null) from its tail too', () => {
    expect(classifyFailure(null, '')).toBe('render_failed');
    expect(classifyFailure(null, 'Invalid data found when processing input')).toBe('undecodable');
  });

  it('never treats a clean exit as a failure, whatever stderr says', () => {
    expect(exitOutcome(0, 'No such file or directory')).toEqual({ ok: true });
    expect(exitOutcome(0, Buffer.from('Invalid data found when processing input'))).toEqual({
      ok: true,
    });
    expect(exitOutcome(255, 'No such file or directory')).toEqual({
      ok: false,
      class: 'not_found',
    });
    expect(() => classifyFailure(0, 'anything')).toThrow(RangeError);
  });
});

describe('appendTail', () => {
  it('keeps the newest bytes, at most max, without aliasing its inputs', () => {
    const chunk = Buffer.from('abcdef');
    const tail = appendTail(Buffer.from('0123'), chunk, 8);
    expect(tail.toString()).toBe('23abcdef');
    chunk.fill(0x21);
    expect(tail.toString()).toBe('23abcdef');
    expect(appendTail(Buffer.alloc(0), Buffer.from('xyz'), 2).toString()).toBe('yz');
    expect(appendTail(Buffer.from('abc'), Buffer.alloc(0), 2).toString()).toBe('bc');
    expect(appendTail(Buffer.from('abc'), Buffer.from('d'), 0).byteLength).toBe(0);
    expect(() => appendTail(Buffer.alloc(0), Buffer.alloc(0), -1)).toThrow(RangeError);
  });

  it('defaults to a 4096-byte tail', () => {
    expect(STDERR_TAIL_BYTES).toBe(4096);
    const tail = appendTail(Buffer.alloc(4000, 0x61), Buffer.alloc(200, 0x62));
    expect(tail.byteLength).toBe(4096);
    expect(tail.subarray(-200).every((b) => b === 0x62)).toBe(true);
    expect(tail.subarray(0, 3896).every((b) => b === 0x61)).toBe(true);
  });

  it('equals the last max bytes of the whole stream, for any chunking (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.uint8Array({ maxLength: 300 }), { maxLength: 30 }),
        fc.integer({ min: 1, max: 700 }),
        (chunks, max) => {
          let tail: Buffer = Buffer.alloc(0);
          for (const chunk of chunks) tail = appendTail(tail, chunk, max);
          const whole = Buffer.concat(chunks);
          expect(tail.equals(whole.subarray(Math.max(0, whole.byteLength - max)))).toBe(true);
        },
      ),
    );
  });

  it('keeps the cause when a flood of warnings precedes it', () => {
    let tail: Buffer = Buffer.alloc(0);
    for (let i = 0; i < 500; i++) {
      tail = appendTail(tail, Buffer.from(`[mp3 @ 0x1] warning ${i}: skipping junk\n`));
    }
    tail = appendTail(tail, Buffer.from('in.mp3: Invalid data found when processing input\n'));
    expect(classifyFailure(1, tail)).toBe('undecodable');
  });
});

describe('real ffmpeg and ffprobe failures', () => {
  let fx: AudioFixtures;
  beforeAll(async () => {
    fx = await makeFixtures();
  });
  const mp3 = () => {
    const parsed = parseOptions('f:mp3');
    if (!parsed.ok) throw new Error(parsed.message);
    return parsed.options;
  };

  async function classifyRun(executable: string, argv: string[]) {
    const run = await runTool(executable, argv);
    let tail: Buffer = Buffer.alloc(0);
    tail = appendTail(tail, Buffer.from(run.stderr));
    return { status: run.status, outcome: exitOutcome(run.status, tail), stderr: run.stderr };
  }

  it('a missing local file is not_found (ffmpeg and ffprobe)', async () => {
    const missing = { url: join(fx.dir, 'missing.wav'), kind: 'local' as const };
    const render = await classifyRun('ffmpeg', buildRenderArgv(mp3(), missing));
    expect(render.outcome, render.stderr).toEqual({ ok: false, class: 'not_found' });
    const probe = await classifyRun('ffprobe', buildProbeArgv(missing));
    expect(probe.outcome, probe.stderr).toEqual({ ok: false, class: 'not_found' });
  });

  it('a garbage file is undecodable (ffmpeg and ffprobe)', async () => {
    const garbage = { url: fx.garbage, kind: 'local' as const };
    const render = await classifyRun('ffmpeg', buildRenderArgv(mp3(), garbage));
    expect(render.outcome, render.stderr).toEqual({ ok: false, class: 'undecodable' });
    const probe = await classifyRun('ffprobe', buildProbeArgv(garbage));
    expect(probe.outcome, probe.stderr).toEqual({ ok: false, class: 'undecodable' });
  });

  it('a file no audio demuxer reads (subtitles) is undecodable: refused by the whitelist', async () => {
    const subtitles = { url: fx.subtitlesOnly, kind: 'local' as const };
    const render = await classifyRun('ffmpeg', buildRenderArgv(mp3(), subtitles));
    expect(render.status).not.toBe(0);
    expect(render.stderr).toMatch(/not on whitelist/);
    expect(render.outcome).toEqual({ ok: false, class: 'undecodable' });
  });

  it('a missing name that looks like another protocol is still just a missing file', async () => {
    const crafted = { url: `${fx.dir}/concat:${fx.stereoWav}|x.wav`, kind: 'local' as const };
    const render = await classifyRun('ffmpeg', buildRenderArgv(mp3(), crafted));
    expect(render.outcome, render.stderr).toEqual({ ok: false, class: 'not_found' });
  });
});
