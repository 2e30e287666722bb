/**
 * The demo prints only URLs its ffmpeg can render: with a complete ffmpeg every URL, on the npm
 * fallback the voice-enhanced MP3 gives way to its loudness-normalised stand-in, and with an
 * ffmpeg that lacks even that, the entry is left out. Without capabilities the list is whole.
 */
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { demoUrls } from '../src/demo.js';
import { EncoderCapabilities, readCapabilities } from '../src/workers/capabilities.js';

const require = createRequire(import.meta.url);
const NPM_FFMPEG = (require('@ffmpeg-installer/ffmpeg') as { path: string }).path;
const BASE = 'http://127.0.0.1:4000';

describe('demoUrls', () => {
  it('lists every URL for a complete ffmpeg, and without capabilities', async () => {
    const all = demoUrls(BASE);
    expect(all).toHaveLength(4);
    expect(all.some((u) => u.url.includes('/enhance:voice/'))).toBe(true);
    const system = new EncoderCapabilities(await readCapabilities('/usr/bin/ffmpeg'));
    expect(demoUrls(BASE, system)).toEqual(all);
  });

  it('swaps in the stand-in on the npm fallback, and leaves out what nothing can replace', async () => {
    const read = await readCapabilities(NPM_FFMPEG);
    const npm = new EncoderCapabilities(read);
    const urls = demoUrls(BASE, npm);
    expect(urls.map((u) => u.label)).toEqual([
      '30 s Opus preview',
      'mono speech MP3 (64 kbps, loudness-normalised)',
      'waveform peaks (JSON)',
      'source info',
    ]);
    expect(urls[1]!.url).toBe(
      `${BASE}/insecure/f:mp3/ch:1/br:64/norm:ebu/plain/local://speech.wav`,
    );
    if (!read.ok) throw new Error(read.reason);
    const filters = new Set(read.listing.filters);
    filters.delete('loudnorm');
    const poorer = new EncoderCapabilities({ ok: true, listing: { ...read.listing, filters } });
    expect(demoUrls(BASE, poorer).map((u) => u.label)).toEqual([
      '30 s Opus preview',
      'waveform peaks (JSON)',
      'source info',
    ]);
  });
});
