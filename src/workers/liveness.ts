/**
 * Process liveness and the kill discipline, for the thread that does *not* own the child.
 *
 * A worker thread owns each ffmpeg it spawns: it holds the `ChildProcess`, reaps it and sees its
 * exit. The main thread only knows the pid, reported at spawn. When the worker dies or stops
 * answering, the main thread finishes the kill itself with the functions here: SIGTERM, poll
 * until the grace runs out, SIGKILL, poll again.
 *
 * ## Invariants
 * - **Only positive integer pids are signalled.** `process.kill(0 | -n, …)` signals a whole
 *   process group (ours included), so anything else is a RangeError at the boundary.
 * - **ESRCH means dead, EPERM means alive.** A process we may not signal still exists.
 * - **A zombie counts as dead.** When the owning worker thread is gone, nothing in Node will
 *   ever `waitpid()` its child (libuv reaps only the pids its own loop spawned), so a killed
 *   ffmpeg stays a zombie until Node exits. It runs nothing and holds no file, so on Linux
 *   `/proc/<pid>/stat` state `Z`/`X` is reported as dead; `kill(pid, 0)` alone would say alive.
 * - **A recycled pid is not ours.** Callers may pass the process start time read at spawn
 *   (`processStartTime`); a different start time under the same pid means our process is gone.
 *
 * ## Races
 * - *Exit between the check and the signal*: `kill` then fails with ESRCH, which is success.
 * - *Our own child, just killed*: a zombie until this thread's loop reaps it on its next turn;
 *   already counted dead, so a caller wanting ESRCH waits for the child's `exit` event.
 * - *Pid reuse after the owner reaped the child*: closed by the start-time check on Linux; on
 *   other platforms the window is the time between the owner's reap and our signal, which is
 *   why the main thread only kills pids the worker has not reported as exited.
 *
 * ## Events
 * | Outcome of `killAndReap` | When |
 * |---|---|
 * | `already_dead` | not alive before any signal |
 * | `terminated` | gone within the SIGTERM grace |
 * | `killed` | needed SIGKILL and is gone |
 * | `survived` | still alive after SIGKILL plus the reap wait (uninterruptible sleep) |
 */
import { readFileSync } from 'node:fs';
import { KILL_WAIT_MS, type KillOutcome, TERM_GRACE_MS } from '../core/worker.js';

/** Liveness poll interval while waiting for a signalled process to go. */
export const POLL_MS = 25; // a kill confirmed within one frame of audio is plenty

export interface KillReport {
  readonly pid: number;
  readonly outcome: KillOutcome;
  /** Wall time spent from the first check to the verdict. */
  readonly elapsedMs: number;
}

export interface KillOptions {
  /** @default TERM_GRACE_MS */
  readonly termGraceMs?: number;
  /** @default KILL_WAIT_MS */
  readonly killWaitMs?: number;
  /** @default POLL_MS */
  readonly pollMs?: number;
  /** The start time read at spawn; a mismatch means the pid was recycled. */
  readonly startTime?: string | null;
  /** Injected sleep (tests); resolves after `ms`. */
  readonly sleep?: (ms: number) => Promise<void>;
  /** Injected clock (tests). @default performance.now */
  readonly now?: () => number;
}

function assertPid(pid: number): void {
  if (!Number.isSafeInteger(pid) || pid <= 0) {
    throw new RangeError(`pid must be a positive integer, got ${String(pid)}`);
  }
}

/**
 * The `/proc/<pid>/stat` fields after the command name (so `proc(5)` field N is index N − 3), or
 * null when unreadable.
 */
export function statFields(pid: number): string[] | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return null;
  }
  // The command name is in parentheses and may itself contain spaces or parentheses.
  const close = text.lastIndexOf(')');
  if (close < 0) return null;
  return text
    .slice(close + 2)
    .trim()
    .split(' ');
}

/**
 * The kernel's start time of `pid` (clock ticks since boot) on Linux, or null where there is no
 * procfs or the process is gone. Read it right after spawn and pass it to `isAlive`/`killAndReap`.
 */
export function processStartTime(pid: number): string | null {
  assertPid(pid);
  if (process.platform !== 'linux') return null;
  // After the command name: state is field 3, starttime field 22 → index 19 here.
  return statFields(pid)?.[19] ?? null;
}

/**
 * Whether `pid` names a live process (ours, when `startTime` is given). ESRCH → false, EPERM →
 * true; on Linux a zombie or a recycled pid → false.
 */
export function isAlive(pid: number, startTime?: string | null): boolean {
  assertPid(pid);
  try {
    process.kill(pid, 0);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ESRCH') return false;
    if (code === 'EPERM') return true;
    throw error;
  }
  if (process.platform !== 'linux') return true;
  const fields = statFields(pid);
  if (fields === null) return false; // reaped between the signal and the read
  const state = fields[0];
  if (state === 'Z' || state === 'X') return false;
  if (startTime != null && fields[19] !== startTime) return false;
  return true;
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function waitGone(
  pid: number,
  budgetMs: number,
  pollMs: number,
  startTime: string | null | undefined,
  sleep: (ms: number) => Promise<void>,
  now: () => number,
): Promise<boolean> {
  const until = now() + budgetMs;
  for (;;) {
    if (!isAlive(pid, startTime)) return true;
    const left = until - now();
    if (left <= 0) return false;
    await sleep(Math.min(pollMs, left));
  }
}

/**
 * SIGTERM, poll every `pollMs` for up to `termGraceMs`, then SIGKILL and poll for up to
 * `killWaitMs`. Resolves with what it took; never rejects for a process that is already gone.
 */
export async function killAndReap(pid: number, options: KillOptions = {}): Promise<KillReport> {
  assertPid(pid);
  const termGraceMs = options.termGraceMs ?? TERM_GRACE_MS;
  const killWaitMs = options.killWaitMs ?? KILL_WAIT_MS;
  const pollMs = options.pollMs ?? POLL_MS;
  const sleep = options.sleep ?? defaultSleep;
  const now = options.now ?? (() => performance.now());
  const { startTime } = options;
  const started = now();
  const report = (outcome: KillOutcome): KillReport => ({
    pid,
    outcome,
    elapsedMs: now() - started,
  });

  if (!isAlive(pid, startTime)) return report('already_dead');
  signal(pid, 'SIGTERM');
  if (await waitGone(pid, termGraceMs, pollMs, startTime, sleep, now)) return report('terminated');
  if (!isAlive(pid, startTime)) return report('terminated'); // went at the very end of the grace
  signal(pid, 'SIGKILL');
  if (await waitGone(pid, killWaitMs, pollMs, startTime, sleep, now)) return report('killed');
  return report('survived');
}
