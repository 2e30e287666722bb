/**
 * HIT throughput in proxy mode: one 1 MiB variant fetched over 64 keep-alive connections, against
 * nginx serving the same bytes from disk, in the same run.
 *
 * Servers (each its own process, so the load generator and the servers compete alike):
 * - `nginx`: Debian nginx-light, one worker, `sendfile on`, a generated config in a temp dir;
 * - `node memory`: the floor for Node: the bytes in a Buffer, one `res.end`, nothing else;
 * - `node hot`: `serveHit` over the file store wrapped in the hot-variant cache (the default
 *   budget, `DEFAULT_HIT_CACHE_BYTES`): a warm HIT is a Map lookup and one `res.end(buffer)`;
 * - `node stream`: `serveHit` over the bare file store: metadata read, stat, open and a read
 *   stream per request (what a HIT costs without the cache);
 * - `proxy`: the whole proxy (`createAudioProxy`, signature, options, cache key, lookup) with a
 *   file store and `AP_SERVE_MODE=proxy`, measured only once the proxy exposes `proxy.store`.
 * Each server's bytes are checked against the file before it is measured. Each round measures
 * every server once, in rotating order; the figures are medians over rounds, and ratios are to
 * nginx in the same run. The Node servers' RSS after each run shows the memory bound holds.
 *
 * Load: `wrk -t1 -c64 -d<s>s` (autocannon with 64 connections when wrk is not installed).
 * Run: `npx tsx bench/hit.ts [--rounds 5] [--seconds 5] [--cache-bytes N]`.
 * The figures go to docs/performance.md ("HIT serving").
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { lookupVariant, serveHit } from '../src/http/hit.js';
import { FileVariantStore } from '../src/store/file.js';
import { DEFAULT_HIT_CACHE_BYTES, HotVariantCache } from '../src/store/hotCache.js';
import type { VariantStore } from '../src/store/types.js';
import { fmtSpread, spread, spreadFigures } from './cpuclock.js';
import { report } from './report.js';

const VARIANT_BYTES = 1024 * 1024; // the figure: a 1 MiB variant
const CONNECTIONS = 64; // the figure: 64 keep-alive connections
const KEY = 'b'.repeat(64);
const CLOCK_TICKS_PER_S = 100; // Linux USER_HZ, what /proc/<pid>/stat counts in
const META = {
  contentType: 'audio/mpeg',
  cacheControl: 'public, max-age=31536000, immutable, no-transform',
};

const args = process.argv.slice(2);
function flag(name: string, fallback: number): number {
  const at = args.indexOf(`--${name}`);
  return at === -1 ? fallback : Number(args[at + 1]);
}
const ROUNDS = flag('rounds', 5);
const SECONDS = flag('seconds', 5);
const CACHE_BYTES = flag('cache-bytes', DEFAULT_HIT_CACHE_BYTES);

// ---------------------------------------------------------------------------------------------
// Child mode: one Node server, `--serve <mode> <root> [cacheBytes]`.

type Mode = 'memory' | 'hot' | 'stream' | 'proxy' | 'proxy-disk';

async function serve(mode: Mode, root: string, cacheBytes: number) {
  if (mode === 'proxy' || mode === 'proxy-disk') return serveProxy(root, mode === 'proxy-disk');
  if (mode === 'memory') return serveMemory(root);
  const disk = new FileVariantStore({ root });
  const store: VariantStore =
    mode === 'hot' ? new HotVariantCache(disk, { maxBytes: cacheBytes }) : disk;
  const server = createServer((req, res) => {
    void (async () => {
      const head = await lookupVariant(store, KEY);
      if (head === undefined) {
        res.writeHead(404);
        res.end();
        return;
      }
      const outcome = await serveHit(req, res, {
        store,
        key: KEY,
        head,
        etag: `"${KEY}"`,
        serveMode: 'proxy',
        presignTtlS: 300,
        nowS: Math.floor(Date.now() / 1000),
      });
      if (outcome === 'miss') {
        res.writeHead(500);
        res.end();
      }
    })();
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1', () => {
    process.stdout.write(`LISTENING ${(server.address() as AddressInfo).port} /v\n`);
  });
}

/** The floor: the same bytes from a Buffer with one `res.end`, no store and no checks. */
async function serveMemory(root: string) {
  const disk = new FileVariantStore({ root });
  const body = await disk.get(KEY);
  const parts: Buffer[] = [];
  for await (const c of (body as { stream: AsyncIterable<Buffer> }).stream) parts.push(c);
  const data = Buffer.concat(parts);
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': META.contentType, 'content-length': data.length });
    res.end(data);
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1', () => {
    process.stdout.write(`LISTENING ${(server.address() as AddressInfo).port} /v\n`);
  });
}

