/**
 * The fuzzing world shared by `fuzz.test.ts` (CI, a few thousand cases) and `bench/fuzz.ts`
 * (100k): a local root with a canary beside it, generators for hostile request lines and
 * headers, and the oracle every response is judged by. Nothing here imports vitest, so the
 * bench can run it as a plain script.
 *
 * ## Invariants (what the oracle checks on every response)
 * - **Every status is one the contract can produce**: 200/204/304 or a row of `ERROR_TABLE`;
 *   every error body is `{error, message}` naming a row with that very status and the row's
 *   `Cache-Control`. A HEAD error is judged by its status and `Cache-Control` alone.
 * - **No 5xx for bad input**: the one 5xx allowed is `not_configured` for an `s3://` source,
 *   because the world has no S3 credentials (the situation the table row describes).
 * - **A broken signature is a 401**, a correct one is never a 401.
 * - **Confinement holds**: no body or header contains the canary marker. The canary is a WAV
 *   whose title tag is the marker, beside the root and reachable by every trick in the
 *   generators (`..`, links out, encoded slashes, overlong UTF-8); a file inside the root
 *   carries a second marker, and the caller counts how often that one shows up, proving a
 *   served file would be noticed.
 * - **CORS is on every answer** (`AP_ALLOW_ORIGIN` is set in this world).
 *
 * ## Races
 * None here: the caller owns concurrency. Accepted GETs render at most 0.05 s of audio.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { cacheKey, etagOf } from '../../src/http/cacheKey.js';
import { ERROR_TABLE } from '../../src/http/errors.js';
import { parseRoute } from '../../src/http/options.js';
import { sign } from '../../src/http/signature.js';
import { parseSource } from '../../src/sources/parse.js';
import { resolveFfmpeg } from '../../src/workers/ffmpegPath.js';

/** Test key material (hex), 32 bytes of key: signs the part of the cases that should pass 401. */
export const FUZZ_KEY_HEX = 'a1'.repeat(32);
export const FUZZ_SALT_HEX = '5a17';
const KEY = Buffer.from(FUZZ_KEY_HEX, 'hex');
const SALT = Buffer.from(FUZZ_SALT_HEX, 'hex');
/** The configured CORS origin; every answer must carry it. */
export const FUZZ_ORIGIN = 'https://app.example';
/** Sources above this are a 413; `big.wav` is over it, everything else under. */
export const FUZZ_MAX_SRC_BYTES = 150_000;
const FIXTURE_SECONDS = 1; // every servable file is 1 s: an accepted render is milliseconds of work
const GENERATE_TIMEOUT_MS = 20_000;
/** Longest generated component; paths past 1024 bytes come from the `long` family, not chance. */
const MAX_RANDOM_COMPONENT_CHARS = 12;

export interface FuzzWorld {
  readonly dir: string;
  /** `AP_LOCAL_ROOT`. */
  readonly root: string;
  /** In the canary's title tag; must never be in any response. */
  readonly canaryMarker: string;
  /** In `inside.wav`'s title tag; served on purpose (the witness that tags do show). */
  readonly insideMarker: string;
  /** Environment for `startHarness` / `loadConfig`. */
  readonly env: Record<string, string>;
  cleanup(): void;
}

/**
 * Builds the world under the tmpdir:
 * ```
 * dir/canary.wav            title = canaryMarker  (outside the root)
 * dir/canary.txt            the marker as text
 * dir/root/inside.wav       title = insideMarker
 * dir/root/big.wav          over FUZZ_MAX_SRC_BYTES (413)
 * dir/root/garbage.txt      not media (415)
 * dir/root/escape.wav    -> ../canary.wav          (relative link out)
 * dir/root/abs.wav       -> <dir>/canary.wav       (absolute link: refused)
 * dir/root/up            -> ..                     (directory link out)
 * dir/root/sub/ok.wav    -> ../inside.wav          (relative link that stays inside)
 * ```
 */
