// Shared by the worker tests: real ffmpeg argvs over lavfi-generated audio, the fake-ffmpeg
// scripts, a direct (no worker) run of the same argv for byte comparison, liveness assertions,
// and an in-thread consumer for the render task (the main thread's side of its MessagePort).
import { execFile } from 'node:child_process';
import { chmodSync, readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import * as Comlink from 'comlink';
import nodeEndpoint from 'comlink/dist/esm/node-adapter.mjs';
import { expect } from 'vitest';
import type {
  ProcessControl,
  ProcessSink,
  RenderOutcome,
  RenderTask,
} from '../../src/core/worker.js';
import { isAlive } from '../../src/workers/liveness.js';
import { render } from '../../src/workers/renderTask.js';

export const FAKE_DIR = fileURLToPath(new URL('../fixtures/fake-ffmpeg/', import.meta.url));

/** Path of a fake-ffmpeg script, made executable (git may not keep the mode bit). */
export function fake(name: string): string {
  const path = `${FAKE_DIR}${name}`;
  chmodSync(path, 0o755);
  return path;
}

export const FAKE_SCRIPTS = readdirSync(FAKE_DIR).filter((f) => f.endsWith('.sh'));

/** Real ffmpeg: `seconds` of a stereo sine pair encoded to `format` on stdout. */
export function sineArgv(seconds: number, format: 'mp3' | 's16le' | 'opus' = 'mp3'): string[] {
  const codec =
    format === 'mp3'
      ? ['-c:a', 'libmp3lame', '-b:a', '128k', '-f', 'mp3']
      : format === 'opus'
        ? ['-c:a', 'libopus', '-b:a', '96k', '-f', 'ogg']
        : ['-c:a', 'pcm_s16le', '-f', 's16le'];
  return [
    '-hide_banner',
    '-loglevel',
    'error',
    '-f',
    'lavfi',
    '-i',
    `sine=frequency=440:sample_rate=44100:duration=${seconds}`,
    '-ac',
    '2',
    ...codec,
    'pipe:1',
  ];
}

/** Runs the same argv straight from this thread and returns stdout. */
export function direct(executable: string, argv: readonly string[]): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    execFile(
      executable,
      argv as string[],
      { encoding: 'buffer', maxBuffer: 256 * 1024 * 1024 },
      (error, stdout) => (error ? reject(error) : resolve(stdout)),
    );
  });
}

/** Asserts `kill(pid, 0)` fails with ESRCH: the process is gone and reaped. */
export function expectReaped(pid: number | null | undefined): void {
  expect(pid).toBeTypeOf('number');
  let code: string | undefined;
  try {
    process.kill(pid!, 0);
  } catch (error) {
    code = (error as NodeJS.ErrnoException).code;
  }
  expect(code, `pid ${pid} should be gone`).toBe('ESRCH');
}

/** The kernel state letter of `pid` ('Z' zombie, 'S' sleeping…), or null when gone. */
export function procState(pid: number): string | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'latin1');
    return text.slice(text.lastIndexOf(')') + 2)[0] ?? null;
  } catch {
    return null;
  }
}

/** Every pid a test saw; `afterEach` asserts none is still running. */
export const seenPids = new Set<number>();

export function expectNoSurvivors(): void {
  // Cleared first: a survivor fails its own test, not every test after it as well.
  const pids = [...seenPids];
  seenPids.clear();
  for (const pid of pids) {
    expect(isAlive(pid), `pid ${pid} (state ${procState(pid)}) outlived its test`).toBe(false);
  }
}

export interface InThreadRender {
  readonly result: Promise<RenderOutcome>;
  readonly control: Comlink.Remote<ProcessControl>;
  readonly chunks: Buffer[];
  readonly calls: string[];
  readonly port: MessagePort;
  pid(): Promise<number>;
  received(): number;
}

/**
 * Runs the render task in this thread with this test as its consumer: a Comlink sink that
 * records every call, and the task's control surface. Nothing is acknowledged unless asked.
 */
export function renderInThread(spec: Omit<RenderTask, 'kind' | 'port'>): InThreadRender {
  const { port1, port2 } = new MessageChannel();
  const endpoint = nodeEndpoint(port1);
  const chunks: Buffer[] = [];
  const calls: string[] = [];
  let resolvePid!: (pid: number) => void;
  const pidKnown = new Promise<number>((resolve) => {
    resolvePid = resolve;
  });
  const sink: ProcessSink = {
    pid: (pid) => {
      calls.push('pid');
      seenPids.add(pid);
      resolvePid(pid);
    },
    chunk: (data) => {
      calls.push('chunk');
      chunks.push(Buffer.from(data));
    },
    exited: () => {
      calls.push('exited');
    },
  };
  Comlink.expose(sink, endpoint);
  const control = Comlink.wrap<ProcessControl>(endpoint);
  const result = render({ kind: 'render', ...spec, port: port2 });
  return {
    result,
    control,
    chunks,
    calls,
    port: port1,
    pid: () => pidKnown,
    received: () => chunks.reduce((n, c) => n + c.length, 0),
  };
}
