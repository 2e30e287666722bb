/**
 * Issue #14, "ffmpeg never chooses what to read" and "wrong answers for hostile content": files
 * inside `AP_LOCAL_ROOT` whose bytes try to steer ffmpeg elsewhere (an HLS playlist, a DASH
 * manifest, an ffconcat script, all named `song.mp3`) or are not audio at all, through a real
 * proxy. The outside file is a distinct tone; a render that carried it would decode to its
 * length, so "not rendered" is checked on the status and on the body.
 *
 * Also the probe gate's verdicts before admission: a source the encoders cannot take (65
 * channels), a WAV claiming 1 Hz (amplification: a 1 KB file became hundreds of MB), and a
 * source longer than `AP_MAX_DURATION_S`. None of these may spawn an encoder (the harness's
 * ffmpeg wrapper records every spawn; ffprobe is not wrapped).
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveFfmpeg } from '../../src/workers/ffmpegPath.js';
import { makeFixtures } from '../fixtures/audio.js';
import { closeLeavingNothing, get, type Harness, startHarness } from './harness.js';

const ffmpeg = resolveFfmpeg({ env: process.env }).path;
let h: Harness;
let base: string;
let root: string;
let secret: string;

/** A PCM WAV header + `dataBytes` of silence, with whatever rate/channels the header claims. */
function wav(opts: { rate: number; channels: number; dataBytes: number; bits?: number }): Buffer {
  const bits = opts.bits ?? 16;
  const align = (opts.channels * bits) / 8;
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'latin1');
  header.writeUInt32LE(36 + opts.dataBytes, 4);
  header.write('WAVE', 8, 'latin1');
  header.write('fmt ', 12, 'latin1');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20); // PCM
  header.writeUInt16LE(opts.channels, 22);
  header.writeUInt32LE(opts.rate, 24);
  header.writeUInt32LE(opts.rate * align, 28);
  header.writeUInt16LE(align, 32);
  header.writeUInt16LE(bits, 34);
  header.write('data', 36, 'latin1');
  header.writeUInt32LE(opts.dataBytes, 40);
  const data = Buffer.alloc(opts.dataBytes);
  for (let i = 0; i < data.length; i += 2) data.writeInt16LE((i * 37) % 2000, i);
  return Buffer.concat([header, data]);
}

const hls = (entry: string) =>
  `#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:10\n#EXTINF:4.0,\n${entry}\n#EXT-X-ENDLIST\n`;

beforeAll(async () => {
  base = mkdtempSync(join(tmpdir(), 'ap-hostile-'));
  root = join(base, 'root');
  mkdirSync(join(root, 'sub'), { recursive: true });
  mkdirSync(join(base, 'outside'));
  secret = join(base, 'outside', 'secret.mp3');
  // 4 s of a 1 kHz tone: nothing inside the root lasts that long.
  execFileSync(ffmpeg, [
    ...['-nostdin', '-v', 'error', '-y', '-f', 'lavfi'],
    ...['-i', 'sine=frequency=1000:sample_rate=8000:duration=4', '-c:a', 'libmp3lame', secret],
  ]);
  const fixtures = await makeFixtures();
  copyFileSync(fixtures.stereoWav, join(root, 'ok.wav'));
  writeFileSync(join(root, 'hls-abs.mp3'), hls(secret));
  writeFileSync(join(root, 'hls-file-url.mp3'), hls(`file://${secret}`));
  writeFileSync(join(root, 'sub', 'hls-rel.mp3'), hls('../../outside/secret.mp3'));
  writeFileSync(join(root, 'hls.m3u8'), hls(secret));
  writeFileSync(
    join(root, 'concat.mp3'),
    `ffconcat version 1.0\nfile '${secret}'\nfile 'file:${secret}'\n`,
  );
  writeFileSync(
    join(root, 'dash.mp3'),
    `<?xml version="1.0"?>\n<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT4S" profiles="urn:mpeg:dash:profile:isoff-on-demand:2011"><Period><AdaptationSet mimeType="audio/wav"><Representation id="a" bandwidth="128000"><BaseURL>file://${secret}</BaseURL></Representation></AdaptationSet></Period></MPD>\n`,
  );
  writeFileSync(join(root, 'random.mp3'), randomBytes(4096));
  writeFileSync(join(root, 'notes.txt'), 'Shopping list\n- milk\n- eggs\n'.repeat(40));
  writeFileSync(join(root, 'text.mp3'), 'not audio at all, just a sentence or two.\n'.repeat(40));
  writeFileSync(join(root, 'ch65.wav'), wav({ rate: 8000, channels: 65, dataBytes: 65 * 2 * 10 }));
  writeFileSync(join(root, 'hz1.wav'), wav({ rate: 1, channels: 1, dataBytes: 1000 }));
  // ADTS whose first frames are dense: ffprobe estimates its length from their bitrate (~7.6 s)
  // while it decodes to 62 s. Only the output bound can catch a source that understates.
  const part = (name: string, lavfi: string, rate: string) =>
    execFileSync(ffmpeg, [
      ...['-nostdin', '-v', 'error', '-y', '-f', 'lavfi', '-i', lavfi],
      ...['-c:a', 'aac', '-b:a', rate, '-f', 'adts', join(base, name)],
    ]);
  part('dense.aac', 'anoisesrc=d=2:r=44100', '256k');
  part('sparse.aac', 'sine=d=60:r=44100', '16k');
  writeFileSync(
    join(root, 'understated.aac'),
    Buffer.concat([readFileSync(join(base, 'dense.aac')), readFileSync(join(base, 'sparse.aac'))]),
  );
  h = await startHarness({ AP_LOCAL_ROOT: root });
});