export function makeFuzzWorld(): FuzzWorld {
  const dir = mkdtempSync(join(tmpdir(), 'ap-fuzz-'));
  const root = join(dir, 'root');
  mkdirSync(join(root, 'sub'), { recursive: true });
  const tag = randomBytes(8).toString('hex');
  const canaryMarker = `CANARY${tag}`;
  const insideMarker = `INSIDE${tag}`;
  const ffmpeg = resolveFfmpeg({ env: process.env }).path;
  const wav = (out: string, title: string, seconds: number, channels: number) =>
    execFileSync(
      ffmpeg,
      [
        ...['-nostdin', '-hide_banner', '-loglevel', 'error', '-y'],
        ...['-f', 'lavfi', '-i', `sine=frequency=440:sample_rate=44100:duration=${seconds}`],
        ...['-ac', String(channels), '-metadata', `title=${title}`, '-c:a', 'pcm_s16le'],
        ...['-f', 'wav', out],
      ],
      { timeout: GENERATE_TIMEOUT_MS },
    );
  wav(join(dir, 'canary.wav'), canaryMarker, FIXTURE_SECONDS, 1);
  writeFileSync(join(dir, 'canary.txt'), `${canaryMarker}\n`);
  wav(join(root, 'inside.wav'), insideMarker, FIXTURE_SECONDS, 1);
  wav(join(root, 'big.wav'), 'big', 2, 2);
  writeFileSync(join(root, 'garbage.txt'), 'no media here\n'.repeat(40));
  symlinkSync('../canary.wav', join(root, 'escape.wav'));
  symlinkSync(join(dir, 'canary.wav'), join(root, 'abs.wav'));
  symlinkSync('..', join(root, 'up'));
  symlinkSync('../inside.wav', join(root, 'sub', 'ok.wav'));
  return {
    dir,
    root,
    canaryMarker,
    insideMarker,
    env: {
      AP_KEY: FUZZ_KEY_HEX,
      AP_SALT: FUZZ_SALT_HEX,
      AP_ALLOW_INSECURE: '0',
      AP_LOCAL_ROOT: root,
      AP_ALLOW_ORIGIN: FUZZ_ORIGIN,
      AP_MAX_SRC_BYTES: String(FUZZ_MAX_SRC_BYTES),
      AP_LOG_LEVEL: 'error',
    },
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

// ---------------------------------------------------------------------------------------------
// Generators

/** Path components that mean something in the world, plus the usual tricks. */
const COMPONENTS = [
  'inside.wav',
  'big.wav',
  'garbage.txt',
  'escape.wav',
  'abs.wav',
  'up',
  'sub',
  'ok.wav',
  'canary.wav',
  'canary.txt',
  'root',
  'missing.wav',
  '..',
  '.',
  '',
];

/** Characters always escaped in a raw path: outside printable ASCII, or meaningful to HTTP. */
const MUST_ESCAPE = /[^\x21-\x7e]|[%?#]/;

function pct(byte: number): string {
  return `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
}

/** Percent-encodes a decoded string: `how` picks minimal, every byte, or dots and slashes too. */
function encodePlain(decoded: string, how: 'min' | 'all' | 'dots' | 'lower'): string {
  let out = '';
  for (const ch of decoded) {
    const bytes = Buffer.from(ch, 'utf8');
    const quoted =
      how === 'all' || how === 'lower' || MUST_ESCAPE.test(ch) || (how === 'dots' && ch === '.');
    if (!quoted) {
      out += ch;
      continue;
    }
    const e = [...bytes].map(pct).join('');
    out += how === 'lower' ? e.toLowerCase() : e;
  }
  return out;
}

/** A raw fragment that survives into the path as written: escapes that decode to trouble. */
const trickFragment = fc.constantFrom(
  '%2F', // an encoded slash
  '%2f..%2f',
  '%2E%2E', // an encoded `..`
  '%00', // NUL
  '%0A', // a control character
  '%C0%AE%C0%AE', // overlong UTF-8 for `..`
  '%C0%AF', // overlong `/`
  '%E0%80%AE', // three-byte overlong `.`
  '%FF', // never valid UTF-8
  '%ED%A0%80', // a surrogate half
  '%E2%80%AE', // RIGHT-TO-LEFT OVERRIDE (a format character)
  '%252e%252e', // double-encoded `..`
  '%zz', // malformed escape
  '%4', // truncated escape
  '..%5C..', // a backslash
  '\\', // a raw backslash
  '~',
  ';',
  '@',
  ':',
);

/** A decoded local path built from world components and random text. */
const decodedLocalPath = fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .array(
        fc.oneof(
          { weight: 5, arbitrary: fc.constantFrom(...COMPONENTS) },
          {
            weight: 1,
            arbitrary: fc.string({ unit: 'binary', maxLength: MAX_RANDOM_COMPONENT_CHARS }),
          },
        ),
        { minLength: 1, maxLength: 6 },
      )
      .map((parts) => parts.join('/')),
  },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      'inside.wav',
      'sub/ok.wav',
      './inside.wav',
      'big.wav',
      'garbage.txt',
    ),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '../canary.wav',
      'sub/../../canary.wav',
      'up/canary.wav',
      'up/root/inside.wav',
      'escape.wav',
      'abs.wav',
      'sub/../escape.wav',
      'up/up/etc/passwd',
    ),
  },
  // very long paths (over 1024 bytes) and deeply nested ones (over 64 components)
  {
    weight: 1,
    arbitrary: fc.integer({ min: 1000, max: 1100 }).map((n) => `${'a'.repeat(n)}/inside.wav`),
  },
  {
    weight: 1,
    arbitrary: fc
      .integer({ min: 60, max: 70 })
      .chain((n) => fc.constantFrom(`${'sub/'.repeat(n)}ok.wav`, `${'./'.repeat(n)}inside.wav`)),
  },
);

const decodedSource = fc.oneof(
  {
    weight: 8,
    arbitrary: fc
      .tuple(fc.constantFrom('', '', '', '/', '//'), decodedLocalPath)
      .map(([lead, p]) => `local://${lead}${p}`),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      's3://bucket/key.wav',
      's3://bucket/',
      's3:///key',
      'https://example.com/a.wav',
      'https://user@example.com/a.wav',
      'http://example.com/a.wav',
      'ftp://example.com/a.wav',
      'file:///etc/passwd',
      'LOCAL://inside.wav',
      'local:/inside.wav',
      'local:inside.wav',
      '',
    ),
  },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
);

/** The raw source segment(s), from the marker on, exactly as they go on the wire. */
const sourceSegment = fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .tuple(
        decodedSource,
        fc.constantFrom('min', 'min', 'all', 'dots', 'lower') as fc.Arbitrary<
          'min' | 'all' | 'dots' | 'lower'
        >,
      )
      .map(([d, how]) => `plain/${encodePlain(d, how)}`),
  },
  {
    weight: 2,
    arbitrary: fc.tuple(decodedSource, fc.boolean()).map(([d, pad]) => {
      const b = Buffer.from(d, 'utf8').toString('base64url');
      return `enc/${pad ? b.padEnd(Math.ceil(b.length / 4) * 4, '=') : b}`;
    }),
  },
  {
    // a valid-looking source with a trick spliced in
    weight: 2,
    arbitrary: fc
      .tuple(
        fc.constantFrom('plain/local://', 'plain/local:%2F%2F', 'plain/local://sub/'),
        trickFragment,
        fc.constantFrom('inside.wav', 'canary.wav', '../canary.wav', '', 'up%2Fcanary.wav'),
      )
      .map(([a, b, c]) => `${a}${b}${c}`),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      'plain',
      'enc',
      'enc/!!!',
      'enc/a',
      'enc/bG9jYWw6Ly9pbnNpZGUud2F2===',
      'plain/%',
      'nomarker/local://inside.wav',
    ),
  },
);

