/**
 * Does a server's CPU per GiB stay put when the machine gets busy? nginx (sendfile) against
 * the simplest Node writer (`res.end` of one Buffer), each serving the same 1 MiB file over 64
 * keep-alive connections (wrk), at 0 extra busy loops and at N, alternating, same run.
 *
 * Why it exists: the HIT ratios of issue #17 divide the proxy's CPU per GiB by nginx's, and two
 * runs at different loads disagreed by 30-100 %. This measures the denominator by itself, beside
 * a Node floor that does no more than the kernel copy, so a reader can see which side moves.
 * For each run it prints the serving process's user and system CPU per GiB read by wrk
 * (`processCpuPartsMs`), and the whole machine's system and softirq time per GiB (`/proc/stat`;
 * its user time would include the busy loops): if nginx's own figure fell only because the
 * kernel charged its work to another process, the machine-wide kernel time would not fall with it.
 * Two more columns rule out the other easy explanations: the server's bytes per send call
 * (`/proc/<pid>/io`: `wchar` ÷ `syscw`, which `sendfile` and `writev` both count), which would
 * grow if a busy machine only made the server batch more per call; and wrk's own CPU per GiB
 * (this process's reaped-children time), which would grow if the transfer's kernel work moved
 * to the reader's side of the loopback.
 *
 * Run: `npm run bench -- sendfile-load [--loads 0,2,0,2] [--seconds 4]`. Needs nginx and wrk
 * (Debian's; `.ci/run` installs both). nginx is the HIT bench's (`bench/nginx.ts`). Everything
 * it starts is stopped on the way out.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { childrenCpuMs, fmtSpread, processCpuPartsMs, spread } from './cpuclock.js';
import { busyLoop } from './fixtures.js';
import { startNginx } from './nginx.js';

const args = process.argv.slice(2);
const opt = (name: string, fallback: string) =>
  args.includes(name) ? args[args.indexOf(name) + 1]! : fallback;
const LOADS = opt('--loads', '0,2,0,2').split(',').map(Number);
const SECONDS = Number(opt('--seconds', '4'));
if (LOADS.some((n) => !Number.isInteger(n) || n < 0 || n > 16) || !(SECONDS > 0))
  throw new RangeError('--loads needs integers from 0 to 16, --seconds a positive number');
const USER_HZ = 100; // what /proc/stat counts in

const dir = mkdtempSync(join(tmpdir(), 'ap-sendfile-'));
const file = join(dir, 'variant.bin');
writeFileSync(file, randomBytes(1 << 20));
const nginx = startNginx(dir);
const writerPort = nginx.port + 1;
const writer = spawn(
  process.execPath,
  [
    '-e',
    `const b = require('fs').readFileSync(${JSON.stringify(file)});
     require('http').createServer((q, s) => { s.setHeader('content-type', 'application/octet-stream'); s.end(b); })
       .listen(${writerPort}, '127.0.0.1');`,
  ],
  { stdio: 'ignore' },
);
const loops: ChildProcess[] = [];
process.on('exit', () => {
  for (const l of loops) l.kill('SIGKILL');
  nginx.stop();
  writer.kill();
  rmSync(dir, { recursive: true, force: true });
});

/** Bytes written and write-type calls (`sendfile`, `writev`, `write`) of `pid` so far. */
function writeCalls(pid: number): { bytes: number; calls: number } {
  const io = readFileSync(`/proc/${pid}/io`, 'utf8');
  const field = (name: string) => Number(new RegExp(`${name}: (\\d+)`).exec(io)![1]);
  return { bytes: field('wchar'), calls: field('syscw') };
}

/** The machine's cpu line of /proc/stat: user nice system idle iowait irq softirq steal … */
const machine = () =>
  readFileSync('/proc/stat', 'utf8').split('\n')[0]!.split(/\s+/).slice(1).map(Number);

async function ready(port: number): Promise<void> {
  for (let i = 0; i < 100; i++) {
    try {
      const r = await fetch(`http://127.0.0.1:${port}/variant.bin`);
      if ((await r.arrayBuffer()).byteLength === 1 << 20) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`nothing served 1 MiB on port ${port}`);
}
await ready(nginx.port);
await ready(writerPort);

const servers = [
  { name: 'nginx sendfile', pid: nginx.workerPid(), port: nginx.port },
  { name: 'node res.end', pid: writer.pid!, port: writerPort },
];
console.log(`1 MiB over 64 connections, wrk -t1 -d${SECONDS}s; CPU s per GiB read`);
console.log(
  'loops  server          GiB/s  own user  own sys  own total | KiB/call | wrk CPU | machine sys  softirq',
);
const rows: Array<{ loops: number; name: string; total: number }> = [];
for (const n of LOADS) {
  while (loops.length < n) loops.push(busyLoop());
  while (loops.length > n) loops.pop()!.kill('SIGKILL');
  await new Promise((r) => setTimeout(r, 500));
  for (const s of servers) {
    const a = processCpuPartsMs(s.pid);
    const w0 = writeCalls(s.pid);
    const k0 = childrenCpuMs('self');
    const m0 = machine();
    const r = spawnSync(
      'wrk',
      ['-t1', '-c64', `-d${SECONDS}s`, `http://127.0.0.1:${s.port}/variant.bin`],
      { encoding: 'utf8' },
    );
    const b = processCpuPartsMs(s.pid);
    const w1 = writeCalls(s.pid);
    const k1 = childrenCpuMs('self');
    const m1 = machine();
    const read = /([\d.]+)(GB|MB) read/.exec(r.stdout ?? '');
    if (!read) throw new Error(`wrk against ${s.name} read nothing:\n${r.stdout}${r.stderr}`);
    const gib = Number(read[1]) / (read[2] === 'GB' ? 1 : 1024);
    const user = (b.user - a.user) / 1000 / gib;
    const sys = (b.system - a.system) / 1000 / gib;
    const m = m1.map((v, i) => (v - m0[i]!) / USER_HZ / gib);
    rows.push({ loops: n, name: s.name, total: user + sys });
    const f = (v: number, w: number) => v.toFixed(3).padStart(w);
    console.log(
      `${String(n).padStart(5)}  ${s.name.padEnd(14)}  ${(gib / SECONDS).toFixed(2).padStart(5)}  ${f(user, 8)}  ${f(sys, 7)}  ${f(user + sys, 9)} | ${((w1.bytes - w0.bytes) / (w1.calls - w0.calls) / 1024).toFixed(0).padStart(8)} | ${f((k1 - k0) / 1000 / gib, 7)} | ${f(m[2]!, 11)}  ${f(m[6]!, 7)}`,
    );
  }
}
console.log('\nown CPU s/GiB, median (min–max) by load; and the Node writer ÷ nginx');
for (const n of new Set(LOADS)) {
  const of = (name: string) =>
    spread(rows.filter((r) => r.loops === n && r.name === name).map((r) => r.total));
  const ng = of('nginx sendfile');
  const nd = of('node res.end');
  console.log(
    `  ${n} loops: nginx ${fmtSpread(ng, 3)}, node ${fmtSpread(nd, 3)}, node ÷ nginx ${(nd.median / ng.median).toFixed(2)}`,
  );
}
console.log(`load average (1 min) at the end: ${loadavg()[0]!.toFixed(1)}`);
process.exit(0);
