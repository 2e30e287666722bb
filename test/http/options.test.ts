// Proves the option grammar: every 422 case of the contract table and the peaks rules (asserting
// the reason and the canonically spelled segment the message names), the accepted domains, the
// canonical normalisation examples (sorted keys, materialised defaults, minimal numbers,
// `fade:IN:OUT`, `norm:ebu:I:TP:LRA`, peaks defaults, `exp` excluded), and the route split:
// source marker, `info` detection, and no marker as the generic 404.
import { describe, expect, it } from 'vitest';
import { renderNumber } from '../../src/core/variant.js';
import {
  normalizeOptions,
  normalizeOptionsString,
  parseOptions,
  parseRoute,
  splitOptionsAndSource,
} from '../../src/http/options.js';

function reasonOf(input: string) {
  const r = parseOptions(input);
  if (r.ok) throw new Error(`expected ${input} to be refused`);
  expect(r.error).toBe('invalid_options');
  expect(r.message.length).toBeGreaterThan(0);
  return { reason: r.reason, segment: r.segment, message: r.message };
}

function normalized(input: string): string {
  const r = normalizeOptionsString(input);
  if (!r.ok) throw new Error(`expected ${input} to parse: ${r.message}`);
  return r.normalized;
}

describe('shape errors', () => {
  it.each([
    ['f:mp3//br:96', 'empty_segment', ''],
    ['/f:mp3', 'empty_segment', ''],
    ['f', 'missing_value', 'f'],
    ['plainish', 'missing_value', 'plainish'],
    ['xyz:1', 'unknown_key', 'xyz:1'],
    ['F:mp3', 'unknown_key', 'F:mp3'],
    ['f%3Amp3', 'missing_value', 'f%3Amp3'],
    ['f:mp3/f:opus', 'duplicate_key', 'f:opus'],
    ['t:1/t:1', 'duplicate_key', 't:1'],
  ])('%s → %s naming %j', (input, reason, segment) => {
    expect(reasonOf(input)).toMatchObject({ reason, segment });
  });

  it('names the segment in the message', () => {
    expect(reasonOf('xyz:1').message).toBe('unknown option "xyz:1"');
    expect(reasonOf('br:128/q:5').message).toBe('"q:5" conflicts with "br:128"');
  });
});

