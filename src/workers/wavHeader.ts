/**
 * The 44-byte RIFF/WAVE header the proxy writes in front of an exact WAV render's PCM
 * (`exactWavLayout` in `argv.ts`): ffmpeg writing to a pipe cannot go back to fill in the sizes,
 * so its own header says "unknown" (0xFFFFFFFF); this one is right from the first byte, which is
 * what lets a MISS announce `Content-Length`, answer ranges, and stream exactly the bytes the
 * store will keep.
 *
 * ## Invariants
 * - **Canonical layout**: `RIFF` size `WAVE`, a 16-byte `fmt ` chunk (format tag 1, PCM, or 3,
 *   IEEE float for `bd:32f`), then `data` and its size; little-endian throughout.
 * - **Sizes agree with the layout**: `RIFF` size = total − 8, `data` size = samples × block align.
 *
 * ## Races
 * None: a pure function.
 *
 * ## Events
 * None.
 */
import { type ExactWavLayout, WAV_HEADER_BYTES } from './argv.js';

const FORMAT_PCM = 1;
const FORMAT_IEEE_FLOAT = 3;

/** The header of `layout`: `WAV_HEADER_BYTES` bytes. */
export function wavHeader(layout: ExactWavLayout): Buffer {
  const blockAlign = layout.channels * (layout.bits / 8);
  const dataBytes = layout.samples * blockAlign;
  if (WAV_HEADER_BYTES + dataBytes !== layout.totalBytes) {
    throw new RangeError('wavHeader: totalBytes disagrees with the layout');
  }
  const h = Buffer.alloc(WAV_HEADER_BYTES);
  h.write('RIFF', 0, 'latin1');
  h.writeUInt32LE(layout.totalBytes - 8, 4);
  h.write('WAVE', 8, 'latin1');
  h.write('fmt ', 12, 'latin1');
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(layout.float ? FORMAT_IEEE_FLOAT : FORMAT_PCM, 20);
  h.writeUInt16LE(layout.channels, 22);
  h.writeUInt32LE(layout.sampleRate, 24);
  h.writeUInt32LE(layout.sampleRate * blockAlign, 28);
  h.writeUInt16LE(blockAlign, 32);
  h.writeUInt16LE(layout.bits, 34);
  h.write('data', 36, 'latin1');
  h.writeUInt32LE(dataBytes, 40);
  return h;
}
