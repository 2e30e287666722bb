/**
 * What ffmpeg can do, read from the real binaries: Debian's 5.1 lists every part the options
 * need, the npm fallback (a 2018 build) lacks only `deesser`, so `enhance:voice` alone is refused
 * there, blamed on the option and the filter. Requirements come from the argv builder; an
 * unreadable listing (a binary that prints nothing, fails, hangs or floods) refuses nothing; a
 * listing is spawned once per path; a source's container and codec are checked by name.
 */
import { chmod, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_NORM, FORMATS, type RenderOptions } from '../../src/core/variant.js';
import { parseOptions } from '../../src/http/options.js';
import { buildRenderArgv, FD_INPUT_PATH } from '../../src/workers/argv.js';
import {
  type CapabilityListing,
  type CapabilityReading,
  componentsOf,
  EncoderCapabilities,
  parseCodecs,
  parseFilters,
  parseFormats,
  parseVersion,
  readCapabilities,
  requiredComponents,
} from '../../src/workers/capabilities.js';

const require = createRequire(import.meta.url);
const NPM_FFMPEG = (require('@ffmpeg-installer/ffmpeg') as { path: string }).path;
const SYSTEM_FFMPEG = '/usr/bin/ffmpeg';

const options = (path: string): RenderOptions => {
  const parsed = parseOptions(path);
  if (!parsed.ok) throw new Error(parsed.message);
  return parsed.options;
};
const listingOf = (r: CapabilityReading): CapabilityListing => {
  if (!r.ok) throw new Error(r.reason);
  return r.listing;
};

let system: EncoderCapabilities;
let npm: EncoderCapabilities;
beforeAll(async () => {
  system = new EncoderCapabilities(await readCapabilities(SYSTEM_FFMPEG));
  npm = new EncoderCapabilities(await readCapabilities(NPM_FFMPEG));
});

describe('parsing the listings', () => {
  it('reads both real binaries: version, filters, encoders, muxers, decoders, demuxers', () => {
    for (const caps of [system, npm]) {
      const l = caps.listing!;
      expect(l.filters.size).toBeGreaterThan(300);
      for (const f of ['loudnorm', 'afade', 'apad', 'aformat', 'pan', 'volume', 'afftdn']) {
        expect(l.filters.has(f), f).toBe(true);
      }
      for (const e of ['libmp3lame', 'libopus', 'libvorbis', 'aac', 'flac', 'pcm_s24le']) {
        expect(l.encoders.has(e), e).toBe(true);
      }
      for (const m of ['mp3', 'ogg', 'adts', 'mp4', 'flac', 'wav', 's16le']) {
        expect(l.muxers.has(m), m).toBe(true);
      }
      // Decoders are named by codec: `dca` decodes dts, `mp3float` mp3, `amrnb` amr_nb.
      for (const c of ['dts', 'mp3', 'amr_nb', 'opus', 'vorbis', 'pcm_s16le', 'alac']) {
        expect(l.decoders.has(c), c).toBe(true);
      }
      // Each name of a demuxer's list counts.
      for (const d of ['mov', 'mp4', 'm4a', 'matroska', 'webm', 'wav', 'ogg']) {
        expect(l.demuxers.has(d), d).toBe(true);
      }
      expect(l.muxers.has('3dostr')).toBe(false); // demux-only
      expect(l.demuxers.has('adts')).toBe(false); // mux-only
    }
    expect(system.listing!.version).toMatch(/^5\.1/);
    expect(npm.listing!.version).toBe('N-47683-g0e8eb07980-static');
    expect(system.listing!.filters.has('deesser')).toBe(true);
    expect(npm.listing!.filters.has('deesser')).toBe(false);
  });

  it('parses each listing line shape and skips the legends', () => {
    const filters = [
      'Filters:',
      '  T.. = Timeline support',
      '  A = Audio input/output',
      '  | = Source or sink filter',
      ' ..C acompressor       A->A       Audio compressor.',
      ' ... abuffer           |->A       Buffer audio frames.',
      ' TSC afftdn            A->A       Denoise audio samples.',
      ' ... amix              N->A       Audio mixing.',
    ].join('\n');
    expect([...parseFilters(filters)]).toEqual(['acompressor', 'abuffer', 'afftdn', 'amix']);
    const codecs = [
      'Decoders:',
      ' V..... = Video',
      ' A..... = Audio',
      ' ------',
      ' A....D dca                  DCA (DTS Coherent Acoustics) (codec dts)',
      ' A....D flac                 FLAC (Free Lossless Audio Codec)',
    ].join('\n');
    expect(parseCodecs(codecs)).toEqual({
      names: new Set(['dca', 'flac']),
      codecs: new Set(['dts', 'flac']),
    });
    const formats = [
      'File formats:',
      ' D. = Demuxing supported',
      ' .E = Muxing supported',
      ' --',
      ' D  aac             raw ADTS AAC (Advanced Audio Coding)',
      '  E adts            ADTS AAC (Advanced Audio Coding)',
      ' DE wav             WAV / WAVE (Waveform Audio)',
      ' D  mov,mp4,m4a,3gp,3g2,mj2 QuickTime / MOV',
      ' D d alsa            ALSA audio input', // a device column (ffmpeg 6.1 and later)
    ].join('\n');
    expect(parseFormats(formats)).toEqual({
      demuxers: new Set(['aac', 'wav', 'mov', 'mp4', 'm4a', '3gp', '3g2', 'mj2', 'alsa']),
      muxers: new Set(['adts', 'wav']),
    });
    expect(parseVersion('ffmpeg version 7.1.1 Copyright (c) 2000-2025')).toBe('7.1.1');
    expect(parseVersion('no banner')).toBeUndefined();
  });
});

