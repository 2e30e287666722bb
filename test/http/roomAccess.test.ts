/**
 * The waiting room's HTTP gate, as pure functions: the join credential is a signed render path
 * verified like the render (signature 401, options 422, exp 410), and a session cookie names a
 * session only when this process minted it.
 */
import { describe, expect, it } from 'vitest';
import {
  joinCredential,
  SESSION_COOKIE,
  SessionCookies,
  sessionSetCookie,
} from '../../src/http/roomAccess.js';
import { sign } from '../../src/http/signature.js';

const key = Buffer.from('11'.repeat(32), 'hex');
const salt = Buffer.from('22'.repeat(8), 'hex');
const signing = { key, salt, allowInsecure: false };
const NOW_S = 1_800_000_000;

const signed = (rest: string) => `/${sign(rest, key, salt)}${rest}`;
const join = (path: string) => `/api/v1/queue/join?path=${encodeURIComponent(path)}`;

describe('joinCredential', () => {
  const render = '/f:mp3/t:0:1/plain/local://a%20b.wav';

  it('admits a signed render path, percent-escapes and all, byte for byte', () => {
    expect(joinCredential(join(signed(render)), signing, NOW_S)).toEqual({ ok: true });
    // the same value spelled by URLSearchParams
    const q = new URLSearchParams({ path: signed(render) }).toString();
    expect(joinCredential(`/api/v1/queue/join?${q}`, signing, NOW_S)).toEqual({ ok: true });
  });

  it.each([
    ['no query', '/api/v1/queue/join'],
    ['no path', '/api/v1/queue/join?x=1'],
    ['an empty path', '/api/v1/queue/join?path='],
    ['a forged signature', join(`/${'A'.repeat(43)}${render}`)],
    ['the dev literal, insecure off', join(`/insecure${render}`)],
    ['a signature moved to another path', join(signed(render).replace('t:0:1', 't:0:2'))],
    ['a path with no signed rest', join('/nope')],
    ['a whole URL instead of a path', join(`https://proxy.example${signed(render)}`)],
  ])('refuses %s as a bad signature (401)', (_, url) => {
    expect(joinCredential(url, signing, NOW_S)).toEqual({
      ok: false,
      failure: { type: 'invalid_signature' },
    });
  });

  it('takes the dev literal only when insecure is allowed', () => {
    const url = join(`/insecure${render}`);
    expect(joinCredential(url, { ...signing, allowInsecure: true }, NOW_S).ok).toBe(true);
  });

  it('refuses without key material, as a render would', () => {
    const url = join(signed(render));
    expect(
      joinCredential(url, { key: undefined, salt: undefined, allowInsecure: false }, NOW_S),
    ).toEqual({ ok: false, failure: { type: 'invalid_signature' } });
  });

  it('a signed path that is not a render is a 422; bad options are the render’s 422', () => {
    const info = joinCredential(join(signed('/info/plain/local://a.wav')), signing, NOW_S);
    expect(info.ok === false && info.failure.type).toBe('invalid_options');
    const noSource = joinCredential(join(signed('/f:mp3/t:0:1')), signing, NOW_S);
    expect(noSource.ok === false && noSource.failure.type).toBe('invalid_options');
    const badOption = joinCredential(join(signed('/f:nope/plain/local://a.wav')), signing, NOW_S);
    expect(badOption.ok === false && badOption.failure.type).toBe('invalid_options');
  });

  it('honours exp: the expiring second still admits, the next one is 410', () => {
    const url = join(signed(`/f:mp3/exp:${NOW_S}/plain/local://a.wav`));
    expect(joinCredential(url, signing, NOW_S).ok).toBe(true);
    expect(joinCredential(url, signing, NOW_S + 1)).toEqual({
      ok: false,
      failure: { type: 'expired' },
    });
  });
});

describe('SessionCookies', () => {
  it('reads back only what it minted', () => {
    const cookies = new SessionCookies();
    const { session, value } = cookies.mint();
    expect(session).toMatch(/^[A-Za-z0-9_-]{24}$/);
    expect(cookies.read(`a=b; ${SESSION_COOKIE}=${value}; c=d`)).toBe(session);
    // another process (another key) did not mint it
    expect(new SessionCookies().read(`${SESSION_COOKIE}=${value}`)).toBeUndefined();
  });

  it('ignores a chosen id, a bare id, a tampered tag and a non-canonical tag', () => {
    const cookies = new SessionCookies(Buffer.alloc(32, 7));
    const { session, value } = cookies.mint();
    const tag = value.split('.')[1]!;
    expect(cookies.read(`${SESSION_COOKIE}=AAAAAAAAAAAAAAAAAAAAAAAA`)).toBeUndefined();
    expect(cookies.read(`${SESSION_COOKIE}=${session}`)).toBeUndefined();
    expect(cookies.read(`${SESSION_COOKIE}=${'B'.repeat(24)}.${tag}`)).toBeUndefined();
    const flipped = (tag[0] === 'A' ? 'B' : 'A') + tag.slice(1);
    expect(cookies.read(`${SESSION_COOKIE}=${session}.${flipped}`)).toBeUndefined();
    // 16 bytes in 22 characters leave 4 unused bits in the last one: other spellings refused
    const last = tag.at(-1)!;
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const sibling = alphabet[alphabet.indexOf(last) ^ 1]!;
    expect(cookies.read(`${SESSION_COOKIE}=${session}.${tag.slice(0, -1)}${sibling}`)).toBe(
      undefined,
    );
    expect(cookies.read(undefined)).toBeUndefined();
  });

  it('the Set-Cookie value carries Secure only when asked', () => {
    expect(sessionSetCookie('v', false)).toBe(
      `${SESSION_COOKIE}=v; Path=/; HttpOnly; SameSite=Lax`,
    );
    expect(sessionSetCookie('v', true)).toBe(
      `${SESSION_COOKIE}=v; Path=/; HttpOnly; SameSite=Lax; Secure`,
    );
  });
});
