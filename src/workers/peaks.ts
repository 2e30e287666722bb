/**
 * Waveform peaks: interleaved s16le PCM in, audiowaveform's v2 JSON or binary `dat` out.
 *
 * ffmpeg decodes, trims, processes and downmixes (see `buildPeaksDecodeArgv`); this module does
 * the arithmetic, streaming: `push` folds each chunk into `pts` min/max pairs per channel and
 * drops it, so a long source costs the pixels, never the PCM. Bucket boundaries must be known
 * before the first sample, so the reducer is built from the frame count the probe predicts
 * (`peaksFrameBudget`): `samples_per_pixel = max(ceil(frames / pts), 1)`.
 *
 * ## Invariants
 * - **Memory is O(pts × channels)**: the output pairs, one open pixel, and at most one partial
 *   frame carried between chunks. (A chunk that starts on an odd byte is copied once, transiently;
 *   aligned chunks on a little-endian host are read in place.)
 * - **Chunking is invisible.** A chunk may end mid-sample or mid-frame; the remainder is carried,
 *   so any split of the same PCM reduces to the same bytes.
 * - **`length` is always `pts`**, whatever the decoder produced. More frames than predicted fold
 *   into the last pixel (which never closes on width); fewer leave trailing pixels at `0, 0`,
 *   which is what audiowaveform writes for "no samples here". A partial frame left at the end
 *   (the decoder stopped mid-sample) is discarded, not read as a sample.
 * - **One reduction, one result**: `push` after `finish` is a programmer error.
 *
 * ## Races
 * None: single-owner and synchronous; it runs in the worker thread that owns the decode.
 *
 * ## Events
 * None. The output is one buffer; the owner sends it as the render's only chunk.
 */

/** audiowaveform's data format version: v2 is v1 plus the channel count. */
export const PEAKS_VERSION = 2;
/** Every sample is 16-bit; the 8-bit mode would be a second key for a coarser picture. */
export const PEAKS_BITS = 16;
/** The dat header: six little-endian 32-bit fields. */
export const DAT_HEADER_BYTES = 24;
const DAT_FLAGS_16_BIT = 0; // flag bit 0 clear: int16 samples

const BYTES_PER_SAMPLE = 2;
const LITTLE_ENDIAN_HOST = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
const EMPTY_MIN = 32_767; // sentinels at the far end of each bound: the first sample replaces both
const EMPTY_MAX = -32_768;

export interface PeaksReducerOptions {
  /** 1 or 2, matching the decode's `-ac`. */
  readonly channels: 1 | 2;
  /** Pixels (min/max pairs per channel) to produce. */
  readonly pts: number;
  /** Frames (one sample per channel) the decode is expected to produce. */
  readonly totalFrames: number;
}

/** The finished reduction, keyed as audiowaveform's JSON is. */
export interface PeaksData {
  readonly version: 2;
  readonly channels: 1 | 2;
  readonly sample_rate: number;
  readonly samples_per_pixel: number;
  readonly bits: 16;
  readonly length: number;
  /** `length × 2 × channels` values: per pixel, per channel, min then max. */
  readonly data: Int16Array;
}

export type PeaksOutput = { readonly json: Buffer } | { readonly dat: Buffer };

export class PeaksReducer {
  readonly channels: 1 | 2;
  readonly pts: number;
  readonly samplesPerPixel: number;
  readonly #data: Int16Array;
  readonly #min: Int32Array;
  readonly #max: Int32Array;
  readonly #carry: Uint8Array;
  #carryLength = 0;
  #pixel = 0;
  #left: number;
  #open = false;
  #frames = 0;
  #finished = false;

  constructor(options: PeaksReducerOptions) {
    const { channels, pts, totalFrames } = options;
    if (channels !== 1 && channels !== 2) {
      throw new RangeError(`channels must be 1 or 2, got ${channels}`);
    }
    if (!Number.isInteger(pts) || pts < 1) {
      throw new RangeError(`pts must be a positive integer, got ${pts}`);
    }
    if (!Number.isSafeInteger(totalFrames) || totalFrames < 0) {
      throw new RangeError(`totalFrames must be a non-negative integer, got ${totalFrames}`);
    }
    this.channels = channels;
    this.pts = pts;
    this.samplesPerPixel = Math.max(Math.ceil(totalFrames / pts), 1);
    this.#data = new Int16Array(pts * 2 * channels);
    this.#min = new Int32Array(channels).fill(EMPTY_MIN);
    this.#max = new Int32Array(channels).fill(EMPTY_MAX);
    this.#carry = new Uint8Array(channels * BYTES_PER_SAMPLE);
    this.#left = this.samplesPerPixel;
  }

  /** Whole frames consumed so far (a carried partial frame is not counted). */
  get framesSeen(): number {
    return this.#frames;
  }