describe('what an option needs', () => {
  it('is read off the argv the builder makes', () => {
    const argv = buildRenderArgv(options('f:m4a/norm:ebu/fade:1:1/t:0:5'), {
      url: FD_INPUT_PATH,
      kind: 'local',
      sampleRate: 44_100,
      channels: 2,
    });
    expect(componentsOf(argv)).toEqual([
      { kind: 'filter', name: 'loudnorm' },
      { kind: 'filter', name: 'aformat' },
      { kind: 'filter', name: 'afade' },
      { kind: 'filter', name: 'afade' },
      { kind: 'filter', name: 'apad' },
      { kind: 'encoder', name: 'aac' },
      { kind: 'muxer', name: 'mp4' },
    ]);
    const names = (o: string) => requiredComponents(options(o)).map((c) => `${c.kind} ${c.name}`);
    expect(names('f:mp3')).toEqual(
      expect.arrayContaining(['encoder libmp3lame', 'muxer mp3', 'filter pan']),
    );
    expect(names('f:wav')).toEqual(
      expect.arrayContaining(['encoder pcm_s16le', 'encoder pcm_s24le', 'muxer wav']),
    );
    expect(names('f:wav/bd:32f')).toContain('encoder pcm_f32le');
    expect(names('f:peaks')).toEqual(expect.arrayContaining(['encoder pcm_s16le', 'muxer s16le']));
    expect(names('f:opus/enhance:voice')).toEqual(
      expect.arrayContaining([
        'filter highpass',
        'filter afftdn',
        'filter deesser',
        'filter acompressor',
        'filter alimiter',
        'encoder libopus',
        'muxer ogg',
      ]),
    );
  });
});

