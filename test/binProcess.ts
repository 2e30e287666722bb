/**
 * The real `bin/audio-proxy.mjs` as a child process, for tests that need the CLI end to end:
 * its stdout and stderr collected as one text, and its exit code as a promise. The caller owns
 * the child (kill it in `afterAll` if it may still run).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';

export interface BinProcess {
  readonly child: ChildProcess;
  /** Everything written to stdout and stderr so far. */
  output(): string;
  readonly exited: Promise<number | null>;
}

export function startBin(args: readonly string[], env: NodeJS.ProcessEnv): BinProcess {
  const child = spawn(process.execPath, [join(process.cwd(), 'bin/audio-proxy.mjs'), ...args], {
    env: { AUDIO_PROXY_FROM_SOURCE: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const append = (d: Buffer) => {
    out += d.toString();
  };
  child.stdout!.on('data', append);
  child.stderr!.on('data', append);
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, output: () => out, exited };
}
