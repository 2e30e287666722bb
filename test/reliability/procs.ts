/**
 * The OS's own answer to "is anything still running?": every live descendant of a process, read
 * from `/proc`, and free loopback ports for servers started as separate processes.
 *
 * **Invariants**
 * - A zombie (`Z`) or dead (`X`) entry is not live: it runs nothing and holds no file. A child of
 *   a terminated worker thread stays a zombie until the server process exits (Node never reaps it).
 * - The walk covers the whole tree (children of children), so a shell script's own children and
 *   an exec'd fake ffmpeg are both seen.
 *
 * **Races**
 * - *A process exits between the directory listing and reading its `stat`*: the read fails and the
 *   process is skipped, which is the truth by then.
 * - *A free port is taken between `freePort()` and the server's bind*: the server fails to boot
 *   and the test fails loudly; with ephemeral ports from the kernel this is rare.
 *
 * **Events**: none.
 */
import { readdirSync, readFileSync } from 'node:fs';

export interface ProcessEntry {
  readonly pid: number;
  readonly ppid: number;
  readonly comm: string;
  readonly state: string;
}

function readStat(pid: number): ProcessEntry | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // `pid (comm) state ppid …`; comm may itself contain spaces and parentheses.
    const open = text.indexOf('(');
    const close = text.lastIndexOf(')');
    const rest = text.slice(close + 2).split(' ');
    return {
      pid,
      comm: text.slice(open + 1, close),
      state: rest[0] ?? '?',
      ppid: Number(rest[1]),
    };
  } catch {
    return null;
  }
}

/** Every process in the table right now. */
export function processTable(): ProcessEntry[] {
  const out: ProcessEntry[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const entry = readStat(Number(name));
    if (entry) out.push(entry);
  }
  return out;
}

/** Live (not zombie, not dead) descendants of `root`, children of children included. */
export function liveDescendants(root: number = process.pid): ProcessEntry[] {
  const table = processTable();
  const byParent = new Map<number, ProcessEntry[]>();
  for (const p of table) {
    const list = byParent.get(p.ppid) ?? [];
    list.push(p);
    byParent.set(p.ppid, list);
  }
  const found: ProcessEntry[] = [];
  const stack = [root];
  while (stack.length > 0) {
    const parent = stack.pop()!;
    for (const child of byParent.get(parent) ?? []) {
      if (child.state !== 'Z' && child.state !== 'X') found.push(child);
      stack.push(child.pid);
    }
  }
  return found;
}

export { freePort } from '../ports.js';
