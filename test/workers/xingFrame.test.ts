/**
 * The info frame against ffmpeg's own: the same encode written to a pipe (no info frame) and to
 * a seekable file (ffmpeg's mp3 muxer fills frames, bytes and the TOC in at the end). The
 * proxy's placeholder, completed by `Mp3Indexer` from the piped bytes fed in odd-sized chunks,
 * must carry the same frame count, byte count and TOC, and ffprobe must report the same
 * duration. Also: a stream that loses sync leaves the placeholder; an unknown head is `none`.
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveFfmpeg, resolveFfprobe } from '../../src/workers/ffmpegPath.js';
import {
  infoFramePlaceholder,
  Mp3Indexer,
  parseMp3Header,
  splitForInfoFrame,
} from '../../src/workers/xingFrame.js';

const ffmpeg = resolveFfmpeg({ env: process.env }).path;
const ffprobe = resolveFfprobe({ env: process.env }).path;
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ap-xing-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function encode(args: string[], out: string): Buffer {
  return execFileSync(ffmpeg, [
    ...['-nostdin', '-v', 'error', '-y', '-f', 'lavfi', '-i', 'sine=f=440:d=2.3:r=44100'],
    ...args,
    ...['-f', 'mp3', out],
  ]);
}

function streamed(piped: Buffer): { stream: Buffer; at: number } {
  const split = splitForInfoFrame(piped);
  if (typeof split === 'string') throw new Error(split);
  const frame = infoFramePlaceholder(split.first);
  const stream = Buffer.concat([
    piped.subarray(0, split.offset),
    frame,
    piped.subarray(split.offset),
  ]);
  return { stream, at: split.offset };
}

function duration(file: string): number {
  return Number(
    execFileSync(ffprobe, [
      '-v',
      'error',
      '-of',
      'csv=p=0',
      '-show_entries',
      'format=duration',
      file,
    ])
      .toString()
      .trim(),
  );
}

describe('Mp3Indexer', () => {
  for (const [label, args] of [
    ['VBR stereo 44.1 kHz', ['-ac', '2', '-c:a', 'libmp3lame', '-q:a', '4']],
    [
      'CBR mono 22.05 kHz (MPEG-2)',
      ['-ac', '1', '-ar', '22050', '-c:a', 'libmp3lame', '-b:a', '48k'],
    ],
  ] as const) {
    it(`${label}: frames and bytes as ffmpeg's seekable muxer writes them, a TOC close to its own`, async () => {
      const piped = encode([...args], 'pipe:1');
      const seekFile = join(dir, `${label.length}-seek.mp3`);
      encode([...args], seekFile);
      const seek = execFileSync('cat', [seekFile]);
      const { stream, at } = streamed(piped);
      const indexer = new Mp3Indexer();
      for (let i = 0; i < stream.length; i += 1001) indexer.push(stream.subarray(i, i + 1001));
      const patch = indexer.finish();
      expect(patch?.offset).toBe(at);
      const stored = Buffer.from(stream);
      stored.set(patch!.data, patch!.offset);
      // ffmpeg's info frame sits at the same place; compare its Xing fields.
      const ours = parseMp3Header(stored, at)!;
      const theirs = parseMp3Header(seek, at)!;
      const tagAt = (b: Buffer) =>
        b.indexOf(/Xing|Info/.exec(b.toString('latin1', at, at + 64))![0], at);
      const a = tagAt(stored);
      const b = tagAt(seek);
      expect(stored.subarray(a + 8, a + 16)).toEqual(
        // bytes: ours counts from its own frame, which may be sized differently from ffmpeg's.
        Buffer.concat([
          seek.subarray(b + 8, b + 12),
          u32(seek.readUInt32BE(b + 12) - theirs.length + ours.length),
        ]),
      );
      // The TOC: byte offset of the frame i % into the stream, in 256ths of the bytes. (ffmpeg's
      // own samples frame ends in bags of doubling size, so its entries lag by up to two.)
      const toc = [...stored.subarray(a + 16, a + 116)];
      expect(toc[0]).toBe(0);
      for (let i = 1; i < 100; i++) expect(toc[i]!).toBeGreaterThanOrEqual(toc[i - 1]!);
      const theirToc = [...seek.subarray(b + 16, b + 116)];
      for (let i = 0; i < 100; i++)
        expect(Math.abs(toc[i]! - theirToc[i]!)).toBeLessThanOrEqual(24);
      const file = join(dir, `${label.length}-ours.mp3`);
      await writeFile(file, stored);
      expect(duration(file)).toBe(duration(seekFile));
    });
  }

  it('a stream that loses sync keeps its placeholder; a head without a frame is none', () => {
    const piped = encode(['-c:a', 'libmp3lame', '-b:a', '64k'], 'pipe:1');
    const { stream } = streamed(piped);
    const indexer = new Mp3Indexer();
    indexer.push(stream);
    indexer.push(Buffer.from('TAG trailing garbage'));
    expect(indexer.finish()).toBeUndefined();
    expect(splitForInfoFrame(Buffer.from('not an mp3 at all'))).toBe('none');
    expect(splitForInfoFrame(Buffer.from('ID3'))).toBe('more');
  });
});

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}