const VALID_OPTIONS = [
  'f:mp3',
  'f:wav',
  'f:flac',
  'f:opus',
  'f:ogg',
  'f:aac',
  'f:m4a',
  'f:peaks',
  'br:64',
  'q:2',
  'q:0.5',
  'sr:22050',
  'sr:8000',
  'ch:1',
  'ch:2',
  'bd:16',
  'bd:24',
  'bd:32f',
  't:0.1',
  'fade:0.01:0.01',
  'gain:-3',
  'gain:0',
  'norm:ebu',
  'enhance:voice',
  'pts:10',
  'pk_fmt:dat',
  'pk_fmt:json',
  'dl:a%20name.mp3',
  'dl:%E2%9C%93',
  'cb:1',
  'exp:253402300799',
  'exp:1',
];

const INVALID_OPTIONS = [
  '',
  'f',
  'f:',
  ':mp3',
  'f:xyz',
  'f:MP3',
  'br:0',
  'br:10001',
  'br:1.5',
  'q:1e3',
  'q:5.1234',
  'q:-0',
  'sr:999999',
  'sr:0',
  'ch:3',
  'ch:01',
  't:0:0',
  't:-1',
  't:1:2:3',
  'fade:0:2',
  'gain:100.001',
  'gain:1e2',
  'norm:ebu:-80',
  'norm:xyz',
  'enhance:music',
  'pts:0',
  'pk_fmt:csv',
  'dl:',
  'dl:%0A',
  'cb:',
  'exp:0',
  'exp:999999999999999',
  'info',
  'xyz:1',
  'f:mp3:extra',
  `dl:${'x'.repeat(3000)}`,
];