/**
 * The whole proxy; prints SKIP when it does not expose a store yet. `disk`: the hot-variant cache
 * off (`AP_HIT_CACHE_BYTES=0`), so every HIT reads the file store (the disk path, issue #17).
 */
async function serveProxy(root: string, disk = false) {
  const { loadConfig } = await import('../src/config/index.js');
  const { createAudioProxy } = await import('../src/proxy.js');
  const { pino } = await import('pino');
  const { makeFixtures } = await import('../test/fixtures/audio.js');
  const fixtures = await makeFixtures();
  const config = loadConfig({
    AP_LOCAL_ROOT: fixtures.dir,
    AP_ALLOW_INSECURE: '1',
    AP_VARIANT_STORE: `file://${root}`,
    AP_SERVE_MODE: 'proxy',
    AP_LOG_LEVEL: 'error',
    ...(disk ? { AP_HIT_CACHE_BYTES: '0' } : {}),
  });
  const proxy = await createAudioProxy({ config, logger: pino({ level: 'silent' }) });
  const store = (proxy as unknown as { store?: VariantStore }).store;
  if (store === undefined) {
    process.stdout.write('SKIP proxy.store is not wired yet\n');
    await proxy.close();
    process.exit(0);
  }
  const { url } = await proxy.listen({ host: '127.0.0.1', port: 0, metricsPort: 0 });
  // A variant of about 1 MiB: 6 s of 44.1 kHz stereo 16-bit wav is 1,058,444 bytes.
  const path = '/insecure/f:wav/t:0:5.944/plain/local://stereo-6s.wav';
  const wav = join(fixtures.dir, 'stereo-6s.wav');
  if (!existsSync(wav)) {
    execFileSync('ffmpeg', [
      ...['-nostdin', '-loglevel', 'error', '-y', '-f', 'lavfi'],
      ...['-i', 'sine=frequency=440:sample_rate=44100:duration=6', '-ac', '2', wav],
    ]);
  }
  const first = await fetch(url + path);
  const etag = String(first.headers.get('etag')).replaceAll('"', '');
  await first.arrayBuffer();
  for (let i = 0; i < 200 && (await store.head(etag)) === undefined; i++) {
    await new Promise((r) => setTimeout(r, 50));
  }
  const port = new URL(url).port;
  process.stdout.write(`LISTENING ${port} ${path}\n`);
}

// ---------------------------------------------------------------------------------------------
// Driver

interface Target {
  readonly name: string;
  readonly port: number;
  readonly path: string;
  readonly pid: number;
  stop(): void;
}

interface Run {
  readonly rps: number;
  /** Server CPU (user + system) per request, in ms: steadier than req/s on a shared box. */
  readonly cpuMsPerReq: number;
  readonly mbps: number;
  readonly p50ms: number;
  readonly p99ms: number;
  readonly rssMiB?: number;
}

function startNginx(dir: string): Target {
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
  return {
    name: 'nginx',
    port,
    path: '/variant.bin',
    pid: child.pid!,
    stop: () => child.kill('SIGQUIT'),
  };
}

function startNode(mode: Mode, root: string): Promise<Target | null> {
  const self = fileURLToPath(import.meta.url);
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', self, '--serve', mode, root, String(CACHE_BYTES)],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /LISTENING (\d+) (\S+)/.exec(out);
      if (m) {
        resolve({
          name:
            mode === 'proxy'
              ? 'proxy (full)'
              : mode === 'proxy-disk'
                ? 'proxy (disk)'
                : `node ${mode}`,
          port: Number(m[1]),
          path: m[2]!,
          pid: child.pid!,
          stop: () => child.kill('SIGTERM'),
        });
      } else if (out.includes('SKIP')) {
        resolve(null);
      }
    });
    child.once('exit', (code) => reject(new Error(`${mode} server exited (${code})`)));
  });
}

