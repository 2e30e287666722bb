/**
 * The peaks reducer: exact min/max pairs on hand-built PCM, the samples_per_pixel rule, what
 * happens when the decode produces fewer frames than predicted (zero padding) or more (folded
 * into the last pixel), that any chunking of the same PCM reduces to the same bytes (property,
 * against a naive model), and audiowaveform's JSON and dat layouts byte for byte. Then real
 * ffmpeg decodes a fixture through `buildPeaksDecodeArgv` and the reduction sees the sine.
 */
import { spawn } from 'node:child_process';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseOptions } from '../../src/http/options.js';
import { buildPeaksDecodeArgv } from '../../src/workers/argv.js';
import {
  DAT_HEADER_BYTES,
  PeaksReducer,
  peaksFrameBudget,
  toDat,
  toJson,
} from '../../src/workers/peaks.js';
import { type AudioFixtures, makeFixtures } from '../fixtures/audio.js';

function pcm(...samples: number[]): Buffer {
  const out = Buffer.alloc(samples.length * 2);
  for (const [i, s] of samples.entries()) out.writeInt16LE(s, i * 2);
  return out;
}

function reduce(
  options: { channels: 1 | 2; pts: number; totalFrames: number },
  ...chunks: Buffer[]
) {
  const reducer = new PeaksReducer(options);
  for (const chunk of chunks) reducer.push(chunk);
  return { reducer, data: Array.from(reducer.result(8000).data) };
}

/** The obvious reduction, all in memory: the model the streaming reducer must agree with. */
function model(samples: number[], channels: 1 | 2, pts: number, totalFrames: number): number[] {
  const spp = Math.max(Math.ceil(totalFrames / pts), 1);
  const out = new Array<number>(pts * 2 * channels).fill(0);
  const frames = Math.floor(samples.length / channels);
  const seen = new Set<number>();
  for (let f = 0; f < frames; f++) {
    const pixel = Math.min(Math.floor(f / spp), pts - 1);
    for (let c = 0; c < channels; c++) {
      const s = samples[f * channels + c]!;
      const at = pixel * 2 * channels + c * 2;
      const key = pixel * channels + c;
      out[at] = seen.has(key) ? Math.min(out[at]!, s) : s;
      out[at + 1] = seen.has(key) ? Math.max(out[at + 1]!, s) : s;
      seen.add(key);
    }
  }
  return out;
}

