/**
 * Content fuzzing, shared by `fuzzContent.test.ts` (CI, a couple of hundred cases) and
 * `bench/fuzz.ts --content N` (thousands): hostile *file contents*, not hostile URLs. Generated
 * malformed and lying containers (WAV, FLAC, MP3, Ogg headers claiming huge sizes, 0 or 65+
 * channels, rates of 1 Hz or 4 GHz; real files truncated and bit-flipped), HLS playlists, DASH
 * manifests, ffconcat and SDP files pointing outside the root and at other hosts, text, PNG and
 * JPEG images and random bytes, under lying names, served as `local://` files and as `https://`
 * sources from a loopback HTTPS server (a CA of its own, on the allowlist), some of which lie in
 * their HEAD or redirect their GET.
 *
 * ## Invariants (what `judgeContent` and the world's witnesses check)
 * - **Only the table's answers**, and **no 500 for content**: hostile content is a 4xx (415
 *   `undecodable_source`, 413, 404); a 502 is allowed only for an `https` source whose server
 *   misbehaved (a redirected GET, a lying HEAD), a 504 only as a timeout (counted).
 * - **Nothing outside the root is read**: the canary directory beside the root holds a WAV whose
 *   samples and title are a marker, and a text file; their access times are set before their
 *   modification times, so the first read moves them (`relatime`), and the world checks after
 *   every case. No response carries the marker.
 * - **Nothing off the allowlist is contacted**: an HTTP and an HTTPS canary server count every
 *   request: zero. The allowlist's one entry is the allowed server's `127.0.0.1:<port>`; the
 *   HTTPS canary is reached as `localhost` and as another port of `127.0.0.1` (where the
 *   redirecting GETs point).
 * - **ffmpeg reads only what was named**: a request to the allowed server for any path but the
 *   case's own is a stray read (a playlist followed, a redirect taken).
 * - **Output is bounded**: no body past `MAX_BODY_BYTES` (a 1 KB file claiming 1 Hz).
 * - Afterwards (the callers): no slot held or queued, no coordinator alive, no ffmpeg/ffprobe
 *   child, no staging file in the variant store, heap back within `HEAP_SLACK_BYTES`.
 *
 * ## Races
 * The canary checks attribute a read to the case that was in flight; with several cases in
 * flight (the bench) they count reads, not culprits.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { createServer as createHttpServer, request, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { resolveFfmpeg } from '../../src/workers/ffmpegPath.js';
import {
  FUZZ_KEY_HEX,
  FUZZ_ORIGIN,
  FUZZ_SALT_HEX,
  type FuzzResponse,
  judge,
  signedRequest,
} from './fuzzCases.js';

/** Sources above this are a 413: room for every generated case, far below a lie. */
export const CONTENT_MAX_SRC_BYTES = 1_000_000;
/** Reading stops here: a body this large from a few KB of input is amplification. */
export const MAX_BODY_BYTES = 16 * 1024 * 1024;
/** The world's per-render cap: four times the bound, so the bound is what trips first. */
const WORLD_MAX_VARIANT_BYTES = 4 * 16 * 1024 * 1024;
/** Heap growth tolerated over the run, after a full GC: the "idle + caches + 64 MiB". */
export const HEAP_SLACK_BYTES = 64 * 1024 * 1024;
/** Render and probe limits of the world: a hostile case is bounded by them, not by the fuzzer. */
const RENDER_TIMEOUT_S = 5;
const PROBE_TIMEOUT_S = 5;
const GENERATE_TIMEOUT_MS = 20_000;
/** Longest random payload behind a generated header, in bytes. */
const MAX_PAYLOAD_BYTES = 4_096;

export type Via = 'local' | 'https';
/** How the allowed HTTPS server answers for a case. */
export type Behaviour = 'honest' | 'head-small' | 'no-length' | 'get-redirect';

export interface ContentCase {
  readonly family: string;
  readonly bytes: Buffer;
  readonly ext: string;
  readonly via: Via;
  readonly behaviour: Behaviour;
  readonly method: 'GET' | 'HEAD';
  /** Options before `plain/…`, e.g. `f:wav/t:0:0.05`, or `info`. */
  readonly options: string;
}