describe('value domains', () => {
  it.each([
    // f
    ['f:wma', 'invalid_value'],
    ['f:', 'invalid_value'],
    ['f:MP3', 'invalid_value'],
    // br: integer 1..10000
    ['br:abc', 'invalid_integer'],
    ['br:96.5', 'invalid_integer'],
    ['br:-1', 'invalid_integer'],
    ['br:+96', 'invalid_integer'],
    ['br:1e2', 'invalid_integer'],
    ['br:', 'invalid_integer'],
    ['br:0', 'out_of_range'],
    ['br:10001', 'out_of_range'],
    [`br:${'9'.repeat(400)}`, 'out_of_range'],
    // sr: integer 1..384000
    ['f:wav/sr:0', 'out_of_range'],
    ['f:wav/sr:384001', 'out_of_range'],
    ['sr:44.1', 'invalid_integer'],
    // ch
    ['ch:3', 'invalid_value'],
    ['ch:0', 'invalid_value'],
    ['ch:01', 'invalid_value'],
    ['ch:stereo', 'invalid_value'],
    // bd
    ['f:flac/bd:8', 'invalid_value'],
    ['f:wav/bd:32', 'invalid_value'],
    ['f:wav/bd:32F', 'invalid_value'],
    // decimals
    ['q:high', 'invalid_number'],
    ['gain:1e3', 'invalid_number'],
    ['gain:1E3', 'invalid_number'],
    ['gain:.5', 'invalid_number'],
    ['gain:5.', 'invalid_number'],
    ['gain:+3', 'invalid_number'],
    ['gain:0x10', 'invalid_number'],
    ['gain:Infinity', 'invalid_number'],
    ['gain:1,5', 'invalid_number'],
    ['t:1.2345', 'excessive_precision'],
    ['gain:-0.0001', 'excessive_precision'],
    ['q:5.0000', 'excessive_precision'],
    // gain |x| <= 100
    ['gain:100.001', 'out_of_range'],
    ['gain:-101', 'out_of_range'],
    [`gain:${'1'.repeat(400)}`, 'out_of_range'],
    // t: start >= 0, duration > 0, at most two parts
    ['t:-1', 'out_of_range'],
    ['t:0:0', 'out_of_range'],
    ['t:30:0', 'out_of_range'],
    ['t:1:-2', 'out_of_range'],
    ['t:1:2:3', 'invalid_value'],
    ['t:', 'invalid_number'],
    ['t:1:', 'invalid_number'],
    ['t:abc', 'invalid_number'],
    ['t:1000000000000.001', 'out_of_range'],
    // fade: both >= 0, at most two parts
    ['fade:-0.5', 'out_of_range'],
    ['fade:1:-1', 'out_of_range'],
    ['t:0:10/fade:1:2:3', 'invalid_value'],
    ['fade:', 'invalid_number'],
    // norm
    ['norm:itu', 'invalid_value'],
    ['norm:', 'invalid_value'],
    ['norm:EBU', 'invalid_value'],
    ['norm:ebu:-14:-1:9:1', 'invalid_value'],
    ['norm:ebu:-99', 'out_of_range'],
    ['norm:ebu:-4', 'out_of_range'],
    ['norm:ebu:-14:3', 'out_of_range'],
    ['norm:ebu:-14:-10', 'out_of_range'],
    ['norm:ebu:-14:-1:99', 'out_of_range'],
    ['norm:ebu:-14:-1:0.5', 'out_of_range'],
    ['norm:ebu:', 'invalid_number'],
    ['norm:ebu:loud', 'invalid_number'],
    ['norm:ebu:-14.0001', 'excessive_precision'],
    // enhance: closed vocabulary
    ['enhance:music', 'invalid_value'],
    ['enhance:Voice', 'invalid_value'],
    ['enhance:', 'invalid_value'],
    // pts 1..100000, pk_fmt
    ['f:peaks/pts:0', 'out_of_range'],
    ['f:peaks/pts:100001', 'out_of_range'],
    ['f:peaks/pts:1.5', 'invalid_integer'],
    ['f:peaks/pk_fmt:csv', 'invalid_value'],
    // dl, cb: opaque, non-empty, no control characters
    ['dl:', 'invalid_value'],
    ['cb:', 'invalid_value'],
    ['dl:a\nb', 'control_character'],
    ['cb:a\rb', 'control_character'],
    ['cb:a\u0000b', 'control_character'],
    ['dl:a\tb', 'control_character'],
    ['cb:a\u007fb', 'control_character'],
    // exp 1..253402300799
    ['exp:0', 'out_of_range'],
    ['exp:253402300800', 'out_of_range'],
    ['exp:-5', 'invalid_integer'],
    ['exp:1.5', 'invalid_integer'],
    [`exp:${'4'.repeat(400)}`, 'out_of_range'],
  ])('%j → %s', (input, reason) => {
    const r = reasonOf(input);
    expect(r.reason).toBe(reason);
    // The named segment is the one that failed.
    expect(input.split('/')).toContain(r.segment);
  });

  it.each([
    'br:1',
    'br:10000',
    'br:0096',
    'sr:48000',
    'f:flac/sr:384000',
    'ch:1',
    'ch:2',
    'f:flac/bd:16',
    'f:flac/bd:24',
    'f:wav/bd:32f',
    'gain:100',
    'gain:-100',
    'gain:-0',
    't:0',
    't:-0',
    't:1.234',
    't:0:0.001',
    'fade:0',
    'fade:-0:-0',
    'norm:ebu:-70:-9:1',
    'norm:ebu:-5:0:50',
    'enhance:voice',
    'f:peaks/pts:1',
    'f:peaks/pts:100000',
    'f:peaks/pk_fmt:dat',
    'dl:my%20piece%2Ffinal.mp3',
    'cb:%00',
    'exp:1',
    'exp:253402300799',
    '',
  ])('accepts %j', (input) => {
    expect(parseOptions(input).ok).toBe(true);
  });

  it('collapses -0 to 0 at parse time', () => {
    const r = parseOptions('gain:-0/fade:-0:-0/t:-0');
    if (!r.ok) throw new Error(r.message);
    expect(Object.is(r.options.gainDb, 0)).toBe(true);
    expect(Object.is(r.options.fade?.in, 0)).toBe(true);
    expect(Object.is(r.options.fade?.out, 0)).toBe(true);
    expect(Object.is(r.options.trim?.start, 0)).toBe(true);
  });
});

