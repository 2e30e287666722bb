/**
 * The probe: argv shape, parsing of ffprobe's version-dependent JSON (strings or numbers, "N/A",
 * missing sections), the audio-only policy (cover art is not video; video is refused before
 * anything else; no audio or no duration is undecodable), the `/info` field rules (omission,
 * API format tokens, bounded lowercased string tags) and the 1 MiB output bound. Then real
 * ffprobe (Debian, and the npm build) on every fixture.
 */
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { AUDIO_DEMUXERS } from '../../src/workers/argv.js';
import { classifyFailure } from '../../src/workers/classify.js';
import {
  admissionVerdict,
  buildProbeArgv,
  infoBody,
  isAudioDemuxer,
  MAX_INFO_TAG_CHARS,
  MAX_INFO_TAGS,
  MAX_PROBE_OUTPUT_BYTES,
  type ParsedProbe,
  ProbeOutputCollector,
  parseProbe,
  probeVerdict,
} from '../../src/workers/probe.js';
import { type AudioFixtures, makeFixtures, runTool } from '../fixtures/audio.js';

const NPM_FFPROBE = join(process.cwd(), 'node_modules/@ffprobe-installer/linux-x64/ffprobe');

const audio = (extra: Record<string, unknown> = {}) => ({
  codec_type: 'audio',
  codec_name: 'pcm_s16le',
  sample_rate: '48000',
  channels: 2,
  bits_per_sample: 16,
  ...extra,
});

function parsed(doc: unknown): Extract<ParsedProbe, { ok: true }> {
  const result = parseProbe(JSON.stringify(doc));
  if (!result.ok) throw new Error(result.detail);
  return result;
}

describe('buildProbeArgv', () => {
  it('asks for every stream and the container as JSON, whitelisted, input last', () => {
    expect(buildProbeArgv({ url: '/srv/a.wav', kind: 'local' })).toEqual([
      ...['-hide_banner', '-v', 'error', '-show_format', '-show_streams', '-of', 'json'],
      ...['-protocol_whitelist', 'file', '-format_whitelist', AUDIO_DEMUXERS.join(',')],
      'file:/srv/a.wav',
    ]);
    // A remote source is spooled by the proxy: ffprobe never gets its URL.
    expect(() => buildProbeArgv({ url: 'https://h/a.mp3?sig=1', kind: 'https' as never })).toThrow(
      TypeError,
    );
    expect(buildProbeArgv({ url: '/x', kind: 'local' })).not.toContain('-select_streams');
  });
});

