/**
 * What several benchmarks set up the same way, so each measures the same thing:
 *
 * - `makeStereoWav(path)`: the MISS source of `cpu`, `render` and `threads`, a 60 s stereo
 *   16-bit WAV at 44.1 kHz (two sines, 440 and 660 Hz), written by ffmpeg. The same bytes every
 *   time, so the renders' CPU is comparable across benches and runs.
 * - `busyLoop()`: one process spinning on a core until killed, the "machine load" of
 *   `all --load N`, `sendfile-load` and `threads`. The caller kills it (SIGKILL) on the way out.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';

/** Writes the 60 s stereo test WAV to `path` with `ffmpeg` (an executable path or name). */
export function makeStereoWav(path: string, ffmpeg = 'ffmpeg'): void {
  execFileSync(ffmpeg, [
    ...['-nostdin', '-loglevel', 'error', '-y'],
    ...['-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=44100:duration=60'],
    ...['-f', 'lavfi', '-i', 'sine=frequency=660:sample_rate=44100:duration=60'],
    ...['-filter_complex', 'amerge=inputs=2', '-c:a', 'pcm_s16le', path],
  ]);
}

/** A process that keeps one core busy until it is killed. */
export function busyLoop(): ChildProcess {
  return spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' });
}