export interface ContentWorld {
  readonly dir: string;
  readonly root: string;
  readonly store: string;
  readonly canaryMarker: string;
  readonly env: Record<string, string>;
  /** Writes or publishes the case; the signed request for it. */
  place(c: ContentCase, id: string): { method: string; path: string; rest: string };
  /** Whether a canary file was read since the last call (and re-arms the check). */
  canaryRead(): boolean;
  /** Requests the canary servers got (cumulative). */
  canaryHits(): number;
  /** Requests to the allowed server for anything but a case's own path (cumulative). */
  strayHits(): number;
  /** Whether the detectors work: one read of the canary file is seen, one request counted. */
  selfTest(): Promise<{ atime: boolean; hosts: boolean }>;
  /** Staging files left in the variant store. */
  staging(): number;
  close(): Promise<void>;
}

interface Served {
  readonly bytes: Buffer;
  readonly behaviour: Behaviour;
}

function listen(server: Server, host: string): Promise<number> {
  return new Promise((resolve) =>
    server.listen(0, host, () => resolve((server.address() as AddressInfo).port)),
  );
}

/**
 * Builds the world:
 * ```
 * dir/canary/secret.wav   samples and title = marker (outside the root)
 * dir/canary/secret.txt   the marker as text
 * dir/root/               AP_LOCAL_ROOT; cases are written to root/cases/
 * dir/root/inside.wav     a real file a playlist may legitimately name
 * dir/store/              AP_VARIANT_STORE (file://, proxy mode): staging is checked
 * dir/tls/                a self-signed certificate for 127.0.0.1 and localhost (the CA bundle)
 * https://127.0.0.1:A     the allowed source server (/c/<case>)
 * https://localhost:B     canary: not on the allowlist (also as https://127.0.0.1:B)
 * http://127.0.0.1:C      canary: not https at all
 * ```
 */
