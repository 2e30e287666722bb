// Key rotation (#16 item 6, imgproxy's model): AP_KEY and AP_SALT may each list several values,
// paired by position. A URL signed with any configured pair verifies, at the signature stage and
// as a waiting-room join credential; a pair that is not configured, or a key from one pair with
// the salt of another, is the same 401 as any wrong signature; the first pair is the one
// `signatureConfigOf` hands on as the signing pair. Unequal counts are refused at boot
// (test/config.test.ts).
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { ANSWERED } from '../../src/http/exchange.js';
import { joinCredential } from '../../src/http/roomAccess.js';
import {
  INVALID_SIGNATURE,
  sign,
  signatureConfigOf,
  verifySignature,
} from '../../src/http/signature.js';
import { signatureStage } from '../../src/http/stages/signature.js';
import { contextOf, exchange, NOT_ANSWERED } from './stages/harness.js';

const NEW = { key: 'a1'.repeat(32), salt: 'b1'.repeat(16) };
const OLD = { key: 'a2'.repeat(32), salt: 'b2'.repeat(16) };
const OLDEST = { key: 'a3'.repeat(48), salt: 'b3' };
const STRANGER = { key: 'a4'.repeat(32), salt: 'b4'.repeat(16) };
const ENV = {
  AP_KEY: [NEW, OLD, OLDEST].map((p) => p.key).join(','),
  AP_SALT: [NEW, OLD, OLDEST].map((p) => p.salt).join(','),
};
const REST = '/f:opus/br:96/plain/local://a%20b.wav';

const bytes = (hex: string) => Buffer.from(hex, 'hex');
const signedWith = (pair: { key: string; salt: string }, rest = REST) =>
  sign(rest, bytes(pair.key), bytes(pair.salt));

describe('verifying with several pairs', () => {
  const config = signatureConfigOf(loadConfig(ENV));

  it('the first pair is the signing pair; the others are handed on as rotated', () => {
    expect(config.key).toEqual(bytes(NEW.key));
    expect(config.salt).toEqual(bytes(NEW.salt));
    expect(config.rotated).toEqual([
      { key: bytes(OLD.key), salt: bytes(OLD.salt) },
      { key: bytes(OLDEST.key), salt: bytes(OLDEST.salt) },
    ]);
  });

  it('a URL signed with any configured pair verifies', () => {
    for (const pair of [NEW, OLD, OLDEST]) {
      expect(verifySignature(signedWith(pair), REST, config)).toEqual({
        ok: true,
        insecure: false,
      });
    }
  });

  it('an unknown pair, or a key with another pair’s salt, is the one refusal', () => {
    expect(verifySignature(signedWith(STRANGER), REST, config)).toBe(INVALID_SIGNATURE);
    expect(verifySignature(signedWith({ key: OLD.key, salt: NEW.salt }), REST, config)).toBe(
      INVALID_SIGNATURE,
    );
    expect(verifySignature(signedWith({ key: NEW.key, salt: OLD.salt }), REST, config)).toBe(
      INVALID_SIGNATURE,
    );
    // A rotated pair's signature over another path is still a tamper.
    expect(verifySignature(signedWith(OLD), REST.replace('96', '97'), config)).toBe(
      INVALID_SIGNATURE,
    );
  });

  it('removing a pair from the list retires the URLs it signed', () => {
    const retired = signatureConfigOf(
      loadConfig({ AP_KEY: `${NEW.key},${OLD.key}`, AP_SALT: `${NEW.salt},${OLD.salt}` }),
    );
    expect(verifySignature(signedWith(OLD), REST, retired).ok).toBe(true);
    expect(verifySignature(signedWith(OLDEST), REST, retired)).toBe(INVALID_SIGNATURE);
  });

  it('rotated pairs never verify without a signing pair', () => {
    const { rotated } = config;
    const none = { key: undefined, salt: undefined, rotated, allowInsecure: false };
    expect(verifySignature(signedWith(OLD), REST, none)).toBe(INVALID_SIGNATURE);
  });
});

describe('the signature stage with several pairs', () => {
  it('hands on the rest of an old-pair URL and refuses an unknown pair with 401', async () => {
    const ctx = contextOf({ ...ENV, AP_ALLOW_INSECURE: '0' });
    const old = await exchange((x) => signatureStage(x, ctx, `/${signedWith(OLDEST)}${REST}`));
    expect(old.status).toBe(NOT_ANSWERED);
    expect(old.result).toBe(REST);
    const unknown = await exchange((x) =>
      signatureStage(x, ctx, `/${signedWith(STRANGER)}${REST}`),
    );
    expect(unknown.status).toBe(401);
    expect(unknown.result).toBe(ANSWERED);
    expect(JSON.parse(unknown.body).error).toBe('invalid_signature');
  });
});

describe('the waiting room join credential with several pairs', () => {
  it('admits a render path signed with a rotated pair, refuses an unknown one', () => {
    const signing = signatureConfigOf(loadConfig(ENV));
    const join = (pair: typeof NEW) =>
      `/api/v1/queue/join?path=${encodeURIComponent(`/${signedWith(pair)}${REST}`)}`;
    expect(joinCredential(join(OLD), signing, 1_800_000_000)).toEqual({ ok: true });
    expect(joinCredential(join(STRANGER), signing, 1_800_000_000)).toEqual({
      ok: false,
      failure: { type: 'invalid_signature' },
    });
  });
});
