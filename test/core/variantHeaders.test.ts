// Proves the variant-describing headers: content type per format (peaks by pk_fmt), the immutable
// cache policy string, and Content-Disposition from `dl`: percent-decoded once (falling back to the
// raw value), non-ASCII and control characters replaced in the quoted name, quote and backslash
// escaped, and `filename*=UTF-8''…` present exactly when the quoted name lost something.
import { describe, expect, it } from 'vitest';
import {
  contentDisposition,
  contentTypeFor,
  downloadFilename,
  IMMUTABLE_CACHE_CONTROL,
} from '../../src/core/variantHeaders.js';
import { parseOptions } from '../../src/http/options.js';

describe('contentTypeFor', () => {
  it.each([
    ['f:mp3', 'audio/mpeg'],
    ['f:opus', 'audio/ogg'],
    ['f:ogg', 'audio/ogg'],
    ['f:aac', 'audio/aac'],
    ['f:m4a', 'audio/mp4'],
    ['f:flac', 'audio/flac'],
    ['f:wav', 'audio/wav'],
    ['f:peaks', 'application/json'],
    ['f:peaks/pk_fmt:json', 'application/json'],
    ['f:peaks/pk_fmt:dat', 'application/octet-stream'],
    ['', 'audio/mpeg'],
  ])('%s → %s', (input, type) => {
    const r = parseOptions(input);
    if (!r.ok) throw new Error(r.message);
    expect(contentTypeFor(r.options)).toBe(type);
  });

  it('throws on a format outside the grammar', () => {
    expect(() => contentTypeFor({ format: 'wma' as 'mp3' })).toThrow(TypeError);
  });
});

it('the immutable policy is the contract string', () => {
  expect(IMMUTABLE_CACHE_CONTROL).toBe('public, max-age=31536000, immutable, no-transform');
});

describe('contentDisposition', () => {
  it.each([
    ['piece.mp3', 'attachment; filename="piece.mp3"'],
    ['my%20song.mp3', 'attachment; filename="my song.mp3"'],
    ['a%22b%5Cc.mp3', 'attachment; filename="a\\"b\\\\c.mp3"'],
    ['say"hi".mp3', 'attachment; filename="say\\"hi\\".mp3"'],
    ['caf%C3%A9.mp3', `attachment; filename="caf_.mp3"; filename*=UTF-8''caf%C3%A9.mp3`],
    [
      '%E2%82%AC%20%22x%22.wav',
      `attachment; filename="_ \\"x\\".wav"; filename*=UTF-8''%E2%82%AC%20%22x%22.wav`,
    ],
    ['%F0%9F%8E%B5.ogg', `attachment; filename="_.ogg"; filename*=UTF-8''%F0%9F%8E%B5.ogg`],
    ['a%0Ab.mp3', `attachment; filename="a_b.mp3"; filename*=UTF-8''a%0Ab.mp3`],
    [
      'a%0D%0AX-Evil:%201.mp3',
      `attachment; filename="a__X-Evil: 1.mp3"; filename*=UTF-8''a%0D%0AX-Evil%3A%201.mp3`,
    ],
    ["it's (1).mp3", `attachment; filename="it's (1).mp3"`],
    ['100%.mp3', 'attachment; filename="100%.mp3"'],
    ['%FF.mp3', 'attachment; filename="%FF.mp3"'],
  ])('dl:%s → %s', (dl, header) => {
    expect(contentDisposition(dl)).toBe(header);
  });

  it('the header value is always printable ASCII', () => {
    for (const dl of ['%00%01%1F%7F', '%C2%85x', '%E2%80%AEgpj.mp3', 'ok']) {
      expect(contentDisposition(dl)).toMatch(/^[\x20-\x7e]+$/);
    }
  });

  it('decodes exactly once', () => {
    expect(downloadFilename('a%2520b')).toBe('a%20b');
    expect(downloadFilename('%zz')).toBe('%zz');
  });
});