export async function makeContentWorld(): Promise<ContentWorld> {
  const dir = mkdtempSync(join(tmpdir(), 'ap-fuzz-content-'));
  const root = join(dir, 'root');
  const canaryDir = join(dir, 'canary');
  const store = join(dir, 'store');
  const tls = join(dir, 'tls');
  for (const d of [join(root, 'cases'), canaryDir, store, tls]) mkdirSync(d, { recursive: true });
  const canaryMarker = `CANARY${randomBytes(8).toString('hex')}`;
  const ffmpeg = resolveFfmpeg({ env: process.env }).path;

  // The canary WAV: its samples are the marker repeated, so a PCM render would carry it.
  const samples = Buffer.alloc(44_100 * 2, Buffer.from(canaryMarker));
  const raw = join(dir, 'canary.raw');
  writeFileSync(raw, samples);
  const canaryWav = join(canaryDir, 'secret.wav');
  const canaryTxt = join(canaryDir, 'secret.txt');
  execFileSync(
    ffmpeg,
    [
      ...['-nostdin', '-hide_banner', '-loglevel', 'error', '-y'],
      ...['-f', 's16le', '-ar', '44100', '-ac', '1', '-i', raw],
      ...['-metadata', `title=${canaryMarker}`, '-c:a', 'pcm_s16le', canaryWav],
    ],
    { timeout: GENERATE_TIMEOUT_MS },
  );
  rmSync(raw);
  writeFileSync(canaryTxt, `${canaryMarker}\n`);
  const canaries = [canaryWav, canaryTxt];
  const arm = () => {
    const past = new Date('2001-01-01T00:00:00Z');
    for (const f of canaries) utimesSync(f, past, new Date());
  };
  arm();
  const armedAtime = () => canaries.map((f) => statSync(f).atimeMs);
  let armed = armedAtime();

  execFileSync(
    ffmpeg,
    [
      ...['-nostdin', '-hide_banner', '-loglevel', 'error', '-y'],
      ...['-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=44100:duration=1'],
      ...['-c:a', 'pcm_s16le', join(root, 'inside.wav')],
    ],
    { timeout: GENERATE_TIMEOUT_MS },
  );
  execFileSync(
    'openssl',
    [
      ...['req', '-x509', '-newkey', 'rsa:2048', '-nodes'],
      ...['-keyout', join(tls, 'key.pem'), '-out', join(tls, 'cert.pem'), '-days', '1'],
      ...['-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1'],
    ],
    { stdio: 'ignore' },
  );
  makeSeeds(ffmpeg, dir);
  const tlsOptions = {
    key: readFileSync(join(tls, 'key.pem')),
    cert: readFileSync(join(tls, 'cert.pem')),
  };

  let canaryHits = 0;
  const canaryHandler = (_req: unknown, res: import('node:http').ServerResponse) => {
    canaryHits += 1;
    res.writeHead(200, { 'content-type': 'audio/wav', 'content-length': 0 });
    res.end();
  };
  const canaryHttp = createHttpServer(canaryHandler);
  const canaryHttps = createHttpsServer(tlsOptions, canaryHandler);
  const canaryHttpPort = await listen(canaryHttp, '127.0.0.1');
  const canaryHttpsPort = await listen(canaryHttps, '127.0.0.1');
  const canaryHttpUrl = `http://127.0.0.1:${canaryHttpPort}`;
  // The same canary by a name off the allowlist, and on another port of the allowed host.
  const canaryHttpsUrl = `https://localhost:${canaryHttpsPort}`;
  const canaryOtherPortUrl = `https://127.0.0.1:${canaryHttpsPort}`;

  const served = new Map<string, Served>();
  let strayHits = 0;
  const allowed = createHttpsServer(tlsOptions, (req, res) => {
    const path = (req.url ?? '').split('?')[0]!;
    const s = served.get(path);
    if (!s) {
      strayHits += 1;
      res.writeHead(404);
      res.end();
      return;
    }
    const head = req.method === 'HEAD';
    const length = s.bytes.length;
    if (!head && s.behaviour === 'get-redirect') {
      res.writeHead(302, { location: `${canaryOtherPortUrl}/redirected.wav` });
      res.end();
      return;
    }
    const headers: Record<string, string | number> = { 'content-type': 'audio/mpeg' };
    if (s.behaviour !== 'no-length') {
      headers['content-length'] = head && s.behaviour === 'head-small' ? 16 : length;
    }
    if (head) {
      res.writeHead(200, headers);
      res.end();
      return;
    }
    if (s.behaviour === 'head-small') delete headers['content-length'];
    res.writeHead(200, headers);
    res.end(s.bytes);
  });
  const allowedPort = await listen(allowed, '127.0.0.1');
  const allowedUrl = `https://127.0.0.1:${allowedPort}`;
  targets = targetsFor({
    canaryWav,
    canaryHttpUrl,
    canaryHttpsUrl,
    canaryOtherPortUrl,
    allowedUrl,
  });

  const servers = [canaryHttp, canaryHttps, allowed];
  const world: ContentWorld = {
    dir,
    root,
    store,
    canaryMarker,
    env: {
      AP_KEY: FUZZ_KEY_HEX,
      AP_SALT: FUZZ_SALT_HEX,
      AP_ALLOW_INSECURE: '0',
      AP_LOCAL_ROOT: root,
      AP_ALLOW_ORIGIN: FUZZ_ORIGIN,
      AP_MAX_SRC_BYTES: String(CONTENT_MAX_SRC_BYTES),
      // Above the amplification bound, so a render's own cap cannot hide amplification.
      AP_MAX_VARIANT_BYTES: String(WORLD_MAX_VARIANT_BYTES),
      // One origin: the allowed server's port only (the canary on another port is not on it).
      AP_SOURCE_ALLOWLIST: `127.0.0.1:${allowedPort}`,
      AP_SOURCE_ALLOW_PRIVATE: '1', // every server here is on loopback
      AP_S3_CA_BUNDLE: join(tls, 'cert.pem'),
      AP_VARIANT_STORE: `file://${store}`,
      AP_SERVE_MODE: 'proxy',
      AP_RENDER_TIMEOUT: String(RENDER_TIMEOUT_S),
      AP_PROBE_TIMEOUT: String(PROBE_TIMEOUT_S),
      AP_LOG_LEVEL: 'error',
    },
    place(c, id) {
      const name = `${id}${c.ext}`;
      let source: string;
      if (c.via === 'local') {
        writeFileSync(join(root, 'cases', name), c.bytes);
        source = `local://cases/${name}`;
      } else {
        served.set(`/c/${name}`, { bytes: c.bytes, behaviour: c.behaviour });
        source = `${allowedUrl}/c/${name}`;
      }
      const rest = `/${c.options}/plain/${source}`;
      const req = signedRequest(c.method, rest);
      return { method: c.method, path: req.path, rest };
    },
    canaryRead() {
      const now = armedAtime();
      const read = now.some((t, i) => t !== armed[i]);
      if (read) {
        arm();
        armed = armedAtime();
      }
      return read;
    },
    canaryHits: () => canaryHits,
    strayHits: () => strayHits,
    async selfTest() {
      readFileSync(canaryWav);
      const atime = world.canaryRead();
      const before = canaryHits;
      await new Promise<void>((resolve) => {
        const r = request(`${canaryHttpUrl}/self-test`, (res) => {
          res.resume();
          res.on('end', resolve);
        });
        r.on('error', () => resolve());
        r.end();
      });
      const hosts = canaryHits === before + 1;
      canaryHits = before; // the self-test is not a violation
      return { atime, hosts };
    },
    staging() {
      try {
        return readdirSync(join(store, 'tmp')).length;
      } catch {
        return 0;
      }
    },
    async close() {
      for (const s of servers) {
        s.closeAllConnections();
        await new Promise((r) => s.close(r));
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return world;
}

// ---------------------------------------------------------------------------------------------
// Generators

/** Where a playlist, manifest or concat file may point: out of the root, off the allowlist. */
let targets: readonly string[] = [];

function targetsFor(w: {
  canaryWav: string;
  canaryHttpUrl: string;
  canaryHttpsUrl: string;
  canaryOtherPortUrl: string;
  allowedUrl: string;
}): string[] {
  return [
    '../canary/secret.wav',
    '../../canary/secret.wav',
    '../../../canary/secret.wav',
    '../../../canary/secret.txt',
    w.canaryWav,
    `file://${w.canaryWav}`,
    `file:${w.canaryWav}`,
    `concat:${w.canaryWav}|${w.canaryWav}`,
    `subfile,,start,0,end,0,,:${w.canaryWav}`,
    `${w.canaryHttpUrl}/hls.wav`,
    `${w.canaryHttpsUrl}/hls.wav`,
    `${w.canaryOtherPortUrl}/hls.wav`,
    `${w.allowedUrl}/elsewhere.wav`,
    '../inside.wav',
    'inside.wav',
  ];
}

const u16 = (n: number) => {
  const b = Buffer.alloc(2);
  b.writeUInt16LE(n & 0xffff);
  return b;
};
const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n >>> 0);
  return b;
};

const CHANNELS = [0, 1, 2, 6, 8, 63, 64, 65, 128, 255, 65_535];
const RATES = [
  0, 1, 2, 8_000, 44_100, 48_000, 96_000, 384_000, 1_000_000, 4_000_000_000, 0xffffffff,
];
const BITS = [0, 1, 7, 8, 16, 24, 32, 33, 64, 65_535];
const SIZES = [0, 1, 36, 1_000, 0x7fffffff, 0xfffffffe, 0xffffffff];

const payload = fc.uint8Array({ maxLength: MAX_PAYLOAD_BYTES }).map((a) => Buffer.from(a));

/** A RIFF/WAVE header whose every field may lie. */
const wavArb = fc
  .record({
    riffSize: fc.constantFrom(...SIZES),
    fmtSize: fc.constantFrom(16, 18, 40, 0, 0xffffffff),
    format: fc.constantFrom(1, 3, 6, 7, 0x55, 0xfffe, 0, 0xffff),
    channels: fc.constantFrom(...CHANNELS),
    rate: fc.constantFrom(...RATES),
    byteRate: fc.constantFrom(0, 1, 176_400, 0xffffffff),
    align: fc.constantFrom(0, 1, 2, 4, 0xffff),
    bits: fc.constantFrom(...BITS),
    dataSize: fc.constantFrom(...SIZES),
    data: payload,
  })
  .map((w) =>
    Buffer.concat([
      Buffer.from('RIFF'),
      u32(w.riffSize),
      Buffer.from('WAVEfmt '),
      u32(w.fmtSize),
      u16(w.format),
      u16(w.channels),
      u32(w.rate),
      u32(w.byteRate),
      u16(w.align),
      u16(w.bits),
      ...(w.fmtSize === 18 ? [u16(0)] : []),
      Buffer.from('data'),
      u32(w.dataSize),
      w.data,
    ]),
  );

/**
 * A WAV that is internally consistent (PCM, true sizes, matching byte rate and alignment) and
 * lies only about the world: 1 Hz or 4 GHz, 64 or 65+ channels. The decoder believes it.
 */
const coherentWavArb = fc
  .record({
    channels: fc.constantFrom(1, 2, 8, 64, 65, 200),
    rate: fc.constantFrom(1, 2, 100, 8_000, 4_000_000_000),
    bits: fc.constantFrom(8, 16, 24, 32),
    frames: fc.integer({ min: 1, max: 512 }),
  })
  .map((w) => {
    const align = (w.channels * w.bits) / 8;
    const data = Buffer.alloc(Math.min(align * w.frames, MAX_PAYLOAD_BYTES * 4), 0x11);
    return Buffer.concat([
      Buffer.from('RIFF'),
      u32(36 + data.length),
      Buffer.from('WAVEfmt '),
      u32(16),
      u16(1),
      u16(w.channels),
      u32(w.rate),
      u32(w.rate * align),
      u16(align),
      u16(w.bits),
      Buffer.from('data'),
      u32(data.length),
      data,
    ]);
  });

/** fLaC + STREAMINFO with lying rate (20 bits), channels (3 bits), depth and total samples. */
const flacArb = fc
  .record({
    minBlock: fc.constantFrom(0, 1, 16, 4096, 65_535),
    maxBlock: fc.constantFrom(0, 1, 16, 4096, 65_535),
    rate: fc.constantFrom(0, 1, 2, 8_000, 44_100, 655_350, 1_048_575),
    channels: fc.integer({ min: 1, max: 8 }),
    bits: fc.integer({ min: 1, max: 32 }),
    total: fc.constantFrom(0, 1, 44_100, 2 ** 32, 2 ** 36 - 1),
    last: fc.boolean(),
    frames: payload,
  })
  .map((f) => {
    const info = Buffer.alloc(34);
    info.writeUInt16BE(f.minBlock, 0);
    info.writeUInt16BE(f.maxBlock, 2);
    // bytes 4..9: min/max frame size (24 bits each), left 0 = unknown
    const packed =
      (BigInt(f.rate) << 44n) |
      (BigInt(f.channels - 1) << 41n) |
      (BigInt(f.bits - 1) << 36n) |
      BigInt(f.total);
    info.writeBigUInt64BE(packed, 10);
    const header = Buffer.from([f.last ? 0x80 : 0x00, 0, 0, 34]);
    return Buffer.concat([Buffer.from('fLaC'), header, info, f.frames]);
  });

/** An ID3v2 tag claiming any size, then MPEG audio frame headers with any indexes. */
const mp3Arb = fc
  .record({
    id3: fc.boolean(),
    id3Size: fc.constantFrom(0, 10, 1_000, 0x0fffffff),
    frames: fc.array(
      fc.record({
        version: fc.integer({ min: 0, max: 3 }),
        layer: fc.integer({ min: 0, max: 3 }),
        bitrate: fc.integer({ min: 0, max: 15 }),
        rate: fc.integer({ min: 0, max: 3 }),
        mode: fc.integer({ min: 0, max: 3 }),
        body: fc.uint8Array({ maxLength: 700 }),
      }),
      { minLength: 1, maxLength: 8 },
    ),
  })
  .map((m) => {
    const parts: Buffer[] = [];
    if (m.id3) {
      const s = m.id3Size;
      const syncsafe = [(s >> 21) & 0x7f, (s >> 14) & 0x7f, (s >> 7) & 0x7f, s & 0x7f];
      parts.push(Buffer.from([0x49, 0x44, 0x33, 4, 0, 0, ...syncsafe]));
    }
    for (const f of m.frames) {
      const b1 = 0xe0 | (f.version << 3) | (f.layer << 1) | 1;
      const b2 = (f.bitrate << 4) | (f.rate << 2);
      parts.push(Buffer.from([0xff, b1, b2, f.mode << 6]), Buffer.from(f.body));
    }
    return Buffer.concat(parts);
  });

/** An Ogg page carrying a Vorbis or Opus identification header with lying fields. */
const oggArb = fc
  .record({
    codec: fc.constantFrom('vorbis', 'opus'),
    granule: fc.constantFrom(0n, 1n, 2n ** 63n - 1n, 2n ** 64n - 1n),
    channels: fc.integer({ min: 0, max: 255 }),
    rate: fc.constantFrom(...RATES),
    mapping: fc.integer({ min: 0, max: 255 }),
    segments: fc.integer({ min: 0, max: 255 }),
    rest: payload,
  })
  .map((o) => {
    const id =
      o.codec === 'vorbis'
        ? Buffer.concat([
            Buffer.from([1]),
            Buffer.from('vorbis'),
            u32(0),
            Buffer.from([o.channels]),
            u32(o.rate),
            u32(0),
            u32(0),
            u32(0),
            Buffer.from([0xb8, 1]),
          ])
        : Buffer.concat([
            Buffer.from('OpusHead'),
            Buffer.from([1, o.channels]),
            u16(312),
            u32(o.rate),
            u16(0),
            Buffer.from([o.mapping]),
          ]);
    const header = Buffer.alloc(27);
    header.write('OggS', 0);
    header[5] = 0x02; // beginning of stream
    header.writeBigUInt64LE(o.granule, 6);
    header.writeUInt32LE(0x1234, 14);
    header[26] = 1;
    return Buffer.concat([header, Buffer.from([Math.min(o.segments, id.length)]), id, o.rest]);
  });

const targetArb = fc.integer({ min: 0, max: 1_000 }).map((i) => {
  if (targets.length === 0) throw new Error('content cases need a world: makeContentWorld() first');
  return targets[i % targets.length]!;
});

const hlsArb = fc
  .record({
    items: fc.array(targetArb, { minLength: 1, maxLength: 3 }),
    key: fc.option(targetArb, { nil: undefined }),
  })
  .map(({ items, key }) =>
    Buffer.from(
      [
        '#EXTM3U',
        '#EXT-X-VERSION:3',
        '#EXT-X-TARGETDURATION:1',
        ...(key ? [`#EXT-X-KEY:METHOD=AES-128,URI="${key}"`] : []),
        ...items.flatMap((t) => ['#EXTINF:1.0,', t]),
        '#EXT-X-ENDLIST',
        '',
      ].join('\n'),
    ),
  );

const dashArb = targetArb.map((t) =>
  Buffer.from(
    `<?xml version="1.0"?>
<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT1S" minBufferTime="PT1S" profiles="urn:mpeg:dash:profile:isoff-on-demand:2011">
  <Period><AdaptationSet mimeType="audio/wav"><Representation id="a" bandwidth="1000">
    <BaseURL>${t}</BaseURL>
  </Representation></AdaptationSet></Period>
</MPD>
`,
  ),
);

const concatArb = fc
  .array(targetArb, { minLength: 1, maxLength: 3 })
  .map((items) =>
    Buffer.from(
      ['ffconcat version 1.0', ...items.map((t) => `file '${t.replace(/'/g, "'\\''")}'`), ''].join(
        '\n',
      ),
    ),
  );

/** An SDP asking for RTP from a canary port: a network read by content. */
const sdpArb = fc.constant(null).map(() => {
  const port = Number(new URL(targets.find((t) => t.startsWith('http://')) ?? 'http://x:9').port);
  return Buffer.from(
    `v=0\no=- 0 0 IN IP4 127.0.0.1\ns=x\nc=IN IP4 127.0.0.1\nt=0 0\nm=audio ${port} RTP/AVP 0\n`,
  );
});

const textArb = fc.oneof(
  fc.string({ maxLength: 2_000 }).map((s) => Buffer.from(s)),
  fc.constant(Buffer.from('Lorem ipsum dolor sit amet.\n'.repeat(80))),
);

/** A valid 1×1 PNG and a valid tiny JPEG, then cut or extended. */
const PNG_1x1 = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==',
  'base64',
);
const JPEG_TINY = Buffer.from(
  '/9j/4AAQSkZJRgABAQEASABIAAD/2wBDAP//////////////////////////////////////////////////////////////////////////////////////wgALCAABAAEBAREA/8QAFBABAAAAAAAAAAAAAAAAAAAAAP/aAAgBAQABPxA=',
  'base64',
);
const imageArb = fc
  .record({ image: fc.constantFrom(PNG_1x1, JPEG_TINY), cut: fc.nat(), tail: payload })
  .map(({ image, cut, tail }) =>
    cut % 3 === 0 ? image : Buffer.concat([image.subarray(0, cut % image.length), tail]),
  );

