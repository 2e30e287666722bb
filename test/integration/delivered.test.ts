/**
 * "Delivered" means the client has the bytes (#16 item 5), through a real proxy: a client that
 * reads a render to its end is one `render delivered` line and one `success` in
 * `audio_proxy_renders_total`; one that leaves mid-stream is `cancelled`; and so is one that
 * stops reading and leaves after the render has finished and its last byte was written (the
 * bytes waiting in Node, the response never finished), which used to count as delivered.
 */
import { execFileSync } from 'node:child_process';
import { renameSync } from 'node:fs';
import { type IncomingMessage, request } from 'node:http';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveFfmpeg } from '../../src/workers/ffmpegPath.js';
import { get, type Harness, startHarness, waitFor } from './harness.js';

interface Line {
  readonly event?: string;
  readonly msg?: string;
  readonly outcome?: string;
  readonly bytes?: number;
}

const lines: Line[] = [];
const logger = pino(
  { level: 'info' },
  {
    write(line: string) {
      lines.push(JSON.parse(line) as Line);
    },
  },
);
const stops = () => lines.filter((l) => l.event === 'render.stop');

let h: Harness;
/** 120 s of stereo tone: as WAV, ~21 MB, far more than the kernel holds for a paused reader. */
const LONG = 'delivered-long.wav';

beforeAll(async () => {
  h = await startHarness({ AP_LOG_LEVEL: 'info', AP_ACCESS_LOG: '0' }, { logger });
  const target = join(h.fixtures.dir, LONG);
  const partial = `${target}.${process.pid}.tmp.wav`;
  execFileSync(resolveFfmpeg({ env: process.env }).path, [
    ...['-nostdin', '-loglevel', 'error', '-y', '-f', 'lavfi'],
    ...['-i', 'sine=frequency=330:sample_rate=44100:duration=120', '-ac', '2', partial],
  ]);
  renameSync(partial, target); // whole or not at all, for a concurrent run
}, 60_000);

afterAll(async () => {
  await h?.close();
});

async function renders(format: string, outcome: string): Promise<number> {
  const { body } = await h.proxy.metrics.expose();
  const m = new RegExp(
    `^audio_proxy_renders_total\\{format="${format}",outcome="${outcome}"\\} (\\d+)$`,
    'm',
  ).exec(body);
  return m ? Number(m[1]) : 0;
}

/** Opens `path`; resolves at the first body byte with the response and its connection's close. */
function firstByte(path: string) {
  const url = new URL(h.url);
  return new Promise<{ res: IncomingMessage; closed: Promise<void> }>((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path, agent: false }, (res) => {
      res.once('data', () => resolve({ res, closed }));
    });
    const closed = new Promise<void>((r) => req.once('close', () => r()));
    req.once('error', reject);
    req.end();
  });
}

describe('render delivered', () => {
  it('is logged and counted once when the client has read the whole response', async () => {
    const before = { success: await renders('mp3', 'success'), stops: stops().length };
    const res = await get(h.url, '/insecure/f:mp3/cb:delivered-1/plain/local://stereo.wav');
    expect(res.status).toBe(200);
    expect(res.complete).toBe(true);
    await waitFor(async () => (await renders('mp3', 'success')) === before.success + 1, 5_000);
    await new Promise((r) => setTimeout(r, 100)); // nothing more comes
    expect(await renders('mp3', 'success')).toBe(before.success + 1);
    const added = stops().slice(before.stops);
    expect(added).toEqual([
      expect.objectContaining({ outcome: 'ok', msg: 'render delivered', bytes: res.body.length }),
    ]);
  });

  it('is not what a client that leaves mid-stream is counted as: that is cancelled', async () => {
    const before = {
      success: await renders('mp3', 'success'),
      cancelled: await renders('mp3', 'cancelled'),
      stops: stops().length,
    };
    const { res, closed } = await firstByte(`/insecure/f:mp3/cb:delivered-2/plain/local://${LONG}`);
    res.destroy();
    await closed;
    await waitFor(async () => (await renders('mp3', 'cancelled')) === before.cancelled + 1, 10_000);
    expect(await renders('mp3', 'success')).toBe(before.success);
    expect(stops().slice(before.stops)).toEqual([
      expect.objectContaining({ outcome: 'cancelled', msg: 'render cancelled' }),
    ]);
  }, 30_000);

  it('waits for the response to finish: a reader gone after the last byte was written is cancelled', async () => {
    const before = {
      success: await renders('wav', 'success'),
      cancelled: await renders('wav', 'cancelled'),
      stops: stops().length,
    };
    const { res, closed } = await firstByte(`/insecure/f:wav/cb:delivered-3/plain/local://${LONG}`);
    res.pause(); // stop reading: the rest waits in the proxy's socket buffers
    // ffmpeg finishes and the delivery writes its last byte and ends the response...
    await waitFor(() => h.proxy.renders.live === 0, 20_000);
    await new Promise((r) => setTimeout(r, 200));
    // ...which is not delivered yet: nothing is logged or counted
    expect(stops().length).toBe(before.stops);
    expect(await renders('wav', 'success')).toBe(before.success);
    res.destroy();
    await closed;
    await waitFor(async () => (await renders('wav', 'cancelled')) === before.cancelled + 1, 10_000);
    expect(await renders('wav', 'success')).toBe(before.success);
    expect(stops().slice(before.stops)).toEqual([
      expect.objectContaining({ outcome: 'cancelled', msg: 'render cancelled' }),
    ]);
  }, 60_000);
});
