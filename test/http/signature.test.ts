// Proves the signature gate: known-answer vectors computed independently (Python's hmac, see the
// recipe below), exactly two accepted spellings, refusal of every non-canonical final character,
// over-padding and length change, tamper detection over path bytes, `insecure` only when allowed,
// missing key material failing closed, and the raw-path split that keeps `//` intact.
import { describe, expect, it } from 'vitest';
import {
  INVALID_SIGNATURE,
  type SignatureConfig,
  sign,
  splitPath,
  verifySignature,
} from '../../src/http/signature.js';

// python3 -c "import hmac,hashlib,base64; k=bytes.fromhex(KEY); s=bytes.fromhex(SALT);
//   print(base64.urlsafe_b64encode(hmac.new(k, s+PATH, hashlib.sha256).digest()).rstrip(b'='))"
const KEY = Buffer.from('00112233445566778899AABBCCDDEEFF00112233445566778899AABBCCDDEEFF', 'hex');
const SALT = Buffer.from('FFEEDDCCBBAA99887766554433221100', 'hex');
const PATH = '/f:opus/br:96/plain/s3://masters/2026/piece-final.wav';
const SIG = 'zfLTfPPhQ8kdeYYJOdagqPfog2nFk7KzDFUjtRAf_Ns';
const INFO_PATH = '/info/plain/s3://b/k.wav';
const INFO_SIG = 'U6nyFdkSvjNo2mlBbJMGk1nwISbdcnEGlgKSWKBfKT4';

const config: SignatureConfig = { key: KEY, salt: SALT, allowInsecure: false };
const OK = { ok: true, insecure: false };