const randomArb = payload;

/** Real tiny files (made once by the world), truncated and bit-flipped. */
let seeds: Buffer[] = [];
export function makeSeeds(ffmpeg: string, dir: string): void {
  const out: Buffer[] = [];
  for (const [ext, codec] of [
    ['wav', ['-c:a', 'pcm_s16le']],
    ['flac', ['-c:a', 'flac']],
    ['mp3', ['-c:a', 'libmp3lame']],
    ['ogg', ['-c:a', 'libvorbis']],
    ['opus', ['-c:a', 'libopus']],
  ] as const) {
    const file = join(dir, `seed.${ext}`);
    execFileSync(
      ffmpeg,
      [
        ...['-nostdin', '-hide_banner', '-loglevel', 'error', '-y'],
        ...['-f', 'lavfi', '-i', 'sine=frequency=330:sample_rate=48000:duration=0.3'],
        ...codec,
        file,
      ],
      { timeout: GENERATE_TIMEOUT_MS },
    );
    out.push(readFileSync(file));
  }
  seeds = out;
}

const mutatedArb = fc
  .record({
    seed: fc.nat(),
    cut: fc.double({ min: 0, max: 1, noNaN: true }),
    flips: fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 8 }),
  })
  .map(({ seed, cut, flips }) => {
    const base = Buffer.from(seeds[seed % Math.max(1, seeds.length)] ?? Buffer.alloc(0));
    for (const [at, v] of flips) if (base.length > 0) base[at % base.length] = v;
    return base.subarray(0, Math.max(1, Math.floor(base.length * cut)));
  });

