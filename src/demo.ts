/**
 * The built-in demo library: a few audio files generated with ffmpeg's own signal sources, so a
 * newcomer can run the proxy with no key, no bucket and no config.
 *
 * The files are generated once into a directory under the OS temp dir and reused; they are
 * synthetic (tones and shaped noise), long enough for a 30 s preview to be meaningful.
 *
 * `demoUrls` lists only what the running ffmpeg can render: given the proxy's capabilities, a URL
 * whose options need a part that ffmpeg lacks (the npm fallback has no `deesser` for
 * `enhance:voice`) gives way to its stand-in, or is left out, so every URL printed answers 200.
 */
import { spawn } from 'node:child_process';
import { mkdir, rename, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseRoute } from './http/options.js';
import type { EncoderCapabilities } from './workers/capabilities.js';

/** Bumped whenever the generated content changes, so a stale library is regenerated. */
export const DEMO_LIBRARY_VERSION = 1;

export interface DemoTrack {
  readonly file: string;
  readonly title: string;
  /** ffmpeg input arguments producing the track (a lavfi source). */
  readonly lavfi: string;
  readonly codecArgs: readonly string[];
}

export const DEMO_TRACKS: readonly DemoTrack[] = [
  {
    file: 'music.flac',
    title: '90 s stereo tone piece (FLAC)',
    lavfi:
      "aevalsrc='0.25*sin(2*PI*(220+55*floor(mod(t,8)))*t)*(0.7+0.3*sin(2*PI*2*t))+0.1*sin(2*PI*880*t)*exp(-4*mod(t,0.5))|0.25*sin(2*PI*(330+55*floor(mod(t,6)))*t)*(0.7+0.3*sin(2*PI*3*t))+0.1*sin(2*PI*660*t)*exp(-4*mod(t+0.25,0.5))':s=44100:d=90",
    codecArgs: ['-c:a', 'flac'],
  },
  {
    file: 'speech.wav',
    title: '45 s speech-like mono noise bursts (WAV)',
    lavfi:
      "aevalsrc='(random(0)-0.5)*0.6*pow(sin(PI*3.3*t),2)*(0.6+0.4*sin(2*PI*0.4*t))':s=22050:d=45,bandpass=f=900:w=1200",
    codecArgs: ['-c:a', 'pcm_s16le'],
  },
];

export function demoRoot(): string {
  return join(tmpdir(), `audio-proxy-demo-v${DEMO_LIBRARY_VERSION}`);
}

async function exists(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}

function run(executable: string, args: readonly string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(executable, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-2000);
    });
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`ffmpeg exited ${code}: ${stderr}`)),
    );
  });
}

/** Generates the demo files that are missing; returns the library directory. */
export async function ensureDemoLibrary(ffmpeg: string, root = demoRoot()): Promise<string> {
  await mkdir(root, { recursive: true });
  for (const track of DEMO_TRACKS) {
    const target = join(root, track.file);
    if (await exists(target)) continue;
    const partial = `${target}.partial-${process.pid}`;
    const ext = track.file.split('.').pop()!;
    await run(ffmpeg, [
      '-hide_banner',
      '-loglevel',
      'error',
      '-nostdin',
      '-y',
      '-f',
      'lavfi',
      '-i',
      track.lavfi,
      ...track.codecArgs,
      '-f',
      ext,
      partial,
    ]);
    await rename(partial, target); // atomic: a half-written file is never served
  }
  return root;
}

/**
 * Ready-to-curl URLs for the demo, all with the dev-only `insecure` signature; with
 * `capabilities`, only those this ffmpeg can render.
 */
export function demoUrls(
  base: string,
  capabilities?: Pick<EncoderCapabilities, 'refusal'>,
): Array<{ label: string; url: string }> {
  const renders = (url: string) => {
    if (capabilities === undefined) return true;
    const route = parseRoute(url.slice(`${base}/insecure/`.length));
    return !(route.ok && route.endpoint === 'render' && capabilities.refusal(route.options));
  };
  return allDemoUrls(base).flatMap(({ instead, ...entry }) => {
    if (renders(entry.url)) return [entry];
    return instead !== undefined && renders(instead.url) ? [instead] : [];
  });
}

interface DemoUrl {
  readonly label: string;
  readonly url: string;
  /** What the demo offers when this ffmpeg cannot render `url`. */
  readonly instead?: { readonly label: string; readonly url: string };
}

function allDemoUrls(base: string): DemoUrl[] {
  return [
    { label: '30 s Opus preview', url: `${base}/insecure/f:opus/t:0:30/plain/local://music.flac` },
    {
      label: 'mono speech MP3 (64 kbps, voice enhancement)',
      url: `${base}/insecure/f:mp3/ch:1/br:64/enhance:voice/plain/local://speech.wav`,
      instead: {
        label: 'mono speech MP3 (64 kbps, loudness-normalised)',
        url: `${base}/insecure/f:mp3/ch:1/br:64/norm:ebu/plain/local://speech.wav`,
      },
    },
    {
      label: 'waveform peaks (JSON)',
      url: `${base}/insecure/f:peaks/pts:400/plain/local://music.flac`,
    },
    { label: 'source info', url: `${base}/insecure/info/plain/local://music.flac` },
  ];
}
