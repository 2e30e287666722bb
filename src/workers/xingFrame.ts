/**
 * The mp3 info frame (Xing/Info with a LAME tag) that a seekable encode writes in front of the
 * audio, and that ffmpeg writing to a pipe cannot: its muxer fills the frame count, the byte
 * count and the seek table (TOC) in at the end, by seeking back, which a pipe does not allow.
 *
 * The proxy writes it in two steps, so that a streamed MISS and the stored variant have the
 * same length and the same bytes everywhere but inside this one frame:
 * 1. **In the stream** (the worker, `splitForInfoFrame` + `infoFramePlaceholder`): after
 *    ffmpeg's ID3v2 tag, before the first audio frame, a frame of the first frame's kind
 *    (version, rate, channel mode) carrying a `Xing` tag with no fields (flags 0: count, size
 *    and TOC unknown) and a LAME tag with the encoder delay. Its size is fixed here, from the
 *    first audio frame's header alone.
 * 2. **At commit** (the tee, `Mp3Indexer`): the tee counts the audio frames and their offsets as
 *    the bytes pass, and `finish` returns the complete frame (same size, same place): `Info`
 *    (every frame at one bitrate) or `Xing`, frames, bytes, a 100-entry TOC, and the LAME tag
 *    with its CRC. The store writes it over the placeholder before it commits.
 *
 * ## Invariants
 * - **Same size, same place**: the complete frame is exactly the placeholder's length and
 *   offset, so every other byte of the stored variant is the streamed byte at that offset.
 * - **Layout as ffmpeg's mp3 muxer writes it** (`libavformat/mp3enc.c`): side information
 *   zeroed, the tag at 4 + side-info bytes, frames excluding the info frame, bytes from the info
 *   frame's first byte to the end, `toc[i] = 256 * offset(frame i% into the stream) / bytes`.
 * - **Encoder delay 576** (LAME's, which `libmp3lame` reports), end padding 0 (not known: the
 *   proxy does not know the exact sample count of an mp3 render); the music CRC is 0 ("not
 *   computed"). Decoders that honour the tag skip the delay (gapless start).
 * - **Never a corrupt stream**: input that is not a clean run of Layer III frames (a lost sync,
 *   a trailing tag) leaves the placeholder as it is (`finish` answers `undefined`); the variant
 *   is then stored as streamed, which decodes as before.
 *
 * ## Races
 * None: pure functions and a synchronous parser.
 *
 * ## Events
 * None.
 */

/** A Layer III frame header, decoded. */
export interface Mp3FrameHeader {
  /** 1 (MPEG-1), 2 (MPEG-2) or 2.5. */
  readonly version: 1 | 2 | 2.5;
  readonly bitrateIndex: number;
  readonly sampleRate: number;
  /** 3: mono. */
  readonly channelMode: number;
  /** Bytes, padding included. */
  readonly length: number;
  /** 1152 (MPEG-1) or 576. */
  readonly samplesPerFrame: number;
}

const BITRATES_V1 = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320];
const BITRATES_V2 = [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160];
const RATES_V1 = [44100, 48000, 32000];

/** LAME's encoder delay in samples (`lame_get_encoder_delay`), what `libmp3lame` reports. */
export const LAME_ENCODER_DELAY = 576;
const TOC_ENTRIES = 100;
const FLAG_FRAMES = 1;
const FLAG_BYTES = 2;
const FLAG_TOC = 4;
const FLAG_QUALITY = 8;
/** `Xing` + flags + frames + bytes + TOC + quality. */
const XING_FULL_BYTES = 4 + 4 + 4 + 4 + TOC_ENTRIES + 4;
/** The LAME tag: version string (9) and 27 bytes of fields, the last two its CRC. */
const LAME_TAG_BYTES = 36;
/** The tag's CRC covers the frame's first 190 bytes (as LAME and ffmpeg compute it). */
const LAME_CRC_SPAN = 190;
const LAME_VERSION = 'Lavc';

