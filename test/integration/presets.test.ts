// Named presets through a real proxy (#16 item 6): a signed URL naming a preset renders the same
// variant as the URL spelling its options out (one ETag, one cache key, real audio), an explicit
// option overrides the preset's, an unknown preset is a 422 before any work, and with
// AP_ONLY_PRESETS a URL spelling its own variant options is refused while a preset URL renders.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cacheKey } from '../../src/http/cacheKey.js';
import { get, type Harness, startHarness } from './harness.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ AP_PRESETS: 'preview=f:opus/br:48/t:0.5:1/ch:1, loud=gain:3' });
}, 60_000);
afterAll(() => h.close());

const SOURCE = 'plain/local://stereo.wav';
const etagOf = (normalized: string) => `"${cacheKey(normalized, 'local://stereo.wav')}"`;

describe('presets', () => {
  it('a preset URL renders its expansion: the same ETag as the options spelled out', async () => {
    const viaPreset = await get(h.url, `/insecure/pr:preview/${SOURCE}`);
    expect(viaPreset.status).toBe(200);
    expect(viaPreset.headers['content-type']).toBe('audio/ogg');
    expect(viaPreset.body.subarray(0, 4).toString('latin1')).toBe('OggS');
    const spelled = await get(h.url, `/insecure/ch:1/t:0.5:1/br:48/f:opus/${SOURCE}`, {
      method: 'HEAD',
    });
    expect(viaPreset.headers.etag).toBe(etagOf('br:48/ch:1/f:opus/t:0.5:1'));
    expect(spelled.headers.etag).toBe(viaPreset.headers.etag);
  });

  it('an explicit option overrides the preset, and presets combine', async () => {
    const r = await get(h.url, `/insecure/br:64/pr:preview:loud/${SOURCE}`, { method: 'HEAD' });
    expect(r.status).toBe(200);
    expect(r.headers.etag).toBe(etagOf('br:64/ch:1/f:opus/gain:3/t:0.5:1'));
  });

  it('an unknown preset is a 422', async () => {
    const r = await get(h.url, `/insecure/pr:nope/${SOURCE}`);
    expect(r.status).toBe(422);
    expect(JSON.parse(r.body.toString())).toEqual({
      error: 'invalid_options',
      message: '"pr:nope" names no preset "nope"',
    });
  });

  it('AP_ONLY_PRESETS: options spelled out are refused, a preset URL renders', async () => {
    h.config.set({ onlyPresets: true });
    try {
      const spelled = await get(h.url, `/insecure/f:opus/${SOURCE}`);
      expect(spelled.status).toBe(422);
      expect(JSON.parse(spelled.body.toString()).message).toContain('only presets');
      const preset = await get(h.url, `/insecure/pr:preview/exp:4000000000/${SOURCE}`);
      expect(preset.status).toBe(200);
      expect(preset.body.length).toBeGreaterThan(100);
    } finally {
      h.config.set({ onlyPresets: false });
    }
  });
});
