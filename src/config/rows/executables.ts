/**
 * Rows of the ffmpeg and ffprobe the proxy starts: their paths and the niceness they run at.
 *
 * ## Invariants
 * - **A path is proved executable** (stat'ed as a regular file, `access(X_OK)`); PATH is not
 *   searched, and a bare name is refused with a full-path hint.
 * - **Unset means "find it"**: `workers/ffmpegPath.ts` looks on PATH, then at the npm binary.
 */
import { DEFAULT_FFMPEG_NICE } from '../defaults.js';
import { executable, integer } from '../parsers.js';
import { row, SECTIONS } from '../row.js';
import { RULE } from '../rules.js';

const section = SECTIONS.executables;

export const EXECUTABLE_ROWS = [
  row({
    name: 'AP_FFMPEG_PATH',
    field: 'ffmpegPath',
    section,
    default: 'unset: `ffmpeg` on PATH, else the npm-installed binary',
    rule: RULE.executable,
    doc: 'The ffmpeg used for renders.',
    read: (v) => executable(v),
  }),
  row({
    name: 'AP_FFMPEG_NICE',
    field: 'ffmpegNice',
    section,
    default: `\`${DEFAULT_FFMPEG_NICE}\``,
    rule: RULE.nice,
    doc: "Niceness of every ffmpeg and ffprobe the proxy starts. Encodes are batch work: when they and the event loop want the same CPU, the loop (every response, `/health`) goes first. `0` runs them at the proxy's own priority.",
    read: (v) => integer(v, DEFAULT_FFMPEG_NICE, 'nice'),
  }),
  row({
    name: 'AP_FFPROBE_PATH',
    field: 'ffprobePath',
    section,
    default: 'unset: `ffprobe` on PATH, else the npm-installed binary',
    rule: RULE.executable,
    doc: 'The ffprobe used for probes and `/info`.',
    read: (v) => executable(v),
  }),
] as const;
