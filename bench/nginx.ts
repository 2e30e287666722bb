/**
 * nginx as a benchmark baseline: Debian's nginx-light serving one directory over loopback, with
 * one worker, `sendfile on` and keep-alive without a request limit, from a config generated in
 * that directory. The HIT bench (`bench/hit.ts`) and the sendfile bench (`bench/sendfile-load.ts`)
 * both use it, so the two measure the same nginx.
 *
 * Contract: `startNginx(dir)` returns at once; the server answers once its worker is up
 * (callers poll, as they do for every server). `workerPid()` is the process that serves, the
 * master's only child: the one whose CPU is nginx's cost. `stop()` asks for a graceful exit
 * (SIGQUIT); the caller removes `dir`.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Nginx {
  readonly port: number;
  /** The master's pid. */
  readonly pid: number;
  /** The worker's pid: it serves, so its CPU is nginx's. */
  workerPid(): number;
  stop(): void;
}

/** Starts nginx serving `dir` (as its root) on a random loopback port. */
export function startNginx(dir: string): Nginx {
  const port = 20_000 + Math.floor(Math.random() * 20_000);
  for (const d of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(join(dir, d));
  const conf = join(dir, 'nginx.conf');
  writeFileSync(
    conf,
    `user root;
worker_processes 1;
daemon off;
pid ${join(dir, 'nginx.pid')};
error_log ${join(dir, 'error.log')} warn;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_timeout 60s;
  keepalive_requests 1000000;
  client_body_temp_path ${join(dir, 'body')};
  proxy_temp_path ${join(dir, 'proxy')};
  fastcgi_temp_path ${join(dir, 'fastcgi')};
  uwsgi_temp_path ${join(dir, 'uwsgi')};
  scgi_temp_path ${join(dir, 'scgi')};
  default_type application/octet-stream;
  server {
    listen 127.0.0.1:${port};
    root ${dir};
    location / { }
  }
}
`,
  );
  const child = spawn('nginx', ['-p', dir, '-c', conf], { stdio: 'ignore' });
  const pid = child.pid!;
  return {
    port,
    pid,
    workerPid: () =>
      Number(readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/)[0]),
    stop: () => child.kill('SIGQUIT'),
  };
}
