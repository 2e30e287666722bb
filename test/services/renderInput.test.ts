// The Render's input for a request: the argv names the inherited descriptor (never the source's
// path or URL), the deadline and niceness come from the config read now, the live view's label
// is the canonical source, peaks decode at the probed rate (or the fallback) with a frame budget
// from the probed duration, and a source with no opener is refused before anything is asked for.
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import type { RenderRequest } from '../../src/core/request.js';
import type { ResolvedSource } from '../../src/core/source.js';
import type { RenderOptions } from '../../src/core/variant.js';
import { parseOptions } from '../../src/http/options.js';
import {
  FD_INPUT,
  PEAKS_FALLBACK_RATE_HZ,
  renderInputFor,
} from '../../src/services/renderInput.js';
import { buildPeaksDecodeArgv, FD_INPUT_PATH } from '../../src/workers/argv.js';
import { peaksFrameBudget } from '../../src/workers/peaks.js';
import type { WorkerPool } from '../../src/workers/pool.js';

const config = loadConfig({
  AP_ALLOW_INSECURE: '1',
  AP_RENDER_TIMEOUT: '42',
  AP_FFMPEG_NICE: '7',
  AP_MAX_DURATION_S: '600',
});
const pool = { name: 'render' } as WorkerPool;
const open = async () => ({ ok: false, refusal: 'not_found' }) as const;

function opts(text: string): RenderOptions {
  const parsed = parseOptions(text);
  if (!parsed.ok) throw new Error(`fixture options invalid: ${text}`);
  return parsed.options;
}

function request(text: string, extra: Partial<RenderRequest> = {}): RenderRequest {
  const source: ResolvedSource = {
    source: { scheme: 'local', path: '/music/a.flac' },
    canonical: 'local:/music/a.flac',
    input: { url: '/music/a.flac', kind: 'local' },
    open,
  };
  return { key: 'k', options: opts(text), source, ...extra };
}

describe('renderInputFor', () => {
  it('builds an encode that reads fd 3, with the config deadline and niceness', () => {
    const input = renderInputFor(request('f:mp3'), config, '/usr/bin/ffmpeg', pool);
    expect(input.pool).toBe(pool);
    expect(input.source).toBe('local:/music/a.flac');
    expect(input.spec.executable).toBe('/usr/bin/ffmpeg');
    expect(input.spec.timeoutMs).toBe(42_000);
    expect(input.spec.nice).toBe(7);
    expect(input.spec.openInput).toBe(open);
    expect(input.spec.peaks).toBeUndefined();
    expect(input.spec.argv).toContain(`file:${FD_INPUT_PATH}`);
    expect(input.spec.argv.join(' ')).not.toContain('/music/a.flac');
    expect(FD_INPUT).toEqual({ url: FD_INPUT_PATH, kind: 'local' });
  });

  it('decodes peaks at the probed rate, with the frame budget of the probed duration', () => {
    const media = { sampleRate: 48_000, duration: 10 };
    const input = renderInputFor(request('f:peaks', { media }), config, 'ffmpeg', pool);
    expect(input.spec.peaks).toEqual({
      channels: 1,
      pts: 800,
      totalFrames: peaksFrameBudget(10, 48_000, undefined),
      sampleRate: 48_000,
      format: 'json',
    });
    expect(input.spec.argv).toEqual(
      buildPeaksDecodeArgv(
        opts('f:peaks'),
        { ...FD_INPUT, ...media, maxDurationS: 600 },
        { sampleRate: 48_000, channels: 1 },
      ),
    );
  });

  it('falls back to 44.1 kHz and a zero-length budget when the probe named neither', () => {
    const input = renderInputFor(request('f:peaks'), config, 'ffmpeg', pool);
    expect(PEAKS_FALLBACK_RATE_HZ).toBe(44_100);
    expect(input.spec.peaks?.sampleRate).toBe(PEAKS_FALLBACK_RATE_HZ);
    expect(input.spec.peaks?.totalFrames).toBe(peaksFrameBudget(0, PEAKS_FALLBACK_RATE_HZ));
  });

  it('refuses a source with no opener (a TypeError, before any slot is asked for)', () => {
    const r = request('f:mp3');
    const noOpener = { ...r, source: { ...r.source, open: undefined } };
    expect(() => renderInputFor(noOpener, config, 'ffmpeg', pool)).toThrow(TypeError);
  });
});
