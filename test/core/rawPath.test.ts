// Proves the raw-path byte convention shared by the signature, the cache key and the source
// decoder: byte strings map one code unit to one byte, text becomes the UTF-8 byte string a client
// would send, and wider code units are refused as programmer errors.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  ENCODED_URL_PATH,
  isByteString,
  rawBytes,
  toRawPath,
  toUrlPath,
} from '../../src/core/rawPath.js';
import { percentDecodeOnce } from '../../src/sources/parse.js';

describe('raw paths', () => {
  it('maps a byte string to its bytes one to one', () => {
    expect([...rawBytes('/a%20\u00ff')]).toEqual([0x2f, 0x61, 0x25, 0x32, 0x30, 0xff]);
  });

  it('turns text into the UTF-8 byte string a client sends', () => {
    expect(toRawPath('/plain/local://ascii.wav')).toBe('/plain/local://ascii.wav');
    expect([...rawBytes(toRawPath('/\u20ac'))]).toEqual([0x2f, 0xe2, 0x82, 0xac]);
  });

  it('refuses code units wider than a byte', () => {
    expect(isByteString('\u00ff')).toBe(true);
    expect(isByteString('\u0100')).toBe(false);
    expect(() => rawBytes('/\u20ac')).toThrow(TypeError);
  });
});

describe('toUrlPath (what `audio-proxy sign` signs)', () => {
  it('encodes spaces, non-ASCII and what would end or bend a path; keeps pchar', () => {
    expect(toUrlPath("/f:mp3/plain/local://a-b_c.~!$&'()*+,;=:@.wav")).toBe(
      "/f:mp3/plain/local://a-b_c.~!$&'()*+,;=:@.wav",
    );
    expect(toUrlPath('/plain/local://My Song é.flac')).toBe(
      '/plain/local://My%20Song%20%C3%A9.flac',
    );
    expect(toUrlPath('/plain/https://h/a?b=1#c%d\\e"[]')).toBe(
      '/plain/https://h/a%3Fb=1%23c%25d%5Ce%22%5B%5D',
    );
  });

  it('the source decodes back to the text, once, and the path is sendable as is', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 40 }), (text) => {
        const wire = toUrlPath(text);
        expect(ENCODED_URL_PATH.test(wire)).toBe(true);
        expect(percentDecodeOnce(wire)).toBe(text);
      }),
    );
  });
});