describe('sign', () => {
  it('matches the independently computed vectors', () => {
    expect(sign(PATH, KEY, SALT)).toBe(SIG);
    expect(sign(INFO_PATH, KEY, SALT)).toBe(INFO_SIG);
  });

  it('emits 43 unpadded base64url characters', () => {
    const sig = sign('/plain/local://a.wav', KEY, SALT);
    expect(sig).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it('refuses a rest without its leading slash, which could never verify', () => {
    expect(() => sign('f:opus/plain/s3://b/k.wav', KEY, SALT)).toThrow(TypeError);
  });

  it('refuses missing key material', () => {
    expect(() => sign('/a', new Uint8Array(0), SALT)).toThrow(TypeError);
    expect(() => sign('/a', KEY, 'salt' as unknown as Uint8Array)).toThrow(TypeError);
  });

  it('refuses text that is not a byte string (one code unit per byte)', () => {
    expect(() => sign('/plain/local://\u20ac.wav', KEY, SALT)).toThrow(TypeError);
  });
});

describe('verifySignature: the two accepted spellings', () => {
  it.each([
    ['unpadded', SIG, PATH],
    ['one trailing =', `${SIG}=`, PATH],
    ['info vector', INFO_SIG, INFO_PATH],
  ])('accepts the %s spelling', (_name, sig, path) => {
    expect(verifySignature(sig, path, config)).toEqual(OK);
  });

  it('accepts what sign() produces for a path with escapes and a double slash', () => {
    const path = '/f:aac/t:0:30/plain/local://dir//some%20key.wav';
    expect(verifySignature(sign(path, KEY, SALT), path, config)).toEqual(OK);
  });

  it('accepts a rest of just "/" when signed', () => {
    expect(verifySignature(sign('/', KEY, SALT), '/', config)).toEqual(OK);
  });
});

describe('verifySignature: everything else is the same 401', () => {
  it('refuses the three non-canonical final characters that decode to the same bytes', () => {
    expect(SIG.endsWith('s')).toBe(true);
    const body = SIG.slice(0, -1);
    for (const last of ['t', 'u', 'v']) {
      // Same 32 bytes once decoded: that is what makes these the dangerous spellings.
      expect(Buffer.from(body + last, 'base64url')).toEqual(Buffer.from(SIG, 'base64url'));
      expect(verifySignature(body + last, PATH, config)).toBe(INVALID_SIGNATURE);
      expect(verifySignature(`${body + last}=`, PATH, config)).toBe(INVALID_SIGNATURE);
    }
  });

  it('refuses over-padding, truncation and extension', () => {
    for (const sig of [
      `${SIG}==`,
      `${SIG}===`,
      SIG.slice(0, -1),
      `${SIG}A`,
      `${SIG}AA`,
      `=${SIG}`,
    ]) {
      expect(verifySignature(sig, PATH, config)).toBe(INVALID_SIGNATURE);
    }
  });

  it('refuses a change at any position', () => {
    for (let i = 0; i < SIG.length; i++) {
      const replacement = SIG[i] === 'A' ? 'B' : 'A';
      const mutated = SIG.slice(0, i) + replacement + SIG.slice(i + 1);
      expect(verifySignature(mutated, PATH, config), `index ${i}`).toBe(INVALID_SIGNATURE);
    }
  });

  it('refuses standard-alphabet and garbage spellings without throwing', () => {
    const standard = Buffer.from(SIG, 'base64url').toString('base64').replace(/=+$/, '');
    for (const sig of [standard, '!!!', 'not*base64', 'a b c', '', '%20', 'insecure ', 'é']) {
      if (sig === SIG) continue;
      expect(verifySignature(sig, PATH, config)).toBe(INVALID_SIGNATURE);
    }
  });

  it('refuses valid base64url of the wrong length', () => {
    const short = Buffer.from('too short').toString('base64url');
    expect(verifySignature(short, PATH, config)).toBe(INVALID_SIGNATURE);
  });

  it.each([
    '/f:opus/br:128/plain/s3://masters/2026/piece-final.wav',
    '/f:opus/br:96/plain/s3://masters/2026/piece-final.waX',
    '/f:opus/br:96/plain/s3://masters/2026/piece-final.wav ',
    '/f:opus/br:96/plain/s3://masters/2026/piece-final.wav/extra',
    'f:opus/br:96/plain/s3://masters/2026/piece-final.wav',
    '/f:opus/br:96/plain/s3:/masters/2026/piece-final.wav',
    '/f:opus/br:96/plain/s3%3A//masters/2026/piece-final.wav',
  ])('refuses the tampered path %s', (path) => {
    expect(verifySignature(SIG, path, config)).toBe(INVALID_SIGNATURE);
  });

  it('fails closed without a key or a salt, or with another key', () => {
    expect(verifySignature(SIG, PATH, { ...config, key: undefined })).toBe(INVALID_SIGNATURE);
    expect(verifySignature(SIG, PATH, { ...config, salt: undefined })).toBe(INVALID_SIGNATURE);
    expect(verifySignature(SIG, PATH, { ...config, key: new Uint8Array(0) })).toBe(
      INVALID_SIGNATURE,
    );
    const other = Buffer.alloc(32, 7);
    expect(verifySignature(SIG, PATH, { ...config, key: other })).toBe(INVALID_SIGNATURE);
  });
});

describe('verifySignature: insecure', () => {
  it('passes only when allowed, and says so', () => {
    expect(verifySignature('insecure', PATH, config)).toBe(INVALID_SIGNATURE);
    expect(verifySignature('insecure', PATH, { ...config, allowInsecure: true })).toEqual({
      ok: true,
      insecure: true,
    });
  });

  it('passes when allowed even without key material (the dev demo has none)', () => {
    const dev = { key: undefined, salt: undefined, allowInsecure: true };
    expect(verifySignature('insecure', PATH, dev)).toEqual({ ok: true, insecure: true });
    expect(verifySignature(SIG, PATH, dev)).toBe(INVALID_SIGNATURE);
  });

  it('does not weaken real signatures', () => {
    const tampered = `y${SIG.slice(1)}`;
    expect(verifySignature(tampered, PATH, { ...config, allowInsecure: true })).toBe(
      INVALID_SIGNATURE,
    );
    expect(verifySignature('INSECURE', PATH, { ...config, allowInsecure: true })).toBe(
      INVALID_SIGNATURE,
    );
  });
});

describe('splitPath', () => {
  it.each([
    [`/${SIG}${PATH}`, { ok: true, signature: SIG, rest: PATH }],
    [
      '/sig/plain/local://a//b.wav',
      { ok: true, signature: 'sig', rest: '/plain/local://a//b.wav' },
    ],
    ['/sig/x?dl=1&y', { ok: true, signature: 'sig', rest: '/x' }],
    ['/sig/', { ok: true, signature: 'sig', rest: '/' }],
    ['//x', { ok: true, signature: '', rest: '/x' }],
    ['/sig/%2F%2e%2E', { ok: true, signature: 'sig', rest: '/%2F%2e%2E' }],
  ])('%s splits at the first segment, bytes untouched', (raw, expected) => {
    expect(splitPath(raw)).toEqual(expected);
  });

  it('a single segment is a signature with nothing signed (401)', () => {
    expect(splitPath('/nope')).toEqual({ ok: false, reason: 'invalid_signature' });
    expect(splitPath('/nope?x=/y')).toEqual({ ok: false, reason: 'invalid_signature' });
  });

  it('no segment at all is the router miss (404)', () => {
    for (const raw of ['/', '', '//', '/?a=b', '*']) {
      expect(splitPath(raw)).toEqual({ ok: false, reason: 'no_route' });
    }
  });

  it('a split then verify round-trips the signed bytes', () => {
    const url = `/${SIG}${PATH}?cache=ignored`;
    const split = splitPath(url);
    if (!split.ok) throw new Error('expected a split');
    expect(verifySignature(split.signature, split.rest, config)).toEqual(OK);
  });
});
