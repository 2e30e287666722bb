/**
 * The probe cache end to end, with ffprobe's spawns counted by a logging wrapper: a second and a
 * third variant of one unchanged source run no ffprobe; the same file rewritten (new mtime and
 * size) is probed again; a refusal about the content (a video source) is remembered too, while
 * a missing file is not.
 */
import { copyFile, rm, utimes } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveFfprobe } from '../../src/workers/ffmpegPath.js';
import { get, type Harness, spawnLogger, startHarness } from './harness.js';

let h: Harness;
let probes: Awaited<ReturnType<typeof spawnLogger>>;
const name = `probe-cache-${process.pid}.wav`;
let path: string;

beforeAll(async () => {
  probes = await spawnLogger(resolveFfprobe({ env: process.env }).path);
  h = await startHarness({ AP_FFPROBE_PATH: probes.path });
  path = join(h.fixtures.dir, name);
  await copyFile(h.fixtures.stereoWav, path);
});

afterAll(async () => {
  await h.close();
  await rm(path, { force: true });
});

const count = async () => (await probes.pids()).length;

describe('probe verdicts per source version', () => {
  it('a second and third variant of one source run no ffprobe', async () => {
    const before = await count();
    for (const variant of ['f:mp3/t:0:1', 'f:opus/t:0:1', 'f:wav/t:0:1']) {
      const r = await get(h.url, `/insecure/${variant}/plain/local://${name}`);
      expect(r.status).toBe(200);
    }
    expect((await count()) - before).toBe(1);
    expect((await get(h.url, `/insecure/info/plain/local://${name}`)).status).toBe(200);
    expect((await count()) - before).toBe(1);
  });

  it('a rewritten file is a new version and is probed again', async () => {
    const before = await count();
    await copyFile(h.fixtures.monoMp3, path); // other bytes, other size
    await utimes(path, new Date(), new Date(Date.now() + 60_000));
    const r = await get(h.url, `/insecure/info/plain/local://${name}`);
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body.toString()).channels).toBe(1);
    expect((await count()) - before).toBe(1);
  });

  it('remembers a refusal about the content, never a missing file', async () => {
    const video = `/insecure/f:mp3/plain/local://${h.fixtures.videoMp4.split('/').pop()}`;
    const before = await count();
    expect((await get(h.url, video)).status).toBe(415);
    expect((await get(h.url, video)).status).toBe(415);
    expect((await count()) - before).toBe(1);
    const ghost = `ghost-${process.pid}.wav`;
    expect((await get(h.url, `/insecure/info/plain/local://${ghost}`)).status).toBe(404);
    await copyFile(h.fixtures.stereoWav, join(h.fixtures.dir, ghost));
    try {
      expect((await get(h.url, `/insecure/info/plain/local://${ghost}`)).status).toBe(200);
    } finally {
      await rm(join(h.fixtures.dir, ghost), { force: true });
    }
  });
});