/** Option segments: valid and invalid ones mixed, plus random `key:value` text. */
const optionSegments = fc.array(
  fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(...VALID_OPTIONS) },
    { weight: 3, arbitrary: fc.constantFrom(...INVALID_OPTIONS) },
    {
      weight: 1,
      arbitrary: fc
        .tuple(
          fc.string({ unit: 'grapheme-ascii', maxLength: 6 }),
          fc.string({ unit: 'grapheme-ascii', maxLength: 8 }),
        )
        .map(([k, v]) => encodePlain(`${k}:${v}`, 'min')),
    },
  ),
  { maxLength: 5 },
);

export type SignatureKind =
  | 'valid'
  | 'valid-padded'
  | 'tampered'
  | 'insecure'
  | 'random43'
  | 'overpadded'
  | 'empty'
  | 'junk';

const signatureKind = fc.constantFrom<SignatureKind>(
  'valid',
  'valid',
  'valid',
  'valid',
  'valid-padded',
  'tampered',
  'insecure',
  'random43',
  'overpadded',
  'empty',
  'junk',
);

function signatureFor(kind: SignatureKind, rest: string, noise: number): string {
  const good = sign(rest, KEY, SALT);
  switch (kind) {
    case 'valid':
      return good;
    case 'valid-padded':
      return `${good}=`;
    case 'tampered': {
      const i = noise % good.length;
      const swap = good[i] === 'A' ? 'B' : 'A';
      return good.slice(0, i) + swap + good.slice(i + 1);
    }
    case 'insecure':
      return 'insecure';
    case 'random43':
      return randomBytes(32).toString('base64url');
    case 'overpadded':
      return `${good}==`;
    case 'empty':
      return '';
    case 'junk':
      return encodePlain(String.fromCharCode(0x20 + (noise % 90)).repeat(1 + (noise % 50)), 'min');
  }
}

export interface FuzzRequest {
  readonly method: string;
  /** The raw request target. */
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly signature: SignatureKind;
  /** The verified part of the path (after the signature segment). */
  readonly rest: string;
}

const rangeHeader = fc.oneof(
  fc.constantFrom(
    'bytes=0-10',
    'bytes=-5',
    'bytes=5-',
    'bytes=0-0,5-9',
    'bytes=9-1',
    'bytes=-0',
    'bytes=99999999999999999999-',
    'items=0-1',
    'bytes=',
    'bytes=a-b',
  ),
  fc.string({ unit: 'grapheme-ascii', maxLength: 30 }),
);

function headerSafe(s: string): string {
  // Node refuses control characters in header values before they reach the wire.
  return s.replace(/[^\x20-\x7e]/g, '');
}

/** Headers: Range, If-None-Match (sometimes the right ETag), Origin, preflight request headers. */
function headersArb(rest: string) {
  return fc
    .record(
      {
        range: rangeHeader,
        inm: fc.oneof(
          fc.constantFrom('*', '"nope"', 'W/"x", "y"', '', ',,,'),
          fc.constantFrom('right', 'right-weak', 'right-in-list'),
          fc.string({ unit: 'grapheme-ascii', maxLength: 40 }),
        ),
        origin: fc.oneof(
          fc.constantFrom(FUZZ_ORIGIN, 'https://evil.example', 'null', 'HTTPS://APP.EXAMPLE'),
          fc.webUrl(),
        ),
        acrm: fc.constantFrom('GET', 'POST', 'DELETE', 'X'),
        acrh: fc.oneof(
          fc.constantFrom('range', 'x-a, x-b', 'bad header', ',,', 'content-type,range'),
          fc.string({ unit: 'grapheme-ascii', maxLength: 30 }),
        ),
      },
      { requiredKeys: [] },
    )
    .map((h) => {
      const out: Record<string, string> = {};
      if (h.range !== undefined) out.range = headerSafe(h.range);
      if (h.inm !== undefined) out['if-none-match'] = headerSafe(rightEtag(h.inm, rest));
      if (h.origin !== undefined) out.origin = headerSafe(h.origin);
      if (h.acrm !== undefined) out['access-control-request-method'] = h.acrm;
      if (h.acrh !== undefined) out['access-control-request-headers'] = headerSafe(h.acrh);
      return out;
    });
}