/** Decodes the 4-byte header at `at`, or `undefined` when it is not a Layer III frame header. */
export function parseMp3Header(bytes: Uint8Array, at = 0): Mp3FrameHeader | undefined {
  if (at + 4 > bytes.length) return undefined;
  const b1 = bytes[at + 1]!;
  const b2 = bytes[at + 2]!;
  if (bytes[at] !== 0xff || (b1 & 0xe0) !== 0xe0) return undefined;
  const versionBits = (b1 >> 3) & 3;
  if (versionBits === 1 || ((b1 >> 1) & 3) !== 1) return undefined; // reserved, or not Layer III
  const version = versionBits === 3 ? 1 : versionBits === 2 ? 2 : 2.5;
  const bitrateIndex = b2 >> 4;
  const rateIndex = (b2 >> 2) & 3;
  if (bitrateIndex === 0 || bitrateIndex === 15 || rateIndex === 3) return undefined;
  const sampleRate = RATES_V1[rateIndex]! / (version === 1 ? 1 : version === 2 ? 2 : 4);
  const padding = (b2 >> 1) & 1;
  const kbps = (version === 1 ? BITRATES_V1 : BITRATES_V2)[bitrateIndex]!;
  const length = frameLength(version, kbps, sampleRate) + padding;
  return {
    version,
    bitrateIndex,
    sampleRate,
    channelMode: bytes[at + 3]! >> 6,
    length,
    samplesPerFrame: version === 1 ? 1152 : 576,
  };
}

function frameLength(version: 1 | 2 | 2.5, kbps: number, sampleRate: number): number {
  return Math.floor(((version === 1 ? 144_000 : 72_000) * kbps) / sampleRate);
}

function sideInfoBytes(h: Pick<Mp3FrameHeader, 'version' | 'channelMode'>): number {
  const mono = h.channelMode === 3;
  if (h.version === 1) return mono ? 17 : 32;
  return mono ? 9 : 17;
}

/**
 * Where an info frame goes in a stream that begins with `head`: after the ID3v2 tag, before the
 * first frame. `more` while `head` is too short to tell; `none` for a stream that does not open
 * with a Layer III frame there (the info frame is then left out).
 */
export function splitForInfoFrame(
  head: Uint8Array,
): { readonly offset: number; readonly first: Mp3FrameHeader } | 'more' | 'none' {
  let offset = 0;
  if (head.length < 3) return 'more';
  if (head[0] === 0x49 && head[1] === 0x44 && head[2] === 0x33) {
    if (head.length < 10) return 'more';
    const size = (head[6]! << 21) | (head[7]! << 14) | (head[8]! << 7) | head[9]!;
    if ((head[6]! | head[7]! | head[8]! | head[9]!) & 0x80) return 'none';
    offset = 10 + size + (head[5]! & 0x10 ? 10 : 0);
  }
  if (head.length < offset + 4) return 'more';
  const first = parseMp3Header(head, offset);
  return first === undefined ? 'none' : { offset, first };
}

/**
 * The info frame's header: the first frame's version, rate and channel mode, at the smallest
 * bitrate whose frame holds the tags (as ffmpeg's muxer sizes it for VBR: 208 bytes for
 * MPEG-1 at 44.1 kHz), so its size does not depend on the first frame's bitrate.
 */
function infoHeader(first: Mp3FrameHeader): { header: Uint8Array; length: number } {
  const needed = 4 + sideInfoBytes(first) + XING_FULL_BYTES + LAME_TAG_BYTES;
  const table = first.version === 1 ? BITRATES_V1 : BITRATES_V2;
  let index = 1;
  while (index < 14 && frameLength(first.version, table[index]!, first.sampleRate) < needed) {
    index++;
  }
  const versionBits = first.version === 1 ? 3 : first.version === 2 ? 2 : 0;
  const rateIndex = RATES_V1.indexOf(
    first.sampleRate * (first.version === 1 ? 1 : first.version === 2 ? 2 : 4),
  );
  const header = new Uint8Array([
    0xff,
    0xe0 | (versionBits << 3) | (1 << 1) | 1, // Layer III, no CRC
    (index << 4) | (rateIndex << 2), // no padding, private bit 0
    first.channelMode << 6, // mode extension, copyright, original, emphasis: 0
  ]);
  return { header, length: frameLength(first.version, table[index]!, first.sampleRate) };
}