async function waitReady(t: Target, expected?: Buffer): Promise<void> {
  for (let i = 0; i < 100; i++) {
    try {
      const r = await fetch(`http://127.0.0.1:${t.port}${t.path}`);
      const body = Buffer.from(await r.arrayBuffer());
      if (r.status !== 200) throw new Error(`${t.name}: status ${r.status}`);
      if (expected && !body.equals(expected)) throw new Error(`${t.name}: wrong bytes`);
      return;
    } catch (error) {
      if (i === 99) throw error;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

function rssMiB(pid: number): number | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = /VmRSS:\s+(\d+)/.exec(status)?.[1];
    return kb ? Number(kb) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** User+system CPU seconds of `pid` so far (/proc, clock ticks of 1/100 s). */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_S;
}

/** The process that serves: nginx's worker (the master's child), or the Node server itself. */
function servingPid(t: Target): number {
  if (t.name !== 'nginx') return t.pid;
  const children = readFileSync(`/proc/${t.pid}/task/${t.pid}/children`, 'utf8').trim();
  return Number(children.split(/\s+/)[0]);
}

function hasWrk(): boolean {
  return spawnSync('wrk', ['--version']).error === undefined;
}

function msOf(text: string): number {
  const m = /([\d.]+)(us|ms|s)/.exec(text);
  if (!m) return Number.NaN;
  const v = Number(m[1]);
  return m[2] === 'us' ? v / 1000 : m[2] === 's' ? v * 1000 : v;
}

async function load(t: Target): Promise<Run> {
  const url = `http://127.0.0.1:${t.port}${t.path}`;
  const pid = servingPid(t);
  const cpuBefore = cpuSeconds(pid);
  let run: Omit<Run, 'cpuMsPerReq'>;
  if (hasWrk()) {
    const r = spawnSync('wrk', ['-t1', `-c${CONNECTIONS}`, `-d${SECONDS}s`, '--latency', url], {
      encoding: 'utf8',
    });
    const out = r.stdout;
    const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1]);
    const transfer = /Transfer\/sec:\s+([\d.]+)(\w+)/.exec(out);
    const unit = transfer?.[2] === 'GB' ? 1024 : transfer?.[2] === 'KB' ? 1 / 1024 : 1;
    run = {
      rps,
      mbps: Number(transfer?.[1]) * unit,
      p50ms: msOf(/50%\s+(\S+)/.exec(out)?.[1] ?? ''),
      p99ms: msOf(/99%\s+(\S+)/.exec(out)?.[1] ?? ''),
    };
  } else {
    const name = 'autocannon'; // untyped package: imported by name, used through `any`
    const autocannon = (await import(name)).default as (o: object) => Promise<any>;
    const r = await autocannon({ url, connections: CONNECTIONS, duration: SECONDS });
    run = {
      rps: r.requests.average,
      mbps: r.throughput.average / (1024 * 1024),
      p50ms: r.latency.p50,
      p99ms: r.latency.p99,
    };
  }
  const cpuMsPerReq = ((cpuSeconds(pid) - cpuBefore) * 1000) / (run.rps * SECONDS);
  const rss = t.name === 'nginx' ? undefined : rssMiB(t.pid);
  return rss === undefined ? { ...run, cpuMsPerReq } : { ...run, cpuMsPerReq, rssMiB: rss };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'ap-bench-hit-'));
  const data = randomBytes(VARIANT_BYTES);
  writeFileSync(join(dir, 'variant.bin'), data);
  const storeRoot = join(dir, 'store');
  mkdirSync(storeRoot);
  const disk = new FileVariantStore({ root: storeRoot });
  await disk.sweepStaging();
  await disk.put(
    KEY,
    (async function* () {
      yield data;
    })(),
    META,
  );
  const proxyRoot = join(dir, 'proxy-store');
  mkdirSync(proxyRoot);

  const targets: Target[] = [startNginx(dir)];
  for (const mode of ['memory', 'hot', 'stream'] as const) {
    targets.push((await startNode(mode, storeRoot))!);
  }
  const proxy = await startNode('proxy', proxyRoot);
  if (proxy) targets.push(proxy);
  const proxyDiskRoot = join(dir, 'proxy-disk-store');
  mkdirSync(proxyDiskRoot);
  const proxyDisk = proxy ? await startNode('proxy-disk', proxyDiskRoot) : null;
  if (proxyDisk) targets.push(proxyDisk);
  const loadStart = loadavg()[0]!;
  try {
    for (const t of targets) await waitReady(t, t.name.startsWith('proxy') ? undefined : data);
    const runs = new Map<string, Run[]>(targets.map((t) => [t.name, []]));
    const tool = hasWrk() ? `wrk -t1 -c${CONNECTIONS} -d${SECONDS}s` : 'autocannon';
    process.stderr.write(`load: ${tool}; ${ROUNDS} rounds; cache ${CACHE_BYTES} B\n`);
    for (let round = 0; round < ROUNDS; round++) {
      const order = targets.map((_, i) => targets[(i + round) % targets.length]!);
      for (const t of order) {
        const r = await load(t);
        runs.get(t.name)!.push(r);
        process.stderr.write(
          `round ${round + 1} ${t.name.padEnd(13)} ${r.rps.toFixed(0)} req/s p99 ${r.p99ms.toFixed(1)} ms, ${r.cpuMsPerReq.toFixed(3)} CPU ms/req\n`,
        );
      }
    }
    const nginx = median(runs.get('nginx')!.map((r) => r.rps));
    const nginxCpu = median(runs.get('nginx')!.map((r) => r.cpuMsPerReq));
    const nginxRuns = runs.get('nginx')!;
    console.log(
      '\n| server | req/s (median) | × nginx | × nginx, same round (median) | p50 ms | p99 ms | CPU ms/req | × nginx per CPU s | RSS MiB (max) |',
    );
    console.log('|---|---|---|---|---|---|---|---|---|');
    for (const t of targets) {
      const rs = runs.get(t.name)!;
      const rps = median(rs.map((r) => r.rps));
      const paired = median(rs.map((r, i) => r.rps / nginxRuns[i]!.rps));
      const cpu = median(rs.map((r) => r.cpuMsPerReq));
      const rss = rs.map((r) => r.rssMiB).filter((x): x is number => x !== undefined);
      console.log(
        `| ${t.name} | ${rps.toFixed(0)} | ${(rps / nginx).toFixed(2)} | ${paired.toFixed(2)} | ${median(rs.map((r) => r.p50ms)).toFixed(1)} | ${median(rs.map((r) => r.p99ms)).toFixed(1)} | ${cpu.toFixed(3)} | ${(nginxCpu / cpu).toFixed(2)} | ${rss.length ? Math.max(...rss).toFixed(0) : '-'} |`,
      );
    }
    // Issue #17: CPU seconds per GiB served ÷ nginx's (sendfile), paired per round. Every server
    // sends the same 1 MiB body, so the ratio of CPU per request is the ratio per GiB.
    console.log(
      '\nCPU s per GiB served, and ÷ nginx in the same round: median (min–max) over rounds',
    );
    const figures: Record<string, number> = { nginxRps: nginx, loadStart, loadEnd: loadavg()[0]! };
    for (const t of targets) {
      const rs = runs.get(t.name)!;
      const perGiB = spread(rs.map((r) => (r.cpuMsPerReq / 1000) * (2 ** 30 / VARIANT_BYTES)));
      const ratio = spread(rs.map((r, i) => r.cpuMsPerReq / nginxRuns[i]!.cpuMsPerReq));
      Object.assign(figures, spreadFigures(`cpuPerGiBVsNginx:${t.name}`, ratio));
      figures[`cpuSPerGiB:${t.name}`] = perGiB.median;
      figures[`mibPerS:${t.name}`] = median(rs.map((r) => (r.rps * VARIANT_BYTES) / 2 ** 20));
      console.log(
        `  ${t.name.padEnd(13)} ${fmtSpread(perGiB, 3)} CPU s/GiB   ${fmtSpread(ratio)}× nginx${t.name === 'nginx' ? '' : ' (target ≤ 1.5× for the proxy)'}`,
      );
    }
    for (const t of targets) {
      const rs = runs.get(t.name)!;
      figures[`rps:${t.name}`] = median(rs.map((r) => r.rps));
      figures[`sameRound:${t.name}`] = median(rs.map((r, i) => r.rps / nginxRuns[i]!.rps));
      figures[`cpuMsPerReq:${t.name}`] = median(rs.map((r) => r.cpuMsPerReq));
    }
    report('hit', figures);
    const [l1, l5] = loadavg();
    console.log(
      `\nload average: ${loadStart.toFixed(1)} at the start, ${l1!.toFixed(1)} (1 min) and ${l5!.toFixed(1)} (5 min) at the end`,
    );
    if (!proxy) console.log('\n(proxy (full) skipped: the proxy does not expose a store yet)');
  } finally {
    for (const t of targets) t.stop();
    await new Promise((r) => setTimeout(r, 300));
    rmSync(dir, { recursive: true, force: true });
  }
}

if (args[0] === '--serve') {
  await serve(args[1] as Mode, args[2]!, Number(args[3]));
} else {
  await main();
}