/** The URL's own ETag where the generator asked for it (when the URL has one). */
function rightEtag(inm: string, rest: string): string {
  if (!inm.startsWith('right')) return inm;
  const route = parseRoute(rest);
  if (!route.ok || route.endpoint !== 'render') return '"not-computable"';
  const src = parseSource(route.source);
  if (!src.ok) return '"not-computable"';
  const etag = etagOf(cacheKey(route.normalized, src.canonical));
  if (inm === 'right-weak') return `W/${etag}`;
  if (inm === 'right-in-list') return `"other", ${etag}`;
  return etag;
}

/** One hostile request; mostly HEADs, which stop before any probe or render. */
export const requestArb: fc.Arbitrary<FuzzRequest> = fc
  .tuple(
    fc.oneof(
      { weight: 3, arbitrary: optionSegments.map((o) => o) },
      { weight: 1, arbitrary: fc.constant(['info']) },
    ),
    sourceSegment,
    signatureKind,
    fc.nat(),
    fc.oneof(
      { weight: 12, arbitrary: fc.constant('HEAD') },
      { weight: 6, arbitrary: fc.constant('GET') },
      { weight: 1, arbitrary: fc.constantFrom('OPTIONS', 'POST', 'DELETE', 'PUT') },
    ),
    fc.oneof(
      { weight: 9, arbitrary: fc.constant('') },
      {
        weight: 1,
        arbitrary: fc.constantFrom('?a=1', '?', '?plain/local://canary.wav', '?/../canary.wav'),
      },
    ),
  )
  .chain(([options, source, kind, noise, method, query]) => {
    // An accepted render is kept tiny: a GET that could render gets a 0.05 s trim.
    const opts = method === 'GET' && !options.includes('info') ? [...options, 't:0:0.05'] : options;
    const rest = `/${[...opts, source].join('/')}`;
    const path = `/${signatureFor(kind, rest, noise)}${rest}${query}`;
    return headersArb(rest).map(
      (headers): FuzzRequest => ({ method, path, headers, signature: kind, rest }),
    );
  });

/** Request lines that are not signed-path shaped at all. */
export const oddPathArb: fc.Arbitrary<FuzzRequest> = fc
  .oneof(
    fc.constantFrom(
      '/',
      '//',
      '///',
      '/health',
      '/ready',
      '/metrics',
      '/nope',
      '/x/',
      '/info',
      '/plain',
      '/%2F%2F',
      '/api/v1/queue/join',
    ),
    fc.string({ unit: 'grapheme-ascii', maxLength: 60 }).map((s) => `/${encodePlain(s, 'min')}`),
  )
  .chain((path) =>
    fc.constantFrom('GET', 'HEAD', 'POST', 'OPTIONS').map(
      (method): FuzzRequest => ({
        method,
        path,
        headers: {},
        signature: 'junk',
        rest: '',
      }),
    ),
  );

export const anyRequestArb = fc.oneof(
  { weight: 9, arbitrary: requestArb },
  { weight: 1, arbitrary: oddPathArb },
);

// ---------------------------------------------------------------------------------------------
// The oracle

export interface FuzzResponse {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: Buffer;
}

const TABLE_STATUSES = new Set(ERROR_TABLE.map((r) => r.status));
const SUCCESS_STATUSES = new Set([200, 204, 304]);

function sourceScheme(rest: string): string | undefined {
  const route = parseRoute(rest);
  if (!route.ok) return undefined;
  const src = parseSource(route.source);
  return src.ok ? src.source.scheme : undefined;
}

function signatureValid(kind: SignatureKind): boolean {
  return kind === 'valid' || kind === 'valid-padded';
}

/**
 * Judges one exchange. Returns the list of violations (empty = fine) and the error code seen.
 */
