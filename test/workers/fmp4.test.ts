// Fmp4DecodeTimeShift over real ffmpeg output (flac in fragmented MP4, 3 s, 1 s fragments): the
// same bytes but the tfdt values, each moved by the shift in the track's timescale, whatever
// the chunking; a stream cut short comes back unchanged; hostile box sizes are refused.
import { execFileSync } from 'node:child_process';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { resolveFfmpeg } from '../../src/workers/ffmpegPath.js';
import { Fmp4DecodeTimeShift, Fmp4Error, MAX_HELD_BOX_BYTES } from '../../src/workers/fmp4.js';

let file: Buffer;

/** Offsets of every tfdt's time field (version 1, 64-bit) in `b`. */
function tfdtTimes(b: Buffer): { at: number; value: bigint }[] {
  const out: { at: number; value: bigint }[] = [];
  for (let i = b.indexOf('tfdt', 0, 'latin1'); i !== -1; i = b.indexOf('tfdt', i + 4, 'latin1')) {
    out.push({ at: i + 8, value: b.readBigUInt64BE(i + 8) });
  }
  return out;
}

function through(shift: Fmp4DecodeTimeShift, input: Buffer, cuts: number[]): Buffer {
  const out: Buffer[] = [];
  let at = 0;
  for (const c of [...cuts.filter((c) => c > 0 && c < input.length).sort((a, b) => a - b)]) {
    if (c <= at) continue;
    out.push(shift.push(input.subarray(at, c)));
    at = c;
  }
  out.push(shift.push(input.subarray(at)), shift.end());
  return Buffer.concat(out);
}

describe('Fmp4DecodeTimeShift', () => {
  beforeAll(() => {
    const ffmpeg = resolveFfmpeg({ env: process.env }).path;
    file = execFileSync(ffmpeg, [
      ...['-v', 'error', '-f', 'lavfi', '-i', 'sine=f=440:sample_rate=44100:duration=3'],
      ...[
        '-c:a',
        'flac',
        '-strict',
        '-2',
        '-movflags',
        'empty_moov+default_base_moof+skip_trailer',
      ],
      ...['-frag_duration', '1000000', '-f', 'mp4', 'pipe:1'],
    ]);
  });

  it('moves every tfdt by the shift, in the timescale, and nothing else, however chunked', () => {
    const before = tfdtTimes(file);
    expect(before.length).toBeGreaterThanOrEqual(3);
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: file.length }), { maxLength: 40 }), (cuts) => {
        const out = through(new Fmp4DecodeTimeShift(12), file, cuts);
        expect(out.length).toBe(file.length);
        const after = tfdtTimes(out);
        expect(after.map((t) => t.value)).toEqual(before.map((t) => t.value + 12n * 44_100n));
        const masked = Buffer.from(out);
        for (const t of after) file.copy(masked, t.at, t.at, t.at + 8);
        expect(masked.equals(file)).toBe(true);
      }),
      { numRuns: 50 },
    );
  });

  it('a zero shift and a stream cut short pass through unchanged', () => {
    expect(through(new Fmp4DecodeTimeShift(0), file, [100, 900]).equals(file)).toBe(true);
    const cut = file.subarray(0, file.indexOf('moof', 0, 'latin1') + 20);
    expect(through(new Fmp4DecodeTimeShift(5), cut, [3]).equals(cut)).toBe(true);
  });

  it('refuses a box smaller than its header, a held box past the bound, a moof before a moov', () => {
    const tiny = Buffer.from([0, 0, 0, 4, 0x66, 0x72, 0x65, 0x65]);
    expect(() => new Fmp4DecodeTimeShift(1).push(tiny)).toThrow(Fmp4Error);
    const huge = Buffer.alloc(8);
    huge.writeUInt32BE(MAX_HELD_BOX_BYTES + 1, 0);
    huge.write('moof', 4, 'latin1');
    expect(() => new Fmp4DecodeTimeShift(1).push(huge)).toThrow(Fmp4Error);
    const moof = file.subarray(file.indexOf('moof', 0, 'latin1') - 4);
    expect(() => new Fmp4DecodeTimeShift(1).push(moof)).toThrow(/moof before any moov/);
    expect(() => new Fmp4DecodeTimeShift(-1)).toThrow(RangeError);
  });
});
