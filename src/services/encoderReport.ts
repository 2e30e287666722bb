/**
 * What `/health` and the boot log say about the ffmpeg this node runs: which binary and where it
 * came from (`npm` is the labelled fallback), its version, and which options it cannot honour
 * (`workers/capabilities.ts`), or that its listing could not be read.
 *
 * ## Invariants
 * - **One boot line says it all**: binary, origin, version and what is missing (or nothing), at
 *   `warn` when anything is missing, unknown, or the fallback runs; at `info` otherwise.
 * - **A repaired fallback is said once**: a `chmod +x` made at resolution gets its own line.
 *
 * ## Races
 * None: pure functions of what boot resolved and read.
 *
 * ## Events
 * None (the proxy logs the lines).
 */
import type { EncoderCapabilities } from '../workers/capabilities.js';
import type { ResolvedExecutable } from '../workers/ffmpegPath.js';

/** The `ffmpeg` object of `/health`. */
export interface FfmpegHealth {
  readonly path: string;
  readonly source: string;
  readonly version?: string;
  /** Per option (`enhance:voice`), the parts this ffmpeg lacks; `{}` when none. */
  readonly missing?: Readonly<Record<string, readonly string[]>>;
  /** Why the listing could not be read (then `missing` is absent and nothing is refused). */
  readonly unchecked?: string;
}

export interface BootNote {
  readonly level: 'info' | 'warn';
  readonly fields: Readonly<Record<string, unknown>>;
  readonly message: string;
}

const ORIGIN: Readonly<Record<string, string>> = {
  env: 'AP_FFMPEG_PATH',
  path: 'PATH',
  npm: 'the npm-shipped fallback; a system ffmpeg is faster and complete',
};

export function ffmpegHealth(
  ffmpeg: ResolvedExecutable,
  capabilities: EncoderCapabilities,
): FfmpegHealth {
  const version = capabilities.listing?.version ?? ffmpeg.version;
  return {
    path: ffmpeg.path,
    source: ffmpeg.source,
    ...(version === undefined ? {} : { version }),
    ...(capabilities.known
      ? { missing: capabilities.missing() }
      : { unchecked: capabilities.unknownReason ?? 'unknown' }),
  };
}

/** The boot log's lines about ffmpeg and ffprobe, in order. */
export function ffmpegBootNotes(
  ffmpeg: ResolvedExecutable,
  ffprobe: ResolvedExecutable,
  capabilities: EncoderCapabilities,
): BootNote[] {
  const notes: BootNote[] = [];
  for (const [name, tool] of [
    ['ffmpeg', ffmpeg],
    ['ffprobe', ffprobe],
  ] as const) {
    if (tool.madeExecutable) {
      notes.push({
        level: 'warn',
        fields: { path: tool.path },
        message: `made the npm-shipped ${name} executable (chmod +x): it was installed without its install script`,
      });
    }
  }
  const health = ffmpegHealth(ffmpeg, capabilities);
  const complete = capabilities.known && Object.keys(capabilities.missing()).length === 0;
  const version = health.version === undefined ? '' : ` ${health.version}`;
  notes.push({
    level: complete && ffmpeg.source !== 'npm' ? 'info' : 'warn',
    fields: { ffmpeg: health },
    message: `ffmpeg${version} at ${ffmpeg.path} (${ORIGIN[ffmpeg.source] ?? ffmpeg.source}): ${capabilities.summary()}`,
  });
  return notes;
}
