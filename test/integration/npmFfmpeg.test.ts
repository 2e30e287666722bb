/**
 * Smoke test of the fresh-machine fallback: the ffmpeg and ffprobe binaries shipped inside npm
 * packages (a 2018 and a 2023 static build). A newcomer without a system ffmpeg gets these, so
 * the render path, the probe gate and /info must work with them too.
 */
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { get, type Harness, startHarness } from './harness.js';

const require = createRequire(import.meta.url);
const npmFfmpeg = (require('@ffmpeg-installer/ffmpeg') as { path: string }).path;
const npmFfprobe = (require('@ffprobe-installer/ffprobe') as { path: string }).path;

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ AP_FFPROBE_PATH: npmFfprobe }, { ffmpegTarget: npmFfmpeg });
});
afterAll(async () => {
  await h.close();
});

describe('npm-shipped ffmpeg and ffprobe', () => {
  it('renders mp3 and opus and answers /info', async () => {
    const mp3 = await get(h.url, '/insecure/f:mp3/t:0:1/plain/local://stereo.wav');
    expect(mp3.status).toBe(200);
    expect(mp3.complete).toBe(true);
    expect(mp3.body.length).toBeGreaterThan(1_000);
    const opus = await get(h.url, '/insecure/f:opus/plain/local://stereo.wav');
    expect(opus.status).toBe(200);
    expect(opus.body.subarray(0, 4).toString()).toBe('OggS');
    const info = await get(h.url, '/insecure/info/plain/local://stereo.wav');
    expect(info.status).toBe(200);
    expect(JSON.parse(info.body.toString())).toMatchObject({ format: 'wav', channels: 2 });
    expect((await h.spawns()).length).toBe(2);
  });
});
