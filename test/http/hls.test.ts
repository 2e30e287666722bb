// The f:hls playlist writer and the part argv, as pure functions: durations from the probe and
// the trim, relative part URIs that resolve to the signed part under any mount prefix (and keep
// `exp`, presets and escapes byte for byte), the segment bound, and each part's ffmpeg window
// (pre-roll, no `-ss 0`, the init's `-frames:a 0`, flac's `-strict -2`). Milliseconds to run.
import { describe, expect, it } from 'vitest';
import type { RenderOptions } from '../../src/core/variant.js';
import {
  type PlaylistInput,
  PlaylistTooLong,
  partUri,
  segmentDurations,
  writePlaylist,
} from '../../src/http/hls.js';
import { normalizeOptions, parseOptions } from '../../src/http/options.js';
import { MAX_HLS_SEGMENTS } from '../../src/http/optionTable.js';
import { sign, verifySignature } from '../../src/http/signature.js';
import { ARGV_FLAGS, buildRenderArgv, HLS_PREROLL_S } from '../../src/workers/argv.js';

const KEY = new Uint8Array(32).fill(7);
const SALT = new Uint8Array(16).fill(9);

function options(text: string): RenderOptions {
  const parsed = parseOptions(text);
  if (!parsed.ok) throw new Error(parsed.message);
  return parsed.options;
}

function input(opts: string, over: Partial<PlaylistInput> = {}): PlaylistInput {
  const optionSegments = opts.split('/');
  const source = 'plain/local://dir/a%20b.flac';
  return {
    requestPath: `/${sign(`/${opts}/${source}`, KEY, SALT)}/${opts}/${source}`,
    optionSegments,
    source,
    durationS: 20.5,
    signer: { insecure: false, key: KEY, salt: SALT },
    ...over,
    options: over.options ?? options(opts),
  };
}

describe('segmentDurations', () => {
  it('cuts the probed duration, windowed by the trim, into hls_len pieces', () => {
    expect(segmentDurations(options('f:hls/hls_len:6'), 20.5)).toEqual([6, 6, 6, 2.5]);
    expect(segmentDurations(options('f:hls/hls_len:6/t:3'), 20.5)).toEqual([6, 6, 5.5]);
    expect(segmentDurations(options('f:hls/hls_len:4/t:3:10'), 20.5)).toEqual([4, 4, 2]);
    expect(segmentDurations(options('f:hls/hls_len:4/t:18:10'), 20.5)).toEqual([2.5]);
    expect(segmentDurations(options('f:hls/hls_len:6'), 12)).toEqual([6, 6]);
  });
  it('a trim past the end is one segment of the trim pad’s silence', () => {
    expect(segmentDurations(options('f:hls/t:30'), 20.5)).toEqual([0.01]);
  });
});

