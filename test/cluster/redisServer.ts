/**
 * A private redis-server for the cluster tests: spawned on a free loopback port with no
 * persistence, ready once it answers PING, and stoppable, killable and restartable on the same
 * port (a restart comes back empty, as a real crash without persistence would).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { Socket } from 'node:net';
import { freePort } from '../ports.js';

export const REDIS_SERVER_BIN = '/usr/bin/redis-server';
/** How long a starting server may take to answer PING on a loaded machine. */
const START_TIMEOUT_MS = 15_000;
const PING_RETRY_MS = 20;

export interface RedisServer {
  readonly port: number;
  readonly url: string;
  /** Starts it again on the same port (empty). */
  restart(): Promise<void>;
  /** SIGTERM and wait for exit. */
  stop(): Promise<void>;
  /** SIGKILL and wait for exit. */
  kill(): Promise<void>;
  readonly running: boolean;
}

/** One raw PING over a socket: true when the answer is +PONG. */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    let answer = '';
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.once('error', () => done(false));
    socket.on('data', (chunk) => {
      answer += chunk.toString('latin1');
      if (answer.includes('\r\n')) done(answer.startsWith('+PONG'));
    });
    socket.connect(port, '127.0.0.1', () => socket.write('PING\r\n'));
  });
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

export async function startRedisServer(): Promise<RedisServer> {
  const port = await freePort();
  let child: ChildProcess | undefined;

  const launch = async () => {
    const proc = spawn(
      REDIS_SERVER_BIN,
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      { stdio: 'ignore' },
    );
    child = proc;
    const deadline = Date.now() + START_TIMEOUT_MS;
    while (Date.now() < deadline) {
      if (proc.exitCode !== null) throw new Error(`redis-server exited with ${proc.exitCode}`);
      if (await ping(port)) return;
      await new Promise((r) => setTimeout(r, PING_RETRY_MS));
    }
    proc.kill('SIGKILL');
    throw new Error(`redis-server did not answer PING on ${port} within ${START_TIMEOUT_MS} ms`);
  };

  const halt = async (signal: NodeJS.Signals) => {
    const proc = child;
    child = undefined;
    if (!proc) return;
    proc.kill(signal);
    await exited(proc);
  };

  await launch();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    get running() {
      return child !== undefined;
    },
    restart: async () => {
      await halt('SIGKILL');
      await launch();
    },
    stop: () => halt('SIGTERM'),
    kill: () => halt('SIGKILL'),
  };
}
