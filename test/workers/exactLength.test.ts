// Exact lengths before the render: `exactSamples`/`exactWavLayout` count the trimmed window at the
// output rate (bounded by AP_MAX_DURATION_S, floored by the trim pad), the argv cuts or pads the
// PCM to that count and writes a WAV raw, `wavHeader` writes sizes that agree, the worker puts the
// header first and refuses an output that is not exactly the announced length (longer: stopped at
// once; shorter: failed at exit), and `writeFlacTotalSamples` fills the STREAMINFO count of a
// real ffmpeg flac (and touches nothing else). Real ffmpeg where a process runs.
import { afterEach, describe, expect, it } from 'vitest';
import type { RenderOptions } from '../../src/core/variant.js';
import {
  buildRenderArgv,
  exactSamples,
  exactWavLayout,
  WAV_HEADER_BYTES,
} from '../../src/workers/argv.js';
import { writeFlacTotalSamples } from '../../src/workers/renderTask.js';
import { wavHeader } from '../../src/workers/wavHeader.js';
import { direct, expectNoSurvivors, renderInThread, sineArgv } from './harness.js';

afterEach(() => {
  expectNoSurvivors();
});

const INPUT = {
  url: '/proc/self/fd/3',
  kind: 'local',
  sampleRate: 44_100,
  channels: 2,
  bitDepth: 16,
  duration: 3,
} as const;
const wav = (o: Partial<RenderOptions> = {}): RenderOptions => ({ format: 'wav', ...o });

describe('exact sample counts', () => {
  it('counts the trimmed window at the output rate', () => {
    expect(exactSamples(wav(), INPUT)).toEqual({
      sampleRate: 44_100,
      channels: 2,
      samples: 132_300,
    });
    expect(exactSamples(wav({ trim: { start: 1, duration: 1.5 } }), INPUT)?.samples).toBe(66_150);
    expect(exactSamples(wav({ trim: { start: 2.5 } }), INPUT)?.samples).toBe(22_050);
    expect(exactSamples(wav({ sampleRate: 8_000, channels: 1 }), INPUT)).toEqual({
      sampleRate: 8_000,
      channels: 1,
      samples: 24_000,
    });
    // Past the end: the trim pad's 10 ms of silence, as before.
    expect(exactSamples(wav({ trim: { start: 9 } }), INPUT)?.samples).toBe(441);
    // AP_MAX_DURATION_S bounds it.
    expect(exactSamples(wav(), { ...INPUT, duration: 100, maxDurationS: 10 })?.samples).toBe(
      441_000,
    );
    expect(exactSamples({ format: 'flac' }, INPUT)?.samples).toBe(132_300);
  });

  it('is unknown without the probe facts, and for lossy formats', () => {
    const { duration: _d, ...noDuration } = INPUT;
    const { sampleRate: _r, ...noRate } = INPUT;
    const { channels: _c, ...noChannels } = INPUT;
    expect(exactSamples(wav(), noDuration)).toBeUndefined();
    expect(exactSamples(wav(), noRate)).toBeUndefined();
    expect(exactSamples(wav(), noChannels)).toBeUndefined();
    expect(exactSamples({ format: 'mp3' }, INPUT)).toBeUndefined();
    expect(exactWavLayout({ format: 'flac' }, INPUT)).toBeUndefined();
  });

  it('sizes a WAV by its bit depth, and gives up past RIFF 4 GiB', () => {
    expect(exactWavLayout(wav(), INPUT)?.totalBytes).toBe(44 + 132_300 * 4);
    expect(exactWavLayout(wav({ bitDepth: '24' }), INPUT)).toMatchObject({ bits: 24 });
    expect(exactWavLayout(wav({ bitDepth: '32f' }), INPUT)).toMatchObject({
      bits: 32,
      float: true,
    });
    expect(exactWavLayout(wav(), { ...INPUT, duration: 7 * 3600 })).toBeUndefined();
  });

  it('pads and cuts to the count, and writes an exact WAV raw', () => {
    const argv = buildRenderArgv(wav({ trim: { start: 1, duration: 1.5 } }), INPUT);
    expect(argv.join(' ')).toContain('apad=whole_len=66150,atrim=end_sample=66150');
    expect(argv.slice(-3)).toEqual(['-f', 's16le', 'pipe:1']);
    const flac = buildRenderArgv({ format: 'flac' }, INPUT);
    expect(flac.join(' ')).toContain('atrim=end_sample=132300');
    expect(flac.slice(-3)).toEqual(['-f', 'flac', 'pipe:1']);
    const { duration: _d, ...unknown } = INPUT;
    expect(buildRenderArgv(wav(), unknown).slice(-3)).toEqual(['-f', 'wav', 'pipe:1']);
  });

  it('writes a header whose sizes agree with the layout', () => {
    const layout = exactWavLayout(wav({ bitDepth: '32f' }), INPUT)!;
    const h = wavHeader(layout);
    expect(h.length).toBe(WAV_HEADER_BYTES);
    expect(h.toString('latin1', 0, 4)).toBe('RIFF');
    expect(h.readUInt32LE(4)).toBe(layout.totalBytes - 8);
    expect(h.readUInt16LE(20)).toBe(3);
    expect(h.readUInt16LE(22)).toBe(2);
    expect(h.readUInt32LE(24)).toBe(44_100);
    expect(h.readUInt16LE(32)).toBe(8);
    expect(h.readUInt32LE(40)).toBe(layout.totalBytes - 44);
    expect(() => wavHeader({ ...layout, totalBytes: layout.totalBytes + 1 })).toThrow(RangeError);
  });
});