describe('parseProbe', () => {
  it('maps a wav probe to the info fields', () => {
    const result = parsed({
      format: { format_name: 'wav', duration: '3.5', size: '672044', bit_rate: '1536000' },
      streams: [audio()],
    });
    expect(result).toEqual({
      ok: true,
      hasAudio: true,
      hasVideo: false,
      demuxer: 'wav',
      codec: 'pcm_s16le',
      info: {
        format: 'wav',
        duration: 3.5,
        sampleRate: 48_000,
        channels: 2,
        bitDepth: 16,
        bitrate: 1_536_000,
        size: 672_044,
      },
    });
  });

  it('spells the format as the API token found in ffprobe’s list, refined by codec for Ogg', () => {
    const token = (format_name: string, codec_name = 'aac') =>
      parsed({ format: { format_name }, streams: [audio({ codec_name })] }).info.format;
    expect(token('mov,mp4,m4a,3gp,3g2,mj2')).toBe('m4a');
    expect(token('ogg', 'opus')).toBe('opus');
    expect(token('ogg', 'vorbis')).toBe('ogg');
    expect(token('flac')).toBe('flac');
    expect(token('matroska,webm')).toBe('matroska');
    expect(parsed({ format: {}, streams: [audio()] }).info.format).toBeUndefined();
  });

  it('omits what ffprobe cannot answer, and falls back from format to stream per field', () => {
    const result = parsed({
      format: { format_name: 'mp3', duration: 'N/A', bit_rate: 'N/A' },
      streams: [
        audio({
          codec_name: 'mp3',
          sample_rate: 44100,
          duration: '2.5',
          bit_rate: '128000',
          bits_per_sample: 0,
          bits_per_raw_sample: 'N/A',
        }),
      ],
    });
    expect(result.info).toEqual({
      format: 'mp3',
      duration: 2.5,
      sampleRate: 44_100,
      channels: 2,
      bitrate: 128_000,
    });
    expect(parsed({ streams: [audio({ bits_per_raw_sample: '24' })] }).info.bitDepth).toBe(24);
    expect(parsed({ streams: [audio({ sample_rate: '0', channels: -1 })] }).info).toEqual({
      bitDepth: 16,
    });
  });

  it('refuses output that is not a JSON object, or too large, as our own failure', () => {
    expect(parseProbe('not json')).toMatchObject({ ok: false, reason: 'render_failed' });
    expect(parseProbe('[1,2]')).toMatchObject({ ok: false, reason: 'render_failed' });
    expect(parseProbe('null')).toMatchObject({ ok: false, reason: 'render_failed' });
    const huge = JSON.stringify({ pad: 'x'.repeat(MAX_PROBE_OUTPUT_BYTES) });
    expect(parseProbe(huge)).toMatchObject({ ok: false, reason: 'render_failed' });
    expect(parseProbe(Buffer.from('{}'))).toEqual({
      ok: true,
      info: {},
      hasAudio: false,
      hasVideo: false,
    });
  });

  it('keeps string tags only, sorted before the cap, keys lowercased, values bounded', () => {
    const tags: Record<string, unknown> = { track: 3, Title: 'T', ARTIST: 'A', empty: '' };
    for (let i = 0; i < 40; i++) tags[`z${String(i).padStart(2, '0')}`] = `v${i}`;
    tags.comment = 'é'.repeat(MAX_INFO_TAG_CHARS + 10);
    Object.defineProperty(tags, '__proto__', { value: 'data, not a prototype', enumerable: true });
    const info = parsed({
      format: { tags: JSON.parse(JSON.stringify(tags)) },
      streams: [audio()],
    }).info;
    const keys = Object.keys(info.tags ?? {});
    expect(keys).toHaveLength(MAX_INFO_TAGS);
    expect(keys).toContain('artist');
    expect(keys).toContain('title');
    expect(keys).toContain('empty');
    expect(keys).not.toContain('track');
    // Sorted by raw key: ARTIST Title __proto__ comment empty z00 … z26, then the cap.
    expect(keys).toContain('z26');
    expect(keys).not.toContain('z27');
    const own = Object.getOwnPropertyDescriptor(info.tags, '__proto__');
    expect(own?.value).toBe('data, not a prototype');
    expect(info.tags?.comment).toHaveLength(MAX_INFO_TAG_CHARS);
    expect(Object.getPrototypeOf({ ...info.tags })).toBe(Object.prototype);
  });

  it('takes the audio stream’s tags when the container has none (Ogg comments)', () => {
    const info = parsed({
      format: { format_name: 'ogg' },
      streams: [audio({ codec_name: 'vorbis', tags: { TITLE: 'On the stream' } })],
    }).info;
    expect(info.tags).toEqual({ title: 'On the stream' });
  });
});

describe('the audio-only policy', () => {
  const withVideo = (video: Record<string, unknown>) =>
    parsed({
      format: { format_name: 'matroska,webm', duration: '1' },
      streams: [audio(), { codec_type: 'video', ...video }],
    });

  it('lets cover art through: attached_pic, or a single still frame', () => {
    expect(withVideo({ codec_name: 'h264', disposition: { attached_pic: 1 } }).hasVideo).toBe(
      false,
    );
    expect(withVideo({ codec_name: 'mjpeg', nb_frames: '1' }).hasVideo).toBe(false);
    expect(withVideo({ codec_name: 'png', nb_frames: 1 }).hasVideo).toBe(false);
  });

  it('fails closed on anything else with codec_type video', () => {
    expect(withVideo({ codec_name: 'h264' }).hasVideo).toBe(true);
    expect(withVideo({ codec_name: 'mjpeg', nb_frames: '250' }).hasVideo).toBe(true);
    expect(withVideo({ codec_name: 'mjpeg' }).hasVideo).toBe(true);
    expect(withVideo({ codec_name: 'hevc', nb_frames: '1' }).hasVideo).toBe(true);
    expect(withVideo({ codec_name: 'png', disposition: { attached_pic: 0 } }).hasVideo).toBe(true);
  });

  it('refuses video first, then no audio, then (when required) no duration', () => {
    expect(probeVerdict(withVideo({ codec_name: 'vp9' }))).toEqual({
      ok: false,
      reason: 'video_source',
    });
    const mov = { format_name: 'mov,mp4,m4a,3gp,3g2,mj2' };
    expect(
      probeVerdict(parsed({ format: mov, streams: [{ codec_type: 'video', codec_name: 'h264' }] })),
    ).toEqual({ ok: false, reason: 'video_source' });
    expect(probeVerdict(parsed({ format: mov, streams: [{ codec_type: 'subtitle' }] }))).toEqual({
      ok: false,
      reason: 'undecodable_source',
    });
    const noDuration = parsed({ format: { format_name: 'wav' }, streams: [audio()] });
    expect(probeVerdict(noDuration)).toEqual({ ok: false, reason: 'undecodable_source' });
    expect(probeVerdict(noDuration, { requireDuration: false })).toMatchObject({ ok: true });
    expect(probeVerdict(parseProbe('garbage'))).toEqual({ ok: false, reason: 'render_failed' });
    const good = withVideo({ codec_name: 'png', disposition: { attached_pic: 1 } });
    expect(probeVerdict(good)).toEqual({ ok: true, info: good.info });
  });
});