  /** Folds a chunk of interleaved s16le PCM into the reduction. */
  push(pcm: Uint8Array): void {
    if (this.#finished) throw new TypeError('PeaksReducer.push after finish');
    const frameBytes = this.#carry.byteLength;
    let offset = 0;
    if (this.#carryLength > 0) {
      const take = Math.min(frameBytes - this.#carryLength, pcm.byteLength);
      this.#carry.set(pcm.subarray(0, take), this.#carryLength);
      this.#carryLength += take;
      offset = take;
      if (this.#carryLength < frameBytes) return;
      this.#consume(this.#carry, 0, 1);
      this.#carryLength = 0;
    }
    const whole = Math.floor((pcm.byteLength - offset) / frameBytes);
    if (whole > 0) this.#consume(pcm, offset, whole);
    const rest = offset + whole * frameBytes;
    if (rest < pcm.byteLength) {
      this.#carry.set(pcm.subarray(rest), 0);
      this.#carryLength = pcm.byteLength - rest;
    }
  }

  /** Closes the reduction (idempotent) and returns it; the open pixel is closed if reached. */
  result(sampleRate: number): PeaksData {
    if (!Number.isInteger(sampleRate) || sampleRate < 1) {
      throw new RangeError(`sampleRate must be a positive integer, got ${sampleRate}`);
    }
    if (!this.#finished) {
      this.#finished = true;
      this.#carryLength = 0; // a partial final frame is not a sample
      if (this.#open) this.#close();
    }
    return {
      version: PEAKS_VERSION,
      channels: this.channels,
      sample_rate: sampleRate,
      samples_per_pixel: this.samplesPerPixel,
      bits: PEAKS_BITS,
      length: this.pts,
      data: this.#data,
    };
  }

  /** Closes the reduction and serialises it in the requested format (default json). */
  finish(options: { sampleRate: number; format?: 'json' | 'dat' }): PeaksOutput {
    const data = this.result(options.sampleRate);
    return (options.format ?? 'json') === 'dat' ? { dat: toDat(data) } : { json: toJson(data) };
  }

  #consume(bytes: Uint8Array, offset: number, frames: number): void {
    const start = bytes.byteOffset + offset;
    const count = frames * this.channels;
    // Aligned input on a little-endian host is read in place; anything else is copied once.
    const samples =
      LITTLE_ENDIAN_HOST && start % BYTES_PER_SAMPLE === 0
        ? new Int16Array(bytes.buffer, start, count)
        : littleEndianSamples(bytes, offset, count);
    const channels = this.channels;
    const last = this.pts - 1;
    const min = this.#min;
    const max = this.#max;
    let at = 0;
    let frame = 0;
    while (frame < frames) {
      // Frames this pixel can still take before it closes; the last pixel takes all the rest.
      const run = this.#pixel < last ? Math.min(this.#left, frames - frame) : frames - frame;
      for (let channel = 0; channel < channels; channel++) {
        let lo = min[channel]!;
        let hi = max[channel]!;
        for (let i = at + channel, end = at + run * channels; i < end; i += channels) {
          const sample = samples[i]!;
          if (sample < lo) lo = sample;
          if (sample > hi) hi = sample;
        }
        min[channel] = lo;
        max[channel] = hi;
      }
      at += run * channels;
      frame += run;
      this.#open = true;
      this.#left -= run;
      if (this.#left <= 0 && this.#pixel < last) this.#close();
    }
    this.#frames += frames;
  }

  #close(): void {
    const base = this.#pixel * 2 * this.channels;
    for (let channel = 0; channel < this.channels; channel++) {
      this.#data[base + channel * 2] = this.#min[channel]!;
      this.#data[base + channel * 2 + 1] = this.#max[channel]!;
    }
    this.#min.fill(EMPTY_MIN);
    this.#max.fill(EMPTY_MAX);
    this.#open = false;
    if (this.#pixel < this.pts - 1) {
      this.#pixel += 1;
      this.#left = this.samplesPerPixel;
    }
  }
}

/** audiowaveform's JSON, keys in its order. */
export function toJson(peaks: PeaksData): Buffer {
  const headerJson = JSON.stringify({
    version: peaks.version,
    channels: peaks.channels,
    sample_rate: peaks.sample_rate,
    samples_per_pixel: peaks.samples_per_pixel,
    bits: peaks.bits,
    length: peaks.length,
  });
  return Buffer.from(`${headerJson.slice(0, -1)},"data":[${peaks.data.join(',')}]}`, 'utf8');
}

/** audiowaveform's binary format: the 24-byte little-endian v2 header, then int16 values. */
export function toDat(peaks: PeaksData): Buffer {
  const out = Buffer.alloc(DAT_HEADER_BYTES + peaks.data.length * BYTES_PER_SAMPLE);
  out.writeInt32LE(peaks.version, 0);
  out.writeUInt32LE(DAT_FLAGS_16_BIT, 4);
  out.writeInt32LE(peaks.sample_rate, 8);
  out.writeInt32LE(peaks.samples_per_pixel, 12);
  out.writeUInt32LE(peaks.length, 16);
  out.writeInt32LE(peaks.channels, 20);
  for (let i = 0; i < peaks.data.length; i++) {
    out.writeInt16LE(peaks.data[i]!, DAT_HEADER_BYTES + i * BYTES_PER_SAMPLE);
  }
  return out;
}

/**
 * Frames the decode of the trimmed region should produce: the probed duration narrowed by the
 * trim (a trim past the end yields what is left, as ffmpeg does), times the decode's rate.
 */
export function peaksFrameBudget(
  durationS: number,
  sampleRate: number,
  trim?: { readonly start: number; readonly duration?: number },
): number {
  if (!Number.isFinite(durationS) || durationS < 0) {
    throw new RangeError(`durationS must be a finite non-negative number, got ${durationS}`);
  }
  if (!Number.isInteger(sampleRate) || sampleRate < 1) {
    throw new RangeError(`sampleRate must be a positive integer, got ${sampleRate}`);
  }
  const remaining = Math.max(durationS - (trim?.start ?? 0), 0);
  const region = trim?.duration === undefined ? remaining : Math.min(trim.duration, remaining);
  return Math.round(region * sampleRate);
}

/** `count` s16le samples from `bytes[offset…]`, for unaligned input or a big-endian host. */
function littleEndianSamples(bytes: Uint8Array, offset: number, count: number): Int16Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset + offset, count * BYTES_PER_SAMPLE);
  const out = new Int16Array(count);
  for (let i = 0; i < count; i++) out[i] = view.getInt16(i * BYTES_PER_SAMPLE, true);
  return out;
}