const FAMILIES = {
  wav: wavArb,
  liar: coherentWavArb,
  flac: flacArb,
  mp3: mp3Arb,
  ogg: oggArb,
  hls: hlsArb,
  dash: dashArb,
  concat: concatArb,
  sdp: sdpArb,
  text: textArb,
  image: imageArb,
  random: randomArb,
  mutated: mutatedArb,
} as const;

const EXTENSIONS = ['.mp3', '.wav', '.flac', '.ogg', '.opus', '.m4a', '.m3u8', '.mpd', '.txt', ''];

const OPTIONS = [
  { weight: 6, arbitrary: fc.constant('f:wav/t:0:0.05') },
  { weight: 2, arbitrary: fc.constant('info') },
  { weight: 1, arbitrary: fc.constant('f:mp3/t:0:0.05') },
  { weight: 1, arbitrary: fc.constant('f:opus/t:0:0.05') },
  { weight: 1, arbitrary: fc.constant('f:flac/sr:8000/ch:1/t:0:0.05') },
  { weight: 1, arbitrary: fc.constant('f:peaks/t:0:0.05') },
  // Untrimmed: the output is as long as the source claims (the amplification check).
  { weight: 1, arbitrary: fc.constantFrom('f:wav', 'f:mp3', 'f:flac', 'f:wav/sr:384000') },
];