describe('admissionVerdict: what a render may ask a slot for', () => {
  const limits = { maxDurationS: 3_600 };
  const rate = { sampleRate: 44_100 } as const;
  it('admits an ordinary source and one the probe said little else about', () => {
    expect(
      admissionVerdict({ sampleRate: 44_100, channels: 2, duration: 180 }, 3_000_000, limits),
    ).toEqual({ ok: true });
    expect(admissionVerdict(rate, undefined, limits)).toEqual({ ok: true });
  });
  it('refuses a stream with no sample rate (ffprobe reports 0): no decoder can time it', () => {
    expect(admissionVerdict({}, undefined, limits)).toEqual({
      ok: false,
      reason: 'undecodable_source',
    });
  });
  it('refuses what the encoders cannot take: > 64 channels, a rate outside 1–768 kHz', () => {
    const no = { ok: false, reason: 'undecodable_source' };
    expect(admissionVerdict({ ...rate, channels: 65 }, 1_000, limits)).toEqual(no);
    expect(admissionVerdict({ ...rate, channels: 64 }, 1_000, limits)).toEqual({ ok: true });
    expect(admissionVerdict({ sampleRate: 1 }, 1_000, limits)).toEqual(no);
    expect(admissionVerdict({ sampleRate: 999 }, 1_000, limits)).toEqual(no);
    expect(admissionVerdict({ sampleRate: 1_000 }, 1_000, limits)).toEqual({ ok: true });
    expect(admissionVerdict({ sampleRate: 768_001 }, 1_000, limits)).toEqual(no);
  });
  it('refuses a duration its bytes cannot hold (amplification) and one past the bound', () => {
    // 1 KB claiming 500 s is 2 bytes a second: under the 8 any real encoder spends.
    expect(admissionVerdict({ ...rate, duration: 500 }, 1_000, limits)).toEqual({
      ok: false,
      reason: 'undecodable_source',
    });
    expect(admissionVerdict({ ...rate, duration: 125 }, 1_000, limits)).toEqual({ ok: true });
    expect(admissionVerdict({ ...rate, duration: 3_601 }, 1e9, limits)).toEqual({
      ok: false,
      reason: 'source_too_long',
    });
    expect(admissionVerdict({ ...rate, duration: 3_600 }, 1e9, limits)).toEqual({ ok: true });
  });
});

describe('infoBody', () => {
  it('uses API spellings, prefers the stat size, omits unknown fields and empty tags', () => {
    const p = parsed({
      format: { format_name: 'flac', duration: '1.000000', size: '999', tags: {} },
      streams: [audio({ bits_per_raw_sample: '24', bits_per_sample: 0 })],
    });
    expect(infoBody(p, 1234)).toEqual({
      format: 'flac',
      duration: 1,
      sample_rate: 48_000,
      channels: 2,
      bit_depth: 24,
      size: 1234,
    });
    expect(infoBody(p).size).toBe(999);
    expect(infoBody(p.info, 5).size).toBe(5);
    expect(JSON.stringify(infoBody(parseProbe('x')))).toBe('{}');
  });
});