describe('cross-key rules (the segment is named canonically)', () => {
  it.each([
    ['br:128/q:5', 'mutually_exclusive', 'q:5'],
    ['q:5.000/br:0128', 'mutually_exclusive', 'q:5'],
    ['f:flac/br:320', 'requires_lossy_format', 'br:320'],
    ['f:wav/br:320', 'requires_lossy_format', 'br:320'],
    ['f:wav/q:8', 'unsupported_for_format', 'q:8'],
    ['f:flac/q:13', 'out_of_range_for_format', 'q:13'],
    ['f:mp3/q:10', 'out_of_range_for_format', 'q:10'],
    ['f:mp3/q:-0.5', 'out_of_range_for_format', 'q:-0.5'],
    ['f:opus/q:11', 'out_of_range_for_format', 'q:11'],
    ['f:ogg/q:-2', 'out_of_range_for_format', 'q:-2'],
    ['f:ogg/q:10.001', 'out_of_range_for_format', 'q:10.001'],
    ['f:aac/q:5', 'out_of_range_for_format', 'q:5'],
    ['f:aac/q:0', 'out_of_range_for_format', 'q:0'],
    ['f:m4a/q:2.5', 'out_of_range_for_format', 'q:2.5'],
    ['bd:24', 'requires_lossless_format', 'bd:24'],
    ['f:opus/bd:16', 'requires_lossless_format', 'bd:16'],
    ['f:mp3/bd:32f', 'requires_lossless_format', 'bd:32f'],
    ['f:flac/bd:32f', 'unsupported_for_format', 'bd:32f'],
    ['sr:96000', 'sample_rate_above_lossy_cap', 'sr:96000'],
    ['f:opus/sr:48001', 'sample_rate_above_lossy_cap', 'sr:48001'],
    ['pts:400', 'requires_peaks_format', 'pts:400'],
    ['f:opus/pk_fmt:dat', 'requires_peaks_format', 'pk_fmt:dat'],
    ['f:flac/pts:10', 'requires_peaks_format', 'pts:10'],
    ['fade:0:2', 'requires_bounded_trim', 'fade:0:2'],
    ['t:1/fade:2:2', 'requires_bounded_trim', 'fade:2:2'],
    ['t:1:2/fade:2:2', 'fade_exceeds_duration', 'fade:2:2'],
    ['t:0:0.3/fade:0.1:0.201', 'fade_exceeds_duration', 'fade:0.1:0.201'],
    ['t:5:1/fade:1.001', 'fade_exceeds_duration', 'fade:1.001:0'],
  ])('%s → %s naming %j', (input, reason, segment) => {
    expect(reasonOf(input)).toMatchObject({ reason, segment });
  });

  it.each(['br:96', 'q:5', 'sr:48000', 'sr:96000', 'bd:16', 'bd:32f'])(
    'f:peaks refuses %s as unsupported_for_peaks',
    (segment) => {
      expect(reasonOf(`f:peaks/${segment}`)).toMatchObject({
        reason: 'unsupported_for_peaks',
        segment,
      });
    },
  );

  it.each([
    't:1:5',
    'ch:2',
    'ch:1',
    'fade:0.5',
    't:0:10/fade:1:1',
    'gain:-3',
    'norm:ebu',
    'enhance:voice',
    'pts:400/pk_fmt:dat',
  ])('f:peaks accepts %s', (segment) => {
    expect(parseOptions(`f:peaks/${segment}`).ok).toBe(true);
  });

  it.each([
    'f:flac/q:8',
    'f:flac/q:12',
    'f:flac/q:0',
    'f:mp3/q:9',
    'f:mp3/q:0',
    'f:opus/q:10',
    'f:ogg/q:-1',
    'f:aac/q:1.5',
    'f:m4a/q:0.1',
    'f:flac/sr:96000',
    'f:wav/sr:192000',
    'sr:48000',
    'fade:2',
    't:1/fade:2:0',
    't:1:10/fade:2:2',
    't:0:0.3/fade:0.1:0.2',
    't:0:0.3/fade:0.2:0.1',
    't:0:0.3/fade:0.15:0.15',
    't:0:0.1/fade:0.07:0.03',
    't:0:1/fade:0.001:0.999',
    'br:320/f:opus',
  ])('accepts %s', (input) => {
    expect(parseOptions(input).ok).toBe(true);
  });
});