/** A coherent liar is asked for what it claims: its whole length, at the highest rate. */
const LIAR_OPTIONS = fc.constantFrom('f:wav/sr:384000', 'f:mp3', 'f:wav', 'info', 'f:wav/t:0:0.05');

export const contentCaseArb: fc.Arbitrary<ContentCase> = fc
  .constantFrom(...(Object.keys(FAMILIES) as (keyof typeof FAMILIES)[]))
  .chain((family) =>
    fc.record({
      family: fc.constant(family),
      bytes: FAMILIES[family] as fc.Arbitrary<Buffer>,
      ext: fc.constantFrom(...EXTENSIONS),
      via: fc.constantFrom<Via>('local', 'local', 'https'),
      behaviour: fc.constantFrom<Behaviour>(
        'honest',
        'honest',
        'head-small',
        'no-length',
        'get-redirect',
      ),
      method: fc.constantFrom<'GET' | 'HEAD'>('GET', 'GET', 'GET', 'HEAD'),
      options: family === 'liar' ? LIAR_OPTIONS : fc.oneof(...OPTIONS),
    }),
  )
  .map((c) => (c.via === 'local' ? { ...c, behaviour: 'honest' as const } : c));

// ---------------------------------------------------------------------------------------------
// The oracle

export interface ContentResponse extends FuzzResponse {
  /** The body was cut at MAX_BODY_BYTES. */
  readonly truncated: boolean;
}