export function judge(
  world: Pick<FuzzWorld, 'canaryMarker'>,
  req: FuzzRequest,
  res: FuzzResponse,
): { problems: string[]; error?: string } {
  const problems: string[] = [];
  const { status } = res;
  const head = req.method === 'HEAD';
  // A Range is answered from a render in progress too (docs/ranges.md): 206 with its window.
  const ranged = Object.keys(req.headers ?? {}).some((name) => name.toLowerCase() === 'range');
  if (status === 206) {
    if (!ranged) problems.push('206 to a request without a Range');
    if (!/^bytes \d+-\d+\/(\d+|\*)$/.test(String(res.headers['content-range']))) {
      problems.push(`206 with Content-Range ${String(res.headers['content-range'])}`);
    }
  } else if (!SUCCESS_STATUSES.has(status) && !TABLE_STATUSES.has(status)) {
    problems.push(`status ${status} is in no row of the error table`);
  }
  const all = Buffer.concat([res.body, Buffer.from(JSON.stringify(res.headers))]);
  if (all.includes(world.canaryMarker)) problems.push('the canary outside the root was served');
  if (res.headers['access-control-allow-origin'] !== FUZZ_ORIGIN) {
    problems.push('no Access-Control-Allow-Origin on a main-listener answer');
  }
  let error: string | undefined;
  if (status >= 400) {
    const cc = res.headers['cache-control'];
    if (head) {
      if (!ERROR_TABLE.some((r) => r.status === status && r.cacheControl === cc)) {
        problems.push(`HEAD ${status} with Cache-Control ${String(cc)} matches no row`);
      }
    } else {
      let body: { error?: unknown; message?: unknown } | undefined;
      try {
        body = JSON.parse(res.body.toString('utf8'));
      } catch {
        problems.push(`error ${status} without a JSON body`);
      }
      if (body) {
        error = String(body.error);
        const row = ERROR_TABLE.find((r) => r.error === body!.error && r.status === status);
        if (!row) problems.push(`error code ${String(body.error)} with ${status} is not a row`);
        else if (row.cacheControl !== cc)
          problems.push(
            `${row.error}: Cache-Control ${String(cc)}, table says ${row.cacheControl}`,
          );
        if (typeof body.message !== 'string' || body.message === '') {
          problems.push(`${String(body.error)} without a message`);
        }
        if (!String(res.headers['content-type']).startsWith('application/json')) {
          problems.push('error body not labelled application/json');
        }
      }
    }
    if (status === 429) {
      const ra = Number(res.headers['retry-after']);
      if (!Number.isInteger(ra) || ra < 1) problems.push('429 without Retry-After >= 1');
    }
  }
  if (status >= 500) {
    const s3 = sourceScheme(req.rest) === 's3';
    const allowed = s3 && status === 500 && (head || error === 'not_configured');
    if (!allowed) problems.push(`5xx for client input: ${status} ${error ?? ''}`);
  }
  // The signature verdict comes first for every signed-path shaped request line.
  const signedShape = req.rest !== '' && req.method !== 'OPTIONS' && (req.method === 'GET' || head);
  if (signedShape) {
    if (!signatureValid(req.signature) && status !== 401) {
      problems.push(`broken signature (${req.signature}) answered ${status}, not 401`);
    }
    if (signatureValid(req.signature) && status === 401) {
      problems.push('a correct signature was refused');
    }
  }
  return { problems, error };
}

/** A correctly signed request for `rest`. */
export function signedRequest(
  method: string,
  rest: string,
  headers: Record<string, string> = {},
): FuzzRequest {
  return { method, path: `/${sign(rest, KEY, SALT)}${rest}`, headers, signature: 'valid', rest };
}

/**
 * Fixed requests with known answers, run before the random ones: they prove the world is wired
 * as described (the inside file renders and shows its tag, the links out are refused) whatever
 * the random draw reaches.
 */
export function witnessRequests(): { req: FuzzRequest; status: number }[] {
  const tiny = '/t:0:0.05/plain/local://inside.wav';
  const etag = rightEtag('right', tiny);
  return [
    { req: signedRequest('GET', tiny), status: 200 },
    { req: signedRequest('HEAD', tiny), status: 200 },
    { req: signedRequest('GET', '/info/plain/local://inside.wav'), status: 200 },
    { req: signedRequest('GET', '/info/plain/local://sub/ok.wav'), status: 200 },
    { req: signedRequest('GET', tiny, { 'if-none-match': etag }), status: 304 },
    {
      req: { ...signedRequest('GET', tiny), signature: 'tampered', path: `/x${tiny}` },
      status: 401,
    },
    { req: signedRequest('GET', '/info/plain/local://escape.wav'), status: 404 },
    { req: signedRequest('GET', '/info/plain/local://up/canary.wav'), status: 404 },
    { req: signedRequest('GET', '/info/plain/local://abs.wav'), status: 404 },
    { req: signedRequest('GET', '/info/plain/local://..%2Fcanary.wav'), status: 404 },
    { req: signedRequest('GET', '/exp:1/plain/local://inside.wav'), status: 410 },
    { req: signedRequest('HEAD', '/plain/local://big.wav'), status: 413 },
    { req: signedRequest('GET', '/t:0:0.05/plain/local://garbage.txt'), status: 415 },
    { req: signedRequest('GET', '/f:xyz/plain/local://inside.wav'), status: 422 },
    { req: signedRequest('GET', '/plain/s3://bucket/key.wav'), status: 500 },
  ];
}