afterAll(async () => {
  await closeLeavingNothing(h);
  rmSync(base, { recursive: true, force: true });
});

const errorOf = (body: Buffer) => (JSON.parse(body.toString()) as { error: string }).error;

describe('content that names other files is never followed', () => {
  it.each([
    'hls-abs.mp3',
    'hls-file-url.mp3',
    'sub/hls-rel.mp3',
    'hls.m3u8',
    'concat.mp3',
    'dash.mp3',
  ])('%s: /info and a render are 415 undecodable_source, the outside file unread', async (name) => {
    const info = await get(h.url, `/insecure/info/plain/local://${name}`);
    expect(info.body.toString()).not.toContain('"format":"hls"');
    expect(info.status).toBe(415);
    expect(errorOf(info.body)).toBe('undecodable_source');
    const render = await get(h.url, `/insecure/f:wav/plain/local://${name}`);
    expect(render.status).toBe(415);
    expect(errorOf(render.body)).toBe('undecodable_source');
  });
});

describe('non-audio bytes are a 415, never a 500 or video', () => {
  it.each(['random.mp3', 'notes.txt', 'text.mp3'])('%s', async (name) => {
    for (const path of [
      `/insecure/info/plain/local://${name}`,
      `/insecure/f:mp3/plain/local://${name}`,
    ]) {
      const r = await get(h.url, path);
      expect({ path, status: r.status, error: errorOf(r.body) }).toEqual({
        path,
        status: 415,
        error: 'undecodable_source',
      });
    }
  });
});

describe('the probe gate refuses what the encoders cannot take, before admission', () => {
  it('65 channels: 415 undecodable_source, no encoder spawned', async () => {
    const before = (await h.spawns()).length;
    const r = await get(h.url, '/insecure/f:mp3/plain/local://ch65.wav');
    expect(r.status).toBe(415);
    expect(errorOf(r.body)).toBe('undecodable_source');
    expect((await h.spawns()).length).toBe(before);
  });

  it('a 1 KB WAV claiming 1 Hz: 415 undecodable_source, no encoder spawned', async () => {
    const before = (await h.spawns()).length;
    const r = await get(h.url, '/insecure/f:wav/plain/local://hz1.wav');
    expect(r.body.length).toBeLessThan(1024);
    expect(r.status).toBe(415);
    expect(errorOf(r.body)).toBe('undecodable_source');
    expect((await h.spawns()).length).toBe(before);
  });

  it('a source longer than AP_MAX_DURATION_S: 413 source_too_long, no encoder spawned', async () => {
    h.config.set({ maxDurationS: 2 });
    try {
      const before = (await h.spawns()).length;
      const r = await get(h.url, '/insecure/f:mp3/plain/local://ok.wav'); // 3 s
      expect(r.status).toBe(413);
      expect(errorOf(r.body)).toBe('source_too_long');
      expect((await h.spawns()).length).toBe(before);
    } finally {
      h.config.set({ maxDurationS: 21_600 });
    }
    expect((await get(h.url, '/insecure/f:mp3/plain/local://ok.wav')).status).toBe(200);
  });

  it('a source that understates its length is cut at AP_MAX_DURATION_S by the output bound', async () => {
    h.config.set({ maxDurationS: 10 });
    try {
      const info = await get(h.url, '/insecure/info/plain/local://understated.aac');
      const claimed = (JSON.parse(info.body.toString()) as { duration: number }).duration;
      expect(claimed).toBeLessThan(10); // admitted on its word
      // Not sized by the probe: a raw PCM decode, so its length is what ffmpeg wrote.
      const r = await get(h.url, '/insecure/f:ogg/sr:8000/ch:1/plain/local://understated.aac');
      expect(r.status).toBe(200);
      const pcm = execFileSync(
        resolveFfmpeg({ env: process.env }).path,
        [...['-v', 'error', '-i', 'pipe:0', '-f', 's16le', '-ac', '1', '-ar', '8000', 'pipe:1']],
        { input: r.body, maxBuffer: 64 << 20 },
      );
      const seconds = pcm.length / (8_000 * 2);
      expect(seconds).toBeGreaterThan(9);
      expect(seconds).toBeLessThanOrEqual(10.05); // it decodes to 62 s without the bound
      // A WAV is sized by the probe before it renders: cut at the claimed length, exactly.
      const wav = await get(h.url, '/insecure/f:wav/sr:8000/ch:1/plain/local://understated.aac');
      expect(wav.status).toBe(200);
      expect(wav.headers['content-length']).toBe(String(wav.body.length));
      expect(wav.body.length).toBe(44 + Math.round(claimed * 8_000) * 2);
    } finally {
      h.config.set({ maxDurationS: 21_600 });
    }
  });
});
