/** Helpers for the ownership and leak tests (issue 14, items 1 and 2). */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** A PCM WAV with `channels` channels of silence, `frames` frames at 8 kHz. */
export function wavWithChannels(channels: number, frames = 10): Buffer {
  const data = Buffer.alloc(channels * frames * 2);
  const h = Buffer.alloc(44);
  h.write('RIFF', 0);
  h.writeUInt32LE(36 + data.length, 4);
  h.write('WAVEfmt ', 8);
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(channels, 22);
  h.writeUInt32LE(8_000, 24);
  h.writeUInt32LE(8_000 * channels * 2, 28);
  h.writeUInt16LE(channels * 2, 32);
  h.writeUInt16LE(16, 34);
  h.write('data', 36);
  h.writeUInt32LE(data.length, 40);
  return Buffer.concat([h, data]);
}

/** `gc()` whether or not the process was started with --expose-gc (vitest's forks are not). */
export function exposeGc(): () => void {
  const own = (globalThis as { gc?: () => void }).gc;
  if (own) return own;
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}