describe('parsed values', () => {
  it('the documented example parses to its variant', () => {
    const r = parseOptions('f:opus/br:96/t:12.5:30/fade:0.5:1');
    expect(r).toEqual({
      ok: true,
      options: {
        format: 'opus',
        bitrateK: 96,
        trim: { start: 12.5, duration: 30 },
        fade: { in: 0.5, out: 1 },
      },
      request: {},
    });
  });

  it('materialises the peaks defaults and the norm targets', () => {
    const peaks = parseOptions('f:peaks/norm:ebu:-14');
    expect(peaks).toMatchObject({
      ok: true,
      options: {
        format: 'peaks',
        channels: 1,
        pts: 800,
        peaksFormat: 'json',
        norm: { i: -14, tp: -1.5, lra: 11 },
      },
    });
  });

  it('keeps exp out of the variant and dl still percent-encoded', () => {
    const r = parseOptions('exp:2000000000/dl:a%20b.mp3');
    expect(r).toMatchObject({ ok: true, request: { exp: 2000000000 } });
    if (!r.ok) return;
    expect('exp' in r.options).toBe(false);
    expect(r.options.download).toBe('a%20b.mp3');
  });

  it('accepts pre-split segments', () => {
    expect(parseOptions(['f:opus', 'br:96'])).toEqual(parseOptions('f:opus/br:96'));
  });
});

describe('normalisation', () => {
  it.each([
    ['', 'f:mp3'],
    ['f:mp3', 'f:mp3'],
    ['br:96', 'br:96/f:mp3'],
    ['f:opus/br:96', 'br:96/f:opus'],
    ['br:96/f:opus', 'br:96/f:opus'],
    ['norm:ebu', 'f:mp3/norm:ebu:-16:-1.5:11'],
    ['norm:ebu:-14', 'f:mp3/norm:ebu:-14:-1.5:11'],
    ['norm:ebu:-14:-1', 'f:mp3/norm:ebu:-14:-1:11'],
    ['norm:ebu:-14.50:-1.0:9', 'f:mp3/norm:ebu:-14.5:-1:9'],
    ['f:peaks', 'ch:1/f:peaks/pk_fmt:json/pts:800'],
    ['f:peaks/ch:2/pts:0400/pk_fmt:dat', 'ch:2/f:peaks/pk_fmt:dat/pts:400'],
    ['t:30/f:flac/ch:1/bd:24/gain:-3', 'bd:24/ch:1/f:flac/gain:-3/t:30'],
    ['t:30.0:15.500', 'f:mp3/t:30:15.5'],
    ['gain:-3.250', 'f:mp3/gain:-3.25'],
    ['q:5.000', 'f:mp3/q:5'],
    ['q:0.10/f:aac', 'f:aac/q:0.1'],
    ['fade:0.5', 'f:mp3/fade:0.5:0'],
    ['fade:-0:0', 'f:mp3/fade:0:0'],
    ['gain:-0', 'f:mp3/gain:0'],
    ['t:0', 'f:mp3/t:0'],
    ['gain:0', 'f:mp3/gain:0'],
    ['cb:v2', 'cb:v2/f:mp3'],
    ['dl:a%20b.mp3/cb:X', 'cb:X/dl:a%20b.mp3/f:mp3'],
    ['enhance:voice/f:wav/sr:96000/bd:32f', 'bd:32f/enhance:voice/f:wav/sr:96000'],
    ['exp:2000000000/f:opus', 'f:opus'],
    ['sr:044100', 'f:mp3/sr:44100'],
    ['f:opus/br:96/t:12.5:30/fade:0.5:1/exp:1', 'br:96/f:opus/fade:0.5:1/t:12.5:30'],
  ])('%j → %j', (input, expected) => {
    expect(normalized(input)).toBe(expected);
  });

  it('no-ops keep their own identity', () => {
    const forms = ['', 't:0', 'gain:0', 'fade:0'].map(normalized);
    expect(new Set(forms).size).toBe(forms.length);
  });

  it('URLs differing only in exp normalise alike', () => {
    expect(normalized('f:opus/exp:2000000000')).toBe(normalized('f:opus/exp:2000000001'));
  });

  it('is idempotent on examples', () => {
    for (const input of [
      'f:opus/br:96/t:12.5:30/fade:0.5:1',
      'f:peaks/t:0:10/ch:1',
      'norm:ebu:-14:-1:9/gain:-3/dl:piece.mp3/cb:v2',
      'f:wav/bd:32f/sr:96000',
    ]) {
      const once = normalized(input);
      expect(normalized(once)).toBe(once);
    }
  });

  it('normalizeOptions renders what parseOptions returned', () => {
    const r = parseOptions('f:peaks');
    if (!r.ok) throw new Error(r.message);
    expect(normalizeOptions(r.options)).toBe('ch:1/f:peaks/pk_fmt:json/pts:800');
  });
});