describe('EncoderCapabilities', () => {
  it('refuses nothing on Debian 5.1: every option of every format is supported', () => {
    expect(system.missing()).toEqual({});
    expect(system.summary()).toBe('every option is supported');
    for (const format of FORMATS) {
      expect(system.refusal({ format, enhance: 'voice', norm: DEFAULT_NORM })).toBeUndefined();
    }
  });

  it('on the npm fallback refuses enhance:voice alone, naming the option and the filter', () => {
    expect(npm.missing()).toEqual({ 'enhance:voice': ['filter deesser'] });
    expect(npm.summary()).toBe(
      'unsupported here, answered 501 unsupported_option: enhance:voice (filter deesser)',
    );
    expect(npm.refusal(options('f:mp3/ch:1/br:64/enhance:voice/norm:ebu/t:0:5'))).toEqual({
      option: 'enhance:voice',
      component: { kind: 'filter', name: 'deesser' },
      message:
        'enhance:voice needs the ffmpeg filter "deesser", which this server\'s ffmpeg does not have',
    });
    for (const format of FORMATS) {
      expect(npm.refusal({ format })).toBeUndefined();
      expect(npm.refusal({ format, enhance: 'voice' })?.option).toBe('enhance:voice');
    }
    expect(npm.refusal(options('f:flac/norm:ebu/fade:1:1/t:0:3/sr:22050/gain:-3'))).toBeUndefined();
  });

  it('blames the option whose removal drops the missing part, else the format', () => {
    const lacking = (kind: keyof CapabilityListing, name: string) => {
      const l = listingOf({ ok: true, listing: system.listing! });
      const set = new Set(l[kind] as ReadonlySet<string>);
      set.delete(name);
      return new EncoderCapabilities({ ok: true, listing: { ...l, [kind]: set } });
    };
    const noOpus = lacking('encoders', 'libopus');
    expect(noOpus.missing()).toEqual({ 'f:opus': ['encoder libopus'] });
    expect(noOpus.refusal(options('f:opus/t:0:5'))).toMatchObject({
      option: 'f:opus',
      message:
        'f:opus needs the ffmpeg encoder "libopus", which this server\'s ffmpeg does not have',
    });
    const noFade = lacking('filters', 'afade');
    expect(noFade.refusal(options('f:mp3/fade:1:1/t:0:5'))?.option).toBe('fade');
    const noPad = lacking('filters', 'apad');
    expect(noPad.missing()).toEqual({ t: ['filter apad'] });
    expect(noPad.refusal(options('f:mp3/fade:1:1/t:0:5'))?.option).toBe('t');
    const noF32 = lacking('encoders', 'pcm_f32le');
    expect(noF32.missing()).toEqual({ 'bd:32f': ['encoder pcm_f32le'] });
    expect(noF32.refusal(options('f:wav/bd:32f'))?.option).toBe('bd:32f');
    expect(noF32.refusal(options('f:wav/bd:24'))).toBeUndefined();
    const noLoudnorm = lacking('filters', 'loudnorm');
    expect(noLoudnorm.refusal(options('f:ogg/norm:ebu:-20/gain:2'))?.option).toBe('norm');
    const noMp4 = lacking('muxers', 'mp4');
    expect(noMp4.refusal(options('f:m4a'))?.message).toContain(
      'f:m4a needs the ffmpeg muxer "mp4"',
    );
    expect(noMp4.refusal(options('f:aac'))).toBeUndefined();
  });

  it('checks a source by its demuxer names and its codec', () => {
    expect(npm.canRead({ demuxer: 'mov,mp4,m4a,3gp,3g2,mj2', codec: 'alac' })).toBe(true);
    expect(npm.canRead({ demuxer: 'wav', codec: 'pcm_s16le' })).toBe(true);
    expect(npm.canRead({ demuxer: 'wav', codec: 'no_such_codec' })).toBe(false);
    expect(npm.canRead({ demuxer: 'no_such_demuxer', codec: 'flac' })).toBe(false);
    expect(npm.canRead({})).toBe(true); // unknown facts pass
  });

  it('refuses nothing when the listing is unknown, and says why', () => {
    const unknown = new EncoderCapabilities({ ok: false, reason: 'x -filters listed nothing' });
    expect(unknown.known).toBe(false);
    expect(unknown.missing()).toEqual({});
    expect(unknown.refusal(options('f:opus/enhance:voice'))).toBeUndefined();
    expect(unknown.canRead({ codec: 'anything', demuxer: 'anything' })).toBe(true);
    expect(unknown.summary()).toBe(
      'capabilities unknown (x -filters listed nothing): options are not checked',
    );
  });
});

describe('readCapabilities', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ap-capabilities-'));
  });

  const script = async (name: string, body: string) => {
    const path = join(dir, name);
    await writeFile(path, `#!/bin/sh\n${body}\n`);
    await chmod(path, 0o755);
    return path;
  };

  it('spawns the four listings once per path, and caches the reading', async () => {
    const log = join(dir, 'calls.log');
    await writeFile(log, '');
    const counting = await script('counting', `echo "$1" >> '${log}'\nexec '${NPM_FFMPEG}' "$@"`);
    const first = readCapabilities(counting);
    expect(readCapabilities(counting)).toBe(first);
    expect((await first).ok).toBe(true);
    await readCapabilities(counting);
    const calls = (await readFile(log, 'utf8')).split('\n').filter(Boolean).sort();
    expect(calls).toEqual(['-decoders', '-encoders', '-filters', '-formats']);
  });

  it('is unknown, never a throw, for a binary that prints nothing, fails, hangs or floods', async () => {
    const silent = await readCapabilities('/bin/true');
    expect(silent).toEqual({ ok: false, reason: '/bin/true -filters listed nothing' });
    const failing = await readCapabilities(await script('failing', 'echo nope >&2; exit 3'));
    expect(failing.ok).toBe(false);
    const hanging = await script('hanging', 'exec sleep 30');
    const started = Date.now();
    const hung = await readCapabilities(hanging, { timeoutMs: 300 });
    expect(hung.ok).toBe(false);
    expect(Date.now() - started).toBeLessThan(5_000);
    const flooding = await script('flooding', 'head -c 2000000 /dev/zero | tr "\\000" x');
    const flood = await readCapabilities(flooding);
    expect(flood.ok).toBe(false);
    expect((flood as { reason: string }).reason).toMatch(/maxBuffer/);
    const missing = await readCapabilities(join(dir, 'absent'));
    expect(missing).toMatchObject({ ok: false, reason: expect.stringMatching(/ENOENT/) });
    // A failure is not cached: the next boot asks again.
    const again = readCapabilities('/bin/true');
    await again;
    expect(readCapabilities('/bin/true')).not.toBe(again);
  });
});
