/**
 * Does a server's CPU per GiB stay put when the machine gets busy? nginx (sendfile) against
 * the simplest Node writer (`res.end` of one Buffer), each serving the same 1 MiB file over 64
 * keep-alive connections (wrk), at 0 extra busy loops and at N, alternating, same run.
 *
 * Why it exists: the HIT ratios of issue #17 divide the proxy's CPU per GiB by nginx's, and two
 * runs at different loads disagreed by 30-70 %. This measures the denominator by itself, beside
 * a Node floor that does no more than the kernel copy, so a reader can see which side moves.
 * For each run it prints the serving process's user and system CPU per GiB read by wrk
 * (`/proc/<pid>/stat`), and the whole machine's system and softirq time per GiB (`/proc/stat`;
 * its user time would include the busy loops): if nginx's own figure fell only because the kernel charged its work to
 * another process, the machine-wide kernel time would not fall with it.
 *
 * Run: `node bench/sendfile-load.mjs [--loads 0,2,0,2] [--seconds 4]`. Needs nginx and wrk
 * (Debian's; `.ci/run` installs both). Everything it starts is stopped on the way out.
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';

const args = process.argv.slice(2);
const opt = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const LOADS = opt('--loads', '0,2,0,2').split(',').map(Number);
const SECONDS = Number(opt('--seconds', '4'));
const TICKS = 100; // USER_HZ: what /proc counts in

const dir = mkdtempSync(join(tmpdir(), 'ap-sendfile-'));
writeFileSync(join(dir, 'variant.bin'), randomBytes(1 << 20));
for (const d of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(join(dir, d));
const port = 20_000 + Math.floor(Math.random() * 20_000);
writeFileSync(
  join(dir, 'nginx.conf'),
  `user root; worker_processes 1; daemon off; pid ${dir}/nginx.pid; error_log ${dir}/error.log warn;
events { worker_connections 1024; }
http { access_log off; sendfile on; tcp_nopush on; keepalive_timeout 60s; keepalive_requests 1000000;
  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy; fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;
  server { listen 127.0.0.1:${port}; root ${dir}; location / {} } }
`,
);
const nginx = spawn('nginx', ['-p', dir, '-c', join(dir, 'nginx.conf')], { stdio: 'ignore' });
const writer = spawn(
  process.execPath,
  [
    '-e',
    `const b = require('fs').readFileSync(${JSON.stringify(join(dir, 'variant.bin'))});
     require('http').createServer((q, s) => { s.setHeader('content-type', 'application/octet-stream'); s.end(b); })
       .listen(${port + 1}, '127.0.0.1');`,
  ],
  { stdio: 'ignore' },
);
const loops = [];
const stopAll = () => {
  for (const l of loops) l.kill('SIGKILL');
  nginx.kill('SIGQUIT');
  writer.kill();
  rmSync(dir, { recursive: true, force: true });
};
process.on('exit', stopAll);

/** [user, system] clock ticks of one process. */
const ticks = (pid) => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return [Number(fields[11]), Number(fields[12])];
};
/** The machine's cpu line: user nice system idle iowait irq softirq steal … */
const machine = () =>
  readFileSync('/proc/stat', 'utf8').split('\n')[0].split(/\s+/).slice(1).map(Number);

await new Promise((r) => setTimeout(r, 1000));
const nginxWorker = Number(
  readFileSync(`/proc/${nginx.pid}/task/${nginx.pid}/children`, 'utf8').trim().split(/\s+/)[0],
);
const servers = [
  ['nginx sendfile', nginxWorker, port],
  ['node res.end', writer.pid, port + 1],
];
console.log(`1 MiB over 64 connections, wrk -t1 -d${SECONDS}s; CPU s per GiB read`);
console.log('loops  server          GiB/s  own user  own sys  own total | machine sys  softirq');
const rows = [];
for (const n of LOADS) {
  while (loops.length < n)
    loops.push(spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }));
  while (loops.length > n) loops.pop().kill('SIGKILL');
  await new Promise((r) => setTimeout(r, 500));
  for (const [name, pid, p] of servers) {
    const a = ticks(pid);
    const m0 = machine();
    const r = spawnSync(
      'wrk',
      ['-t1', '-c64', `-d${SECONDS}s`, `http://127.0.0.1:${p}/variant.bin`],
      {
        encoding: 'utf8',
      },
    );
    const b = ticks(pid);
    const m1 = machine();
    const read = /([\d.]+)(GB|MB) read/.exec(r.stdout);
    if (!read) throw new Error(`wrk against ${name} read nothing:\n${r.stdout}${r.stderr}`);
    const gib = Number(read[1]) / (read[2] === 'GB' ? 1 : 1024);
    const per = (t) => t / TICKS / gib;
    const m = m1.map((v, i) => v - m0[i]);
    const row = { loops: n, name, user: per(b[0] - a[0]), sys: per(b[1] - a[1]) };
    rows.push(row);
    console.log(
      `${String(n).padStart(5)}  ${name.padEnd(14)}  ${(gib / SECONDS).toFixed(2).padStart(5)}  ${row.user.toFixed(3).padStart(8)}  ${row.sys.toFixed(3).padStart(7)}  ${(row.user + row.sys).toFixed(3).padStart(9)} | ${per(m[2]).toFixed(3).padStart(11)}  ${per(m[6]).toFixed(3).padStart(7)}`,
    );
  }
}
console.log('\nown CPU s/GiB, median by load; and the Node writer ÷ nginx');
for (const n of [...new Set(LOADS)]) {
  const med = (name) => {
    const v = rows.filter((r) => r.loops === n && r.name === name).map((r) => r.user + r.sys);
    v.sort((x, y) => x - y);
    const mid = (v.length - 1) / 2;
    return (v[Math.floor(mid)] + v[Math.ceil(mid)]) / 2;
  };
  const ng = med('nginx sendfile');
  const nd = med('node res.end');
  console.log(
    `  ${n} loops: nginx ${ng.toFixed(3)}, node ${nd.toFixed(3)}, node ÷ nginx ${(nd / ng).toFixed(2)}`,
  );
}
console.log(`load average (1 min) at the end: ${loadavg()[0].toFixed(1)}`);
process.exit(0);
