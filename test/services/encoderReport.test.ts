/**
 * What /health and the boot log say about ffmpeg: its path, origin and version, and per option
 * what it lacks (`{}` when nothing), or why nothing was checked; one boot line, at info only for
 * a complete system ffmpeg, at warn for the npm fallback, a gap or an unreadable listing, and a
 * line of its own for a fallback binary that boot made executable.
 */
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { ffmpegBootNotes, ffmpegHealth } from '../../src/services/encoderReport.js';
import { EncoderCapabilities, readCapabilities } from '../../src/workers/capabilities.js';
import type { ResolvedExecutable } from '../../src/workers/ffmpegPath.js';

const require = createRequire(import.meta.url);
const NPM_FFMPEG = (require('@ffmpeg-installer/ffmpeg') as { path: string }).path;
const SYSTEM: ResolvedExecutable = { path: '/usr/bin/ffmpeg', source: 'path' };
const PROBE: ResolvedExecutable = { path: '/usr/bin/ffprobe', source: 'path' };

describe('ffmpegHealth and ffmpegBootNotes', () => {
  it('a complete system ffmpeg: missing {} and one info line', async () => {
    const caps = new EncoderCapabilities(await readCapabilities(SYSTEM.path));
    const health = ffmpegHealth(SYSTEM, caps);
    expect(health).toEqual({
      path: '/usr/bin/ffmpeg',
      source: 'path',
      version: caps.listing!.version,
      missing: {},
    });
    expect(ffmpegBootNotes(SYSTEM, PROBE, caps)).toEqual([
      {
        level: 'info',
        fields: { ffmpeg: health },
        message: `ffmpeg ${caps.listing!.version} at /usr/bin/ffmpeg (PATH): every option is supported`,
      },
    ]);
  });

  it('the npm fallback: what it lacks, labelled, at warn; a repaired binary is said too', async () => {
    const caps = new EncoderCapabilities(await readCapabilities(NPM_FFMPEG));
    const npm: ResolvedExecutable = {
      path: NPM_FFMPEG,
      source: 'npm',
      version: '20181210-g0e8eb07980',
      madeExecutable: true,
    };
    expect(ffmpegHealth(npm, caps)).toEqual({
      path: NPM_FFMPEG,
      source: 'npm',
      version: 'N-47683-g0e8eb07980-static', // the banner's, over the package's
      missing: { 'enhance:voice': ['filter deesser'] },
    });
    const notes = ffmpegBootNotes(npm, PROBE, caps);
    expect(notes.map((n) => [n.level, n.message])).toEqual([
      [
        'warn',
        'made the npm-shipped ffmpeg executable (chmod +x): it was installed without its install script',
      ],
      [
        'warn',
        `ffmpeg N-47683-g0e8eb07980-static at ${NPM_FFMPEG} (the npm-shipped fallback; a system ` +
          'ffmpeg is faster and complete): unsupported here, answered 501 unsupported_option: ' +
          'enhance:voice (filter deesser)',
      ],
    ]);
  });

  it('an unreadable listing: unchecked, at warn', () => {
    const caps = new EncoderCapabilities({
      ok: false,
      reason: '/bin/true -filters listed nothing',
    });
    const env: ResolvedExecutable = { path: '/bin/true', source: 'env' };
    expect(ffmpegHealth(env, caps)).toEqual({
      path: '/bin/true',
      source: 'env',
      unchecked: '/bin/true -filters listed nothing',
    });
    expect(ffmpegBootNotes(env, PROBE, caps)).toEqual([
      expect.objectContaining({
        level: 'warn',
        message:
          'ffmpeg at /bin/true (AP_FFMPEG_PATH): capabilities unknown (/bin/true -filters listed ' +
          'nothing): options are not checked',
      }),
    ]);
  });
});