describe('ProbeOutputCollector', () => {
  it('collects up to the bound and refuses past it', () => {
    const collector = new ProbeOutputCollector(10);
    expect(collector.push(Buffer.from('{"a":'))).toBe(true);
    expect(collector.push(Buffer.from('1}'))).toBe(true);
    expect(collector.text()).toBe('{"a":1}');
    expect(collector.push(Buffer.from('xxxx'))).toBe(false);
    expect(collector.overflowed).toBe(true);
    expect(() => collector.text()).toThrow(RangeError);
    expect(new ProbeOutputCollector().push(Buffer.alloc(MAX_PROBE_OUTPUT_BYTES))).toBe(true);
  });
});

describe('real ffprobe on the fixtures', () => {
  let fx: AudioFixtures;
  beforeAll(async () => {
    fx = await makeFixtures();
  });

  async function probe(path: string, executable = 'ffprobe') {
    const run = await runTool(executable, buildProbeArgv({ url: path, kind: 'local' }));
    expect(run.status, run.stderr).toBe(0);
    return parseProbe(run.stdout);
  }

  it('describes the stereo wav: format wav, 3 s, 44.1 kHz, 2 ch, 16-bit, tags', async () => {
    const p = await probe(fx.stereoWav);
    expect(probeVerdict(p)).toMatchObject({ ok: true });
    expect(infoBody(p, 529_320)).toEqual({
      format: 'wav',
      duration: 3,
      sample_rate: 44_100,
      channels: 2,
      bit_depth: 16,
      bitrate: expect.any(Number),
      size: 529_320,
      tags: { title: 'Fixture Tone', artist: 'audio-proxy', encoder: expect.any(String) },
    });
  });

  it('gives a lossy mp3 no bit depth, and reads its ID3 title', async () => {
    const body = infoBody(await probe(fx.monoMp3));
    expect(body).toMatchObject({ format: 'mp3', sample_rate: 44_100, channels: 1 });
    expect(body.bit_depth).toBeUndefined();
    expect(body.tags?.title).toBe('Mono Tone');
    expect(body.duration).toBeGreaterThan(2);
    expect(body.duration).toBeLessThan(2.1);
  });

  it('reports a 24-bit flac as bit_depth 24', async () => {
    expect(infoBody(await probe(fx.tinyFlac))).toMatchObject({
      format: 'flac',
      bit_depth: 24,
      sample_rate: 48_000,
      channels: 2,
      duration: 1,
    });
  });

  it('admits an mp3 with cover art and refuses an mp4 with video', async () => {
    const cover = await probe(fx.coverArtMp3);
    expect(cover).toMatchObject({ ok: true, hasVideo: false, hasAudio: true });
    expect(probeVerdict(cover)).toMatchObject({ ok: true });
    const video = await probe(fx.videoMp4);
    expect(video).toMatchObject({ ok: true, hasVideo: true, hasAudio: true });
    expect(probeVerdict(video)).toEqual({ ok: false, reason: 'video_source' });
    if (video.ok) expect(video.info.format).toBe('m4a');
  });

  it('refuses a file no audio demuxer reads before parsing it (subtitles, text)', async () => {
    for (const path of [fx.subtitlesOnly, fx.garbage]) {
      const run = await runTool('ffprobe', buildProbeArgv({ url: path, kind: 'local' }));
      expect(run.status).not.toBe(0);
      expect(classifyFailure(run.status, run.stderr)).toBe('undecodable');
    }
  });

  it('calls a demuxer outside the audio whitelist undecodable even if it had audio', () => {
    const hls = parsed({ format: { format_name: 'hls', duration: '4' }, streams: [audio()] });
    expect(probeVerdict(hls)).toEqual({ ok: false, reason: 'undecodable_source' });
    expect(isAudioDemuxer('mov,mp4,m4a,3gp,3g2,mj2')).toBe(true);
    expect(isAudioDemuxer('hls,applehttp')).toBe(false);
    expect(isAudioDemuxer(undefined)).toBe(false);
  });

  it('the npm-shipped ffprobe answers the same for the wav, the cover art and the video', async () => {
    const wav = await probe(fx.stereoWav, NPM_FFPROBE);
    const wavInfo = infoBody(wav);
    expect(wavInfo).toMatchObject({ format: 'wav', duration: 3, sample_rate: 44_100, channels: 2 });
    expect(wavInfo.bit_depth).toBe(16);
    expect(probeVerdict(await probe(fx.coverArtMp3, NPM_FFPROBE))).toMatchObject({ ok: true });
    expect(probeVerdict(await probe(fx.videoMp4, NPM_FFPROBE))).toEqual({
      ok: false,
      reason: 'video_source',
    });
  });
});