describe('PeaksReducer', () => {
  it('reduces mono PCM to min/max pairs, one frame per pixel', () => {
    const { reducer, data } = reduce({ channels: 1, pts: 3, totalFrames: 3 }, pcm(100, -200, 50));
    expect(reducer.samplesPerPixel).toBe(1);
    expect(data).toEqual([100, 100, -200, -200, 50, 50]);
  });

  it('interleaves per pixel, per channel, min then max; spp = ceil(frames/pts)', () => {
    // 10 stereo frames into 3 pixels: 4 + 4 + 2 frames.
    const frames = Array.from({ length: 10 }, (_, i) => [i * 10, -i * 100]).flat();
    const { reducer, data } = reduce({ channels: 2, pts: 3, totalFrames: 10 }, pcm(...frames));
    expect(reducer.samplesPerPixel).toBe(4);
    expect(data).toEqual([0, 30, -300, 0, 40, 70, -700, -400, 80, 90, -900, -800]);
  });

  it('pads the pixels a short decode never reached with 0, 0', () => {
    const samples = Array.from({ length: 35 }, (_, i) => i + 1);
    const { reducer, data } = reduce({ channels: 1, pts: 10, totalFrames: 100 }, pcm(...samples));
    expect(reducer.samplesPerPixel).toBe(10);
    expect(data.slice(0, 8)).toEqual([1, 10, 11, 20, 21, 30, 31, 35]);
    expect(data.slice(8)).toEqual(new Array(12).fill(0));
    expect(reducer.framesSeen).toBe(35);
  });

  it('folds frames beyond the prediction into the last pixel; length stays pts', () => {
    const samples = Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? i : -i));
    const { data } = reduce({ channels: 1, pts: 5, totalFrames: 10 }, pcm(...samples));
    expect(data).toHaveLength(10);
    expect(data.slice(0, 8)).toEqual([-1, 0, -3, 2, -5, 4, -7, 6]);
    expect(data.slice(8)).toEqual([-19, 18]); // frames 8..19 all land in pixel 4
  });

  it('handles an empty source (0 predicted frames) and no PCM at all', () => {
    const { reducer, data } = reduce({ channels: 2, pts: 4, totalFrames: 0 });
    expect(reducer.samplesPerPixel).toBe(1);
    expect(data).toEqual(new Array(16).fill(0));
  });

  it('carries a sample or frame split across chunks, and drops a partial final frame', () => {
    const whole = pcm(1000, -1000, 2000, -2000, 3000);
    const split = [
      whole.subarray(0, 1),
      whole.subarray(1, 3),
      whole.subarray(3, 7),
      whole.subarray(7),
    ];
    const a = reduce({ channels: 2, pts: 2, totalFrames: 2 }, whole);
    const b = reduce({ channels: 2, pts: 2, totalFrames: 2 }, ...split);
    expect(b.data).toEqual(a.data);
    expect(a.data).toEqual([1000, 1000, -1000, -1000, 2000, 2000, -2000, -2000]);
    expect(a.reducer.framesSeen).toBe(2); // the dangling 3000 is half a frame
  });

  it('any chunking equals one push and equals the naive model (property)', () => {
    fc.assert(
      fc.property(
        fc.constantFrom<1 | 2>(1, 2),
        fc.integer({ min: 1, max: 40 }),
        fc.integer({ min: 0, max: 400 }),
        fc.array(fc.integer({ min: -32768, max: 32767 }), { maxLength: 600 }),
        fc.array(fc.integer({ min: 0, max: 1300 }), { maxLength: 12 }),
        (channels, pts, totalFrames, samples, cuts) => {
          const bytes = pcm(...samples);
          const points = [...new Set(cuts.map((c) => Math.min(c, bytes.byteLength)))].sort(
            (x, y) => x - y,
          );
          const chunks: Buffer[] = [];
          let from = 0;
          for (const p of points) {
            chunks.push(bytes.subarray(from, p));
            from = p;
          }
          chunks.push(bytes.subarray(from));
          const options = { channels, pts, totalFrames };
          const streamed = reduce(options, ...chunks).data;
          expect(streamed).toEqual(reduce(options, bytes).data);
          expect(streamed).toEqual(model(samples, channels, pts, totalFrames));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('refuses bad shapes and use after finish', () => {
    expect(() => new PeaksReducer({ channels: 3 as never, pts: 1, totalFrames: 0 })).toThrow(
      RangeError,
    );
    expect(() => new PeaksReducer({ channels: 1, pts: 0, totalFrames: 0 })).toThrow(RangeError);
    expect(() => new PeaksReducer({ channels: 1, pts: 1, totalFrames: -1 })).toThrow(RangeError);
    const reducer = new PeaksReducer({ channels: 1, pts: 1, totalFrames: 1 });
    expect(() => reducer.result(0)).toThrow(RangeError);
    reducer.finish({ sampleRate: 8000 });
    expect(() => reducer.push(pcm(1))).toThrow(TypeError);
  });
});

describe('serialisation (audiowaveform v2)', () => {
  const finished = () => {
    const reducer = new PeaksReducer({ channels: 2, pts: 2, totalFrames: 4 });
    reducer.push(pcm(-3000, 9000, 100, -100, 5, 6, -7, 8));
    return reducer;
  };

  it('writes JSON with audiowaveform’s keys, in its order', () => {
    const out = finished().finish({ sampleRate: 44_100 });
    expect('json' in out).toBe(true);
    const text = (out as { json: Buffer }).json.toString('utf8');
    expect(text).toBe(
      '{"version":2,"channels":2,"sample_rate":44100,"samples_per_pixel":2,"bits":16,' +
        '"length":2,"data":[-3000,100,-100,9000,-7,5,6,8]}',
    );
  });

  it('writes dat: a 24-byte little-endian header, then int16 LE values', () => {
    const out = finished().finish({ sampleRate: 44_100, format: 'dat' });
    const dat = (out as { dat: Buffer }).dat;
    expect(dat.byteLength).toBe(DAT_HEADER_BYTES + 8 * 2);
    expect(dat.subarray(0, DAT_HEADER_BYTES)).toEqual(
      Buffer.from([
        ...[2, 0, 0, 0], // version
        ...[0, 0, 0, 0], // flags: 16-bit
        ...[0x44, 0xac, 0, 0], // 44100
        ...[2, 0, 0, 0], // samples per pixel
        ...[2, 0, 0, 0], // length
        ...[2, 0, 0, 0], // channels
      ]),
    );
    const values = Array.from({ length: 8 }, (_, i) => dat.readInt16LE(DAT_HEADER_BYTES + i * 2));
    expect(values).toEqual([-3000, 100, -100, 9000, -7, 5, 6, 8]);
  });

  it('the two formats carry the same pairs', () => {
    const data = finished().result(22_050);
    const json = JSON.parse(toJson(data).toString());
    const dat = toDat(data);
    const fromDat = Array.from({ length: json.data.length }, (_, i) =>
      dat.readInt16LE(DAT_HEADER_BYTES + i * 2),
    );
    expect(fromDat).toEqual(json.data);
    expect(json.length * 2 * json.channels).toBe(json.data.length);
  });
});

describe('peaksFrameBudget', () => {
  it('narrows the probed duration by the trim, as ffmpeg does', () => {
    expect(peaksFrameBudget(3, 44_100)).toBe(132_300);
    expect(peaksFrameBudget(3, 44_100, { start: 0.5 })).toBe(110_250);
    expect(peaksFrameBudget(3, 44_100, { start: 0.5, duration: 1 })).toBe(44_100);
    expect(peaksFrameBudget(3, 44_100, { start: 2.5, duration: 1 })).toBe(22_050);
    expect(peaksFrameBudget(3, 44_100, { start: 9 })).toBe(0);
    expect(peaksFrameBudget(2.037551, 44_100)).toBe(89_856);
    expect(() => peaksFrameBudget(Number.NaN, 44_100)).toThrow(RangeError);
    expect(() => peaksFrameBudget(1, 0)).toThrow(RangeError);
  });
});

describe('real decode through buildPeaksDecodeArgv', () => {
  let fx: AudioFixtures;
  beforeAll(async () => {
    fx = await makeFixtures();
  });

  /** Streams ffmpeg's stdout straight into the reducer, chunk by chunk, as the worker does. */
  function decodeInto(argv: string[], reducer: PeaksReducer): Promise<number | null> {
    return new Promise((resolve, reject) => {
      const child = spawn('ffmpeg', argv, { stdio: ['ignore', 'pipe', 'inherit'] });
      child.stdout.on('data', (chunk: Buffer) => reducer.push(chunk));
      child.on('error', reject);
      child.on('close', resolve);
    });
  }

  it('sees both sine channels at their amplitude in every pixel, from the exact frame budget', async () => {
    const parsed = parseOptions('f:peaks/ch:2/pts:50/t:0.5:2');
    if (!parsed.ok) throw new Error(parsed.message);
    const options = parsed.options;
    const totalFrames = peaksFrameBudget(3, 44_100, options.trim);
    const reducer = new PeaksReducer({ channels: 2, pts: 50, totalFrames });
    const argv = buildPeaksDecodeArgv(
      options,
      { url: fx.stereoWav, kind: 'local' },
      {
        sampleRate: 44_100,
        channels: 2,
      },
    );
    expect(await decodeInto(argv, reducer)).toBe(0);
    expect(reducer.framesSeen).toBe(totalFrames);
    const json = JSON.parse(
      (reducer.finish({ sampleRate: 44_100 }) as { json: Buffer }).json.toString(),
    );
    expect(json).toMatchObject({ channels: 2, sample_rate: 44_100, length: 50, bits: 16 });
    expect(json.samples_per_pixel).toBe(1764);
    for (let i = 0; i < json.data.length; i += 2) {
      expect(json.data[i]).toBeLessThanOrEqual(-4000);
      expect(json.data[i + 1]).toBeGreaterThanOrEqual(4000);
      expect(json.data[i + 1]).toBeLessThanOrEqual(4096);
    }
  });

  it('shows a fade-in as a rising envelope and downmixes to mono by default', async () => {
    const parsed = parseOptions('f:peaks/pts:20/t:0:2/fade:1');
    if (!parsed.ok) throw new Error(parsed.message);
    expect(parsed.options.channels).toBe(1);
    const totalFrames = peaksFrameBudget(3, 22_050, parsed.options.trim);
    const reducer = new PeaksReducer({ channels: 1, pts: 20, totalFrames });
    const argv = buildPeaksDecodeArgv(
      parsed.options,
      { url: fx.stereoWav, kind: 'local' },
      {
        sampleRate: 22_050,
        channels: 1,
      },
    );
    expect(await decodeInto(argv, reducer)).toBe(0);
    expect(reducer.framesSeen).toBe(totalFrames);
    const data = reducer.result(22_050).data;
    const max = (pixel: number) => data[pixel * 2 + 1]!;
    for (let p = 1; p < 10; p++) expect(max(p)).toBeGreaterThan(max(p - 1));
    expect(max(0)).toBeLessThan(max(15) / 5);
  });
});