describe('the worker holds a render to its announced length', () => {
  const pcm = sineArgv(1, 's16le'); // 44100 frames × 4 bytes
  const prefix = new Uint8Array([1, 2, 3, 4]);

  it('sends the prefix first, then ffmpeg output, and ends clean at the exact length', async () => {
    const expected = await direct('ffmpeg', pcm);
    const run = renderInThread({
      executable: 'ffmpeg',
      argv: pcm,
      timeoutMs: 30_000,
      prefix,
      exactBytes: expected.length + 4,
    });
    const outcome = await run.result;
    expect(outcome).toMatchObject({ type: 'done', bytes: expected.length + 4 });
    expect(Buffer.concat(run.chunks).equals(Buffer.concat([prefix, expected]))).toBe(true);
  });

  it('stops an output longer than announced, and fails one that ends short', async () => {
    const long = renderInThread({
      executable: 'ffmpeg',
      argv: pcm,
      timeoutMs: 30_000,
      exactBytes: 1000,
    });
    expect(await long.result).toMatchObject({ type: 'error', class: 'render_failed' });
    expect(Buffer.concat(long.chunks).length).toBeLessThanOrEqual(1000);
    const short = renderInThread({
      executable: 'ffmpeg',
      argv: pcm,
      timeoutMs: 30_000,
      exactBytes: 44_100 * 4 + 5,
    });
    expect(await short.result).toMatchObject({ type: 'error', class: 'render_failed' });
  });

  it('writes a flac STREAMINFO sample count into the first batch, nothing else', async () => {
    const flacArgv = [...pcm.slice(0, -5), '-c:a', 'flac', '-f', 'flac', 'pipe:1'];
    const plain = await direct('ffmpeg', flacArgv);
    expect(plain.readUIntBE(22, 4)).toBe(0); // ffmpeg on a pipe: "unknown"
    const run = renderInThread({
      executable: 'ffmpeg',
      argv: flacArgv,
      timeoutMs: 30_000,
      flacTotalSamples: 44_100,
    });
    await run.result;
    const out = Buffer.concat(run.chunks);
    expect(out.length).toBe(plain.length);
    expect(out[21]! & 0x0f).toBe(0);
    expect(out.readUInt32BE(22)).toBe(44_100);
    const differing = [...out.keys()].filter((i) => out[i] !== plain[i]);
    expect(differing.every((i) => i >= 21 && i <= 25)).toBe(true);
  });

  it('leaves what is not a flac STREAMINFO alone', () => {
    const bytes = new Uint8Array(30);
    expect(writeFlacTotalSamples(bytes, 5)).toBe(false);
    expect(bytes.every((b) => b === 0)).toBe(true);
    const head = Buffer.from('fLaC\x00\x00\x00\x22' + '\x00'.repeat(22), 'latin1');
    expect(writeFlacTotalSamples(head, 2 ** 36 + 1)).toBe(false);
    expect(writeFlacTotalSamples(head, 2 ** 33 + 7)).toBe(true);
    expect(head[21]).toBe(2);
    expect(head.readUInt32BE(22)).toBe(7);
  });
});