describe('writePlaylist', () => {
  it('is a VOD playlist whose part URIs resolve, under any prefix, to signed part paths', () => {
    const i = input('f:hls/hls_len:6/exp:4000000000');
    const text = writePlaylist(i);
    const lines = text.trimEnd().split('\n');
    expect(lines.slice(0, 7)).toEqual([
      '#EXTM3U',
      '#EXT-X-VERSION:7',
      '#EXT-X-TARGETDURATION:6',
      '#EXT-X-MEDIA-SEQUENCE:0',
      '#EXT-X-PLAYLIST-TYPE:VOD',
      '#EXT-X-INDEPENDENT-SEGMENTS',
      `#EXT-X-MAP:URI="${partUri(i, 'init')}"`,
    ]);
    expect(lines.at(-1)).toBe('#EXT-X-ENDLIST');
    expect(lines.filter((l) => l.startsWith('#EXTINF:'))).toEqual([
      '#EXTINF:6.000,',
      '#EXTINF:6.000,',
      '#EXTINF:6.000,',
      '#EXTINF:2.500,',
    ]);
    for (const prefix of ['', '/audio', '/a/b/c']) {
      for (const part of ['init', 0, 3] as const) {
        const resolved = new URL(partUri(i, part), `https://cdn.example${prefix}${i.requestPath}`)
          .pathname;
        expect(resolved.startsWith(`${prefix}/`)).toBe(true);
        const own = resolved.slice(prefix.length);
        const [, signature, ...rest] = own.split('/');
        const signed = `/${rest.join('/')}`;
        expect(signed).toBe(
          `/f:hls/hls_len:6/exp:4000000000/hls_seg:${part}/plain/local://dir/a%20b.flac`,
        );
        expect(
          verifySignature(signature!, signed, {
            key: KEY,
            salt: SALT,
            allowInsecure: false,
          }).ok,
        ).toBe(true);
      }
    }
  });
  it('links insecure parts from an insecure playlist, and a preset as spelled', () => {
    const i = input('pr:long', {
      requestPath: '/insecure/pr:long/plain/local://dir/a%20b.flac',
      options: options('f:hls'),
      signer: { insecure: true },
    });
    expect(new URL(partUri(i, 2), `http://proxy${i.requestPath}`).pathname).toBe(
      '/insecure/pr:long/hls_seg:2/plain/local://dir/a%20b.flac',
    );
  });
  it('a source spelled with a quote cannot end the map URI early; its links still verify', () => {
    const source = 'plain/local://dir/a"b.flac';
    const opts = 'f:hls/hls_len:6';
    const i = input(opts, {
      source,
      requestPath: `/${sign(`/${opts}/${source}`, KEY, SALT)}/${opts}/${source}`,
    });
    const map = writePlaylist(i)
      .split('\n')
      .find((l) => l.startsWith('#EXT-X-MAP:'))!;
    expect(map.match(/"/g)).toHaveLength(2); // the attribute's own quotes, nothing inside
    for (const part of ['init', 0] as const) {
      const link = new URL(partUri(i, part), `http://proxy${i.requestPath}`).pathname;
      expect(link).not.toContain('"');
      const [, signature, ...rest] = link.split('/');
      expect(sign(`/${rest.join('/')}`, KEY, SALT)).toBe(signature);
      expect(decodeURIComponent(link)).toContain('local://dir/a"b.flac');
    }
  });
  it(`refuses to list more than ${MAX_HLS_SEGMENTS} segments`, () => {
    const i = input('f:hls/hls_len:1', { durationS: MAX_HLS_SEGMENTS + 1 });
    expect(() => writePlaylist(i)).toThrow(PlaylistTooLong);
  });
});

describe('hls options', () => {
  it('under AP_ONLY_PRESETS a preset playlist’s parts parse (hls_seg is the one other key)', () => {
    const grammar = { presets: new Map([['long', ['f:hls', 'hls_len:4']]]), onlyPresets: true };
    const part = parseOptions('pr:long/hls_seg:3/exp:4000000000', grammar);
    expect(part.ok && part.options).toMatchObject({ format: 'hls', hlsSegmentS: 4, hlsPart: 3 });
    const other = parseOptions('pr:long/hls_len:2', grammar);
    expect(!other.ok && other.reason).toBe('only_presets');
  });
  it('a part is its own variant: the canonical string names it, defaults materialised', () => {
    const parsed = parseOptions('hls_seg:7/f:hls/t:5');
    expect(parsed.ok).toBe(true);
    if (parsed.ok) {
      expect(normalizeOptions(parsed.options)).toBe('f:hls/hls_c:flac/hls_len:6/hls_seg:7/t:5');
    }
  });
});

describe('the part argv', () => {
  const src = { url: '/proc/self/fd/3', kind: 'local' as const, sampleRate: 44_100, channels: 2 };
  const flagsOf = (argv: string[]) => argv.filter((a) => a.startsWith('-') && a in ARGV_FLAGS);
  it('a segment reads its window plus the pre-roll, and drops the pre-roll first', () => {
    const argv = buildRenderArgv(options('f:hls/hls_len:6/t:10/hls_seg:2'), src);
    const at = (flag: string) => argv[argv.indexOf(flag) + 1];
    expect(at('-ss')).toBe(String(22 - HLS_PREROLL_S));
    expect(at('-t')).toBe(String(6 + HLS_PREROLL_S));
    expect(at('-af')!.startsWith(`atrim=start=${HLS_PREROLL_S},asetpts=PTS-STARTPTS`)).toBe(true);
    expect(at('-c:a')).toBe('flac');
    expect(at('-strict')).toBe('-2');
    expect(at('-f')).toBe('mp4');
    expect(at('-movflags')).toBe('empty_moov+default_base_moof+skip_trailer');
    for (const f of flagsOf(argv)) expect(ARGV_FLAGS[f]).toBeDefined();
  });
  it('the first segment of an untrimmed source has no -ss at all', () => {
    const argv = buildRenderArgv(options('f:hls/hls_seg:0'), src);
    expect(argv).not.toContain('-ss');
    expect(argv[argv.indexOf('-t') + 1]).toBe('6');
  });
  it('a bounded trim’s last segment is what remains; the init renders no frame', () => {
    const last = buildRenderArgv(options('f:hls/hls_len:4/t:3:10/hls_seg:2'), src);
    expect(last[last.indexOf('-ss') + 1]).toBe('10.5');
    expect(last[last.indexOf('-t') + 1]).toBe('2.5');
    const init = buildRenderArgv(options('f:hls/hls_c:aac/br:96/hls_seg:init'), src);
    expect(init[init.indexOf('-frames:a') + 1]).toBe('0');
    expect(init[init.indexOf('-c:a') + 1]).toBe('aac');
    expect(init).not.toContain('-strict');
  });
  it('a playlist is not rendered', () => {
    expect(() => buildRenderArgv(options('f:hls'), src)).toThrow(TypeError);
  });
});