/** What the stream carries before the commit: the frame with its tag's fields unknown. */
export function infoFramePlaceholder(first: Mp3FrameHeader): Uint8Array {
  const { header, length } = infoHeader(first);
  const frame = new Uint8Array(length);
  frame.set(header, 0);
  const at = 4 + sideInfoBytes(first);
  frame.set(ascii('Xing'), at);
  // flags 0: no count, size, TOC or quality; the LAME tag follows at once.
  writeLameTag(frame, at + 8, 0);
  return frame;
}

/** The complete frame, as a seekable encode writes it. */
export function infoFrame(
  first: Mp3FrameHeader,
  frames: number,
  bytes: number,
  toc: Uint8Array,
  cbr: boolean,
): Uint8Array {
  const { header, length } = infoHeader(first);
  const frame = new Uint8Array(length);
  frame.set(header, 0);
  const at = 4 + sideInfoBytes(first);
  const view = new DataView(frame.buffer);
  frame.set(ascii(cbr ? 'Info' : 'Xing'), at);
  view.setUint32(at + 4, FLAG_FRAMES | FLAG_BYTES | FLAG_TOC | FLAG_QUALITY);
  view.setUint32(at + 8, frames);
  view.setUint32(at + 12, bytes);
  frame.set(toc.subarray(0, TOC_ENTRIES), at + 16);
  // quality (at + 116): 0, as ffmpeg writes it.
  writeLameTag(frame, at + XING_FULL_BYTES, bytes);
  return frame;
}

function writeLameTag(frame: Uint8Array, at: number, musicBytes: number): void {
  frame.set(ascii(LAME_VERSION), at);
  // at+9 revision/VBR method, +10 lowpass, +11..18 ReplayGain, +19 flags, +20 bitrate: 0.
  const delay = LAME_ENCODER_DELAY;
  frame[at + 21] = delay >> 4;
  frame[at + 22] = (delay & 0x0f) << 4; // end padding 0 (unknown)
  frame[at + 23] = 0;
  // +24 misc, +25 mp3 gain, +26..27 preset: 0.
  new DataView(frame.buffer).setUint32(at + 28, musicBytes);
  // +32..33 music CRC: 0 (not computed). +34..35 the tag CRC over the frame's first 190 bytes.
  const crc = crc16(frame.subarray(0, LAME_CRC_SPAN));
  frame[at + 34] = crc >> 8;
  frame[at + 35] = crc & 0xff;
}

function ascii(text: string): Uint8Array {
  return Uint8Array.from(text, (c) => c.charCodeAt(0));
}

/** CRC-16/ARC (polynomial 0x8005 reflected, initial 0): LAME's tag CRC. */
const CRC_TABLE = (() => {
  const table = new Uint16Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0xa001 : c >>> 1;
    table[n] = c;
  }
  return table;
})();

export function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) crc = (crc >>> 8) ^ CRC_TABLE[(crc ^ byte) & 0xff]!;
  return crc;
}

/**
 * Follows a streamed mp3 (as the worker emitted it: ID3v2, the placeholder, the audio frames)
 * and builds its complete info frame at the end. Feed every chunk in order to `push`.
 */