describe('renderNumber', () => {
  it.each([
    [30, '30'],
    [12.5, '12.5'],
    [-1.5, '-1.5'],
    [0.1, '0.1'],
    [0.001, '0.001'],
    [-0, '0'],
    [1e12, '1000000000000'],
    [999999999999.999, '999999999999.999'],
  ])('%d → %s', (n, s) => {
    expect(renderNumber(n)).toBe(s);
  });

  it('refuses non-finite numbers', () => {
    expect(() => renderNumber(Number.NaN)).toThrow(RangeError);
  });
});

describe('route split and info', () => {
  it('splits at the first segment exactly equal to plain or enc', () => {
    expect(splitOptionsAndSource('/f:opus/plain/local://a/plain/b.wav')).toEqual({
      ok: true,
      optionSegments: ['f:opus'],
      source: 'plain/local://a/plain/b.wav',
    });
    expect(splitOptionsAndSource('/enc/bG9jYWw6Ly9hLndhdg')).toEqual({
      ok: true,
      optionSegments: [],
      source: 'enc/bG9jYWw6Ly9hLndhdg',
    });
    // `plainx`, `dl:plain` and `PLAIN` are not markers.
    expect(splitOptionsAndSource('/dl:plain/plainx/PLAIN/enc/x')).toEqual({
      ok: true,
      optionSegments: ['dl:plain', 'plainx', 'PLAIN'],
      source: 'enc/x',
    });
  });

  it('no marker is the generic 404, not a 422', () => {
    expect(parseRoute('/f:opus/local://a.wav')).toEqual({ ok: false, error: 'not_found' });
    expect(parseRoute('/xyz:1')).toEqual({ ok: false, error: 'not_found' });
    expect(parseRoute('/')).toEqual({ ok: false, error: 'not_found' });
    expect(parseRoute('/info')).toEqual({ ok: false, error: 'not_found' });
  });

  it('bad options before a marker are a 422 whatever the source', () => {
    expect(parseRoute('/xyz:1/plain/local://missing.wav')).toMatchObject({
      ok: false,
      error: 'invalid_options',
      reason: 'unknown_key',
    });
    expect(parseRoute('/f:mp3//plain/local://a.wav')).toMatchObject({
      reason: 'empty_segment',
    });
  });

  it('a render route carries options, request options, the normalised string and the source', () => {
    expect(parseRoute('/f:opus/exp:99/plain/local://a%20b.wav')).toEqual({
      ok: true,
      endpoint: 'render',
      options: { format: 'opus' },
      request: { exp: 99 },
      normalized: 'f:opus',
      source: 'plain/local://a%20b.wav',
    });
    expect(parseRoute('/plain/local://a.wav')).toMatchObject({ normalized: 'f:mp3' });
  });

  it('info alone is the info endpoint', () => {
    expect(parseRoute('/info/plain/local://a.wav')).toEqual({
      ok: true,
      endpoint: 'info',
      source: 'plain/local://a.wav',
    });
  });

  it.each([
    ['/info/br:128/plain/local://a.wav', 'br:128'],
    ['/br:128/info/plain/local://a.wav', 'br:128'],
    ['/info/exp:2000000000/plain/local://a.wav', 'exp:2000000000'],
    ['/info/xyz/plain/local://a.wav', 'xyz'],
    ['/info//plain/local://a.wav', ''],
  ])('%s is a 422 naming %j', (rest, segment) => {
    expect(parseRoute(rest)).toMatchObject({
      ok: false,
      error: 'invalid_options',
      reason: 'info_with_options',
      segment,
    });
  });

  it('info twice is a duplicate', () => {
    expect(parseRoute('/info/info/plain/local://a.wav')).toMatchObject({
      reason: 'duplicate_key',
      segment: 'info',
    });
  });
});
