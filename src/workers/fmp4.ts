/**
 * Shifts the decode times of a fragmented MP4 stream as it passes: every `tfdt` (track fragment
 * decode time) gets `shiftS` seconds added, in the track's own timescale (read from the `mdhd` in
 * the `moov`). An `f:hls` segment is rendered from its own window, so ffmpeg (5.1 ignores
 * `-output_ts_offset` for fragments) starts every segment's fragments at 0; HLS wants each
 * segment's media timestamps where the playlist places it (RFC 8216 §3.3, fMP4 segments), and
 * hls.js reads them. Nothing else changes: the same bytes, the same length.
 *
 * ## Invariants
 * - **Length-preserving**: what comes out is what went in, byte for byte, except the `tfdt`
 *   values; `end()` returns whatever a truncated stream left buffered, unchanged.
 * - **Bounded buffering**: only `moov` and `moof` boxes are held whole (a few hundred bytes each,
 *   refused past `MAX_HELD_BOX_BYTES`); `mdat` and every other box stream through.
 * - **Refuses what it does not understand** (a box size below its header, a 64-bit `tfdt` that
 *   would overflow, a held box past the bound): it throws `Fmp4Error`, and the render fails
 *   rather than serve wrong timestamps.
 *
 * ## Races
 * None: one instance per render, fed in order.
 *
 * ## Events
 * None.
 */

/** The largest `moov`/`moof` held whole: ffmpeg's audio boxes are under 2 KiB. */
export const MAX_HELD_BOX_BYTES = 1 << 20;

export class Fmp4Error extends Error {}

const HELD = new Set(['moov', 'moof']);
const CONTAINERS = new Set(['moov', 'trak', 'mdia', 'moof', 'traf']);

/** Children of `box` (its payload from `from` to `to`): type, start, size. */
function* children(box: Buffer, from: number, to: number) {
  let at = from;
  while (at + 8 <= to) {
    const size = box.readUInt32BE(at);
    const type = box.toString('latin1', at + 4, at + 8);
    if (size < 8 || at + size > to) throw new Fmp4Error(`bad ${type} box size ${size}`);
    yield { type, at, size };
    at += size;
  }
}

function find(box: Buffer, from: number, to: number, type: string, out: number[]): void {
  for (const c of children(box, from, to)) {
    if (c.type === type) out.push(c.at);
    else if (CONTAINERS.has(c.type)) find(box, c.at + 8, c.at + c.size, type, out);
  }
}

export class Fmp4DecodeTimeShift {
  readonly #shiftS: number;
  #timescale: number | undefined;
  /** The current top-level box's header bytes, until 8 are in. */
  #header = Buffer.alloc(0);
  /** A held box being gathered, or the passthrough bytes left of the current box. */
  #held: Buffer[] = [];
  #heldBytes = 0;
  #boxSize = 0;
  #passLeft = 0;
  #holding = false;

  constructor(shiftS: number) {
    if (!(Number.isFinite(shiftS) && shiftS >= 0)) {
      throw new RangeError(`shiftS must be a non-negative number, got ${shiftS}`);
    }
    this.#shiftS = shiftS;
  }

  /** The bytes ready to go on (possibly none yet). */
  push(chunk: Buffer): Buffer {
    const out: Buffer[] = [];
    let at = 0;
    while (at < chunk.length) {
      if (this.#passLeft > 0) {
        const n = Math.min(this.#passLeft, chunk.length - at);
        out.push(chunk.subarray(at, at + n));
        this.#passLeft -= n;
        at += n;
        continue;
      }
      if (this.#holding) {
        const n = Math.min(this.#boxSize - this.#heldBytes, chunk.length - at);
        this.#held.push(chunk.subarray(at, at + n));
        this.#heldBytes += n;
        at += n;
        if (this.#heldBytes === this.#boxSize) {
          out.push(this.#patch(Buffer.concat(this.#held)));
          this.#held = [];
          this.#heldBytes = 0;
          this.#holding = false;
        }
        continue;
      }
      const need = 8 - this.#header.length;
      const take = chunk.subarray(at, at + need);
      this.#header = Buffer.concat([this.#header, take]);
      at += take.length;
      if (this.#header.length < 8) continue;
      const size = this.#header.readUInt32BE(0);
      const type = this.#header.toString('latin1', 4, 8);
      if (size < 8) throw new Fmp4Error(`top-level ${type} box of size ${size} is not supported`);
      if (HELD.has(type)) {
        if (size > MAX_HELD_BOX_BYTES) throw new Fmp4Error(`${type} box of ${size} bytes`);
        this.#holding = true;
        this.#boxSize = size;
        this.#held = [this.#header];
        this.#heldBytes = 8;
      } else {
        out.push(this.#header);
        this.#passLeft = size - 8;
      }
      this.#header = Buffer.alloc(0);
    }
    return out.length === 1 ? out[0]! : Buffer.concat(out);
  }

  /** What a stream cut short left buffered, unchanged. */
  end(): Buffer {
    const rest = Buffer.concat([this.#header, ...this.#held]);
    this.#header = Buffer.alloc(0);
    this.#held = [];
    return rest;
  }

  #patch(box: Buffer): Buffer {
    const type = box.toString('latin1', 4, 8);
    if (type === 'moov') {
      const mdhd: number[] = [];
      find(box, 8, box.length, 'mdhd', mdhd);
      if (mdhd.length > 0) {
        const m = mdhd[0]!;
        const version = box[m + 8];
        this.#timescale = box.readUInt32BE(m + (version === 1 ? 28 : 20));
      }
      return box;
    }
    if (this.#shiftS === 0) return box;
    if (this.#timescale === undefined) throw new Fmp4Error('a moof before any moov');
    const shift = BigInt(Math.round(this.#shiftS * this.#timescale));
    const tfdts: number[] = [];
    find(box, 8, box.length, 'tfdt', tfdts);
    for (const t of tfdts) {
      if (box[t + 8] === 1) {
        const value = box.readBigUInt64BE(t + 12) + shift;
        if (value >= 1n << 64n) throw new Fmp4Error('tfdt overflows');
        box.writeBigUInt64BE(value, t + 12);
      } else {
        const value = BigInt(box.readUInt32BE(t + 12)) + shift;
        if (value >= 1n << 32n) throw new Fmp4Error('a 32-bit tfdt overflows');
        box.writeUInt32BE(Number(value), t + 12);
      }
    }
    return box;
  }
}