/** GET/HEAD with node:http, the body read up to `MAX_BODY_BYTES` (then the socket is cut). */
export function fetchCapped(
  base: string,
  method: string,
  path: string,
  timeoutMs: number,
): Promise<ContentResponse> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const r = request({ host: url.hostname, port: url.port, path, method, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      let truncated = false;
      const done = () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks),
          truncated,
        });
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_BODY_BYTES) {
          truncated = true;
          res.destroy();
          done();
          return;
        }
        chunks.push(c);
      });
      res.on('end', done);
      res.on('aborted', done);
      res.on('error', done);
    });
    r.setTimeout(timeoutMs, () => r.destroy(new Error(`no answer in ${timeoutMs} ms`)));
    r.on('error', reject);
    r.end();
  });
}

/** The per-request time limit of the fuzzer: past the world's own deadlines. */
export const CASE_TIMEOUT_MS = (RENDER_TIMEOUT_S + PROBE_TIMEOUT_S + 10) * 1000;

export type ContentVerdict = { problems: string[]; error?: string };

/** Judges one content exchange (the canary and host checks are the caller's, after it). */
export function judgeContent(
  world: Pick<ContentWorld, 'canaryMarker'>,
  c: ContentCase,
  placed: { method: string; path: string; rest: string },
  res: ContentResponse,
): ContentVerdict {
  const base = judge(
    { canaryMarker: world.canaryMarker },
    {
      method: placed.method,
      path: placed.path,
      headers: {},
      signature: 'valid',
      rest: placed.rest,
    },
    res,
  );
  const problems = base.problems.filter((p) => !p.startsWith('5xx for client input'));
  const error = base.error;
  if (res.status >= 500) {
    const misbehaved = c.via === 'https' && c.behaviour !== 'honest';
    const timeout = res.status === 504;
    const upstream = res.status === 502 && misbehaved;
    if (!timeout && !upstream) {
      problems.push(`hostile content earned a ${res.status} ${error ?? ''}`.trim());
    }
  }
  if (res.truncated) problems.push(`amplification: body past ${MAX_BODY_BYTES} bytes`);
  return { problems, ...(error ? { error } : {}) };
}

/** Live (non-zombie) ffmpeg/ffprobe children of this process, asked of /proc. */
export function liveMediaChildren(): number {
  let n = 0;
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(ppid) === process.pid && state !== 'Z' && /^ff(mpeg|probe)/.test(comm)) n += 1;
    } catch {
      // the process ended while we looked
    }
  }
  return n;
}

/** A full GC, when the flag can be turned on at run time (it can in Node ≥ 18). */
export async function fullGc(): Promise<void> {
  const v8 = await import('node:v8');
  const vm = await import('node:vm');
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  for (let i = 0; i < 3; i++) {
    gc();
    await new Promise((r) => setImmediate(r));
  }
}

/** A short label of a case, for reports: family, name, route, server behaviour. */
export function describeCase(c: ContentCase): string {
  const how = c.via === 'https' ? `https/${c.behaviour}` : 'local';
  return `${c.family} as *${c.ext || '(none)'} via ${how}: ${c.method} ${c.options} (${c.bytes.length} B)`;
}
