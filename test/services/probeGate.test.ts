// The probe gate's verdicts: a finished ffprobe becomes the /info body and the media facts, a
// refusal shared like a result (undecodable bytes, including an ffprobe that exited with a status
// of its own, video, over AP_MAX_SRC_BYTES while opening), or a ProbeError (an Error, never a
// plain object) whose class the ProbeCoordinator's `toFailure` reads back unchanged; a source the
// render's ffmpeg cannot demux or decode (its listing, read at boot) is undecodable too.
import { describe, expect, it } from 'vitest';
import { createActor, toPromise } from 'xstate';
import { loadConfig, staticConfig } from '../../src/config/index.js';
import type { OpenOutcome, ResolvedSource } from '../../src/core/source.js';
import type { ProbeTaskOutcome } from '../../src/core/worker.js';
import { toFailure } from '../../src/machines/probeCoordinator.js';
import { judgeProbe, ProbeError, probeLogic } from '../../src/services/probeGate.js';
import { EncoderCapabilities, readCapabilities } from '../../src/workers/capabilities.js';
import type { WorkerPool } from '../../src/workers/pool.js';

const ok = (doc: unknown): ProbeTaskOutcome => ({
  type: 'ok',
  stdout: JSON.stringify(doc),
  stderrTail: '',
});
const failed = (cls: string, exitStatus: number | null, stderrTail = 'tail'): ProbeTaskOutcome =>
  ({ type: 'error', class: cls, exitStatus, stderrTail, bytes: 0 }) as ProbeTaskOutcome;
const wav = {
  format: { format_name: 'wav', duration: '3.5', size: '672044', bit_rate: '1536000' },
  streams: [
    {
      codec_type: 'audio',
      codec_name: 'pcm_s16le',
      sample_rate: '48000',
      channels: 2,
      bits_per_sample: 16,
    },
  ],
};

function thrown(f: () => unknown): unknown {
  try {
    f();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

describe('judgeProbe', () => {
  it('turns an audio probe into the /info body and the media facts', () => {
    const result = judgeProbe(ok(wav));
    expect(result).toMatchObject({
      ok: true,
      info: { format: 'wav', duration: 3.5, sample_rate: 48_000, channels: 2 },
      media: { sampleRate: 48_000, channels: 2, bitDepth: 16, duration: 3.5 },
    });
  });

  it('shares verdicts about the bytes as results', () => {
    expect(judgeProbe(failed('undecodable', 1))).toEqual({
      ok: false,
      refusal: 'undecodable_source',
    });
    // an ffprobe that exited by itself with a failure status could not read the bytes as media
    expect(judgeProbe(failed('render_failed', 1))).toEqual({
      ok: false,
      refusal: 'undecodable_source',
    });
    const video = {
      ...wav,
      streams: [...wav.streams, { codec_type: 'video', codec_name: 'h264' }],
    };
    expect(judgeProbe(ok(video))).toEqual({ ok: false, refusal: 'video_source' });
  });

  it('refuses as undecodable what the render’s ffmpeg cannot demux or decode', async () => {
    const read = await readCapabilities('/usr/bin/ffmpeg');
    if (!read.ok) throw new Error(read.reason);
    const without = (kind: 'demuxers' | 'decoders', name: string) => {
      const set = new Set(read.listing[kind]);
      set.delete(name);
      return new EncoderCapabilities({ ok: true, listing: { ...read.listing, [kind]: set } });
    };
    expect(judgeProbe(ok(wav), new EncoderCapabilities(read))).toMatchObject({ ok: true });
    for (const capabilities of [without('demuxers', 'wav'), without('decoders', 'pcm_s16le')]) {
      expect(judgeProbe(ok(wav), capabilities)).toEqual({
        ok: false,
        refusal: 'undecodable_source',
      });
    }
    // What the gate asks: ffprobe's format_name and the audio stream's codec.
    const asked: unknown[] = [];
    judgeProbe(ok(wav), { canRead: (source) => asked.push(source) > 0 });
    expect(asked).toEqual([expect.objectContaining({ demuxer: 'wav', codec: 'pcm_s16le' })]);
  });

  it('throws a ProbeError for every other failure, with the class waiters are told', () => {
    const cases: Array<[ProbeTaskOutcome, string]> = [
      [failed('timeout', null), 'probe_timeout'],
      [failed('not_found', null), 'not_found'],
      [failed('render_failed', null), 'probe_failed'], // killed: not a verdict on the bytes
      [failed('cancelled', null), 'probe_failed'],
    ];
    for (const [outcome, cls] of cases) {
      const error = thrown(() => judgeProbe(outcome));
      expect(error).toBeInstanceOf(ProbeError);
      expect(error).toBeInstanceOf(Error);
      expect(error).toMatchObject({ name: 'ProbeError', class: cls, detail: 'tail' });
      expect(toFailure(error)).toEqual({ class: cls, detail: 'tail' });
    }
    const unparseable: ProbeTaskOutcome = { type: 'ok', stdout: 'not json', stderrTail: '' };
    expect(toFailure(thrown(() => judgeProbe(unparseable)))).toEqual({
      class: 'probe_failed',
      detail: 'unparseable probe output',
    });
  });
});

describe('probeLogic', () => {
  const config = staticConfig(loadConfig({ AP_ALLOW_INSECURE: '1' }));
  const pool = {} as WorkerPool; // never reached: every case ends at the opener
  const source = (open?: () => Promise<OpenOutcome>): ResolvedSource => ({
    source: { scheme: 'local', path: '/music/a.wav' },
    canonical: 'local:/music/a.wav',
    input: { url: '/music/a.wav', kind: 'local' },
    ...(open ? { open } : {}),
  });
  const run = (input: ResolvedSource) => {
    const actor = createActor(probeLogic({ config, pool, ffprobePath: 'ffprobe' }), { input });
    actor.start();
    return toPromise(actor);
  };

  it('answers over AP_MAX_SRC_BYTES while opening as a shared refusal', async () => {
    await expect(
      run(source(async () => ({ ok: false, refusal: 'source_too_large' }))),
    ).resolves.toEqual({ ok: false, refusal: 'source_too_large' });
  });

  it('fails with a ProbeError when the source cannot be opened, or has no opener', async () => {
    const refused = run(
      source(async () => ({ ok: false, refusal: 'upstream_unavailable', detail: 'HTTP 503' })),
    );
    await expect(refused).rejects.toBeInstanceOf(ProbeError);
    await expect(refused).rejects.toMatchObject({
      class: 'upstream_unavailable',
      detail: 'HTTP 503',
    });
    await expect(run(source())).rejects.toMatchObject({
      class: 'not_found',
      detail: 'nothing to open',
    });
  });
});