export class Mp3Indexer {
  #head: Uint8Array[] = [];
  #headBytes = 0;
  /** Stream offset of the placeholder, once found; -1 while looking; -2 gave up. */
  #infoAt = -1;
  #first: Mp3FrameHeader | undefined;
  #infoLength = 0;
  /** Stream offset of the next frame header. */
  #next = 0;
  /** Stream offset of the end of what was pushed. */
  #seen = 0;
  /** Up to 4 bytes of a header split across chunks. */
  #partial = new Uint8Array(4);
  #partialBytes = 0;
  /** Offsets of the audio frames, from the info frame's first byte. */
  #offsets: number[] = [];
  #bitrates = new Set<number>();

  push(chunk: Uint8Array): void {
    const start = this.#seen;
    this.#seen += chunk.length;
    if (this.#infoAt === -2) return;
    if (this.#infoAt === -1) {
      this.#head.push(chunk);
      this.#headBytes += chunk.length;
      const head = Buffer.concat(this.#head, this.#headBytes);
      const split = splitForInfoFrame(head);
      if (split === 'more') return;
      const expected = split === 'none' ? undefined : infoFramePlaceholder(split.first);
      if (split !== 'none' && head.length < split.offset + expected!.length) return;
      this.#head = [];
      if (split === 'none' || !isPlaceholder(head, split.offset, expected!)) {
        this.#infoAt = -2;
        return;
      }
      this.#infoAt = split.offset;
      this.#first = split.first;
      this.#infoLength = expected!.length;
      this.#next = split.offset + expected!.length;
      this.#scan(head, 0);
      return;
    }
    this.#scan(chunk, start);
  }

  /** Walks the frame headers that start inside `chunk` (which begins at stream offset `start`). */
  #scan(chunk: Uint8Array, start: number): void {
    const end = start + chunk.length;
    while (this.#next < end && this.#infoAt >= 0) {
      const need = 4 - this.#partialBytes;
      const from = Math.max(this.#next + this.#partialBytes, start) - start;
      const take = Math.min(need, chunk.length - from);
      this.#partial.set(chunk.subarray(from, from + take), this.#partialBytes);
      this.#partialBytes += take;
      if (this.#partialBytes < 4) return;
      this.#partialBytes = 0;
      const h = parseMp3Header(this.#partial);
      const first = this.#first!;
      if (
        h === undefined ||
        h.version !== first.version ||
        h.sampleRate !== first.sampleRate ||
        this.#offsets.length >= 0xffff_ffff
      ) {
        this.#infoAt = -2; // lost sync (or a trailing tag): leave the placeholder
        return;
      }
      this.#offsets.push(this.#next - this.#infoAt);
      this.#bitrates.add(h.bitrateIndex);
      this.#next += h.length;
    }
  }

  /**
   * The complete info frame and where it goes, or `undefined` when the stream was not a clean
   * run of frames behind a placeholder (then the bytes are kept as streamed).
   */
  finish(): { readonly offset: number; readonly data: Uint8Array } | undefined {
    if (this.#infoAt < 0 || this.#first === undefined) return undefined;
    // The last frame must end exactly at the end of the stream.
    if (this.#next !== this.#seen || this.#partialBytes !== 0) return undefined;
    const bytes = this.#seen - this.#infoAt;
    if (bytes > 0xffff_ffff) return undefined;
    const frames = this.#offsets.length;
    const toc = new Uint8Array(TOC_ENTRIES);
    for (let i = 1; i < TOC_ENTRIES && frames > 0; i++) {
      const offset = this.#offsets[Math.floor((i * frames) / TOC_ENTRIES)]!;
      toc[i] = Math.min(255, Math.floor((256 * offset) / bytes));
    }
    const data = infoFrame(this.#first, frames, bytes, toc, this.#bitrates.size <= 1);
    if (data.length !== this.#infoLength) return undefined;
    return { offset: this.#infoAt, data };
  }
}

function isPlaceholder(head: Uint8Array, offset: number, expected: Uint8Array): boolean {
  for (let i = 0; i < expected.length; i++) if (head[offset + i] !== expected[i]) return false;
  return true;
}
