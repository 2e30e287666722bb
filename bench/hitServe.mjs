/**
 * The Node servers `bench/hit.ts` measures, compiled (`dist/`) on plain Node, as the proxy runs in
 * production: no TypeScript loader thread, no esbuild child, no `keepNames` property writes in
 * the hot path (under tsx those are counted as the server's CPU).
 *
 * `node bench/hitServe.mjs MODE STORE KEY SOURCES CACHE_BYTES`, MODE one of:
 * - `memory`: the bytes of STORE's variant KEY in a Buffer, one `res.end` (Node's floor);
 * - `hot`: `serveHit` over the file store in STORE wrapped in the hot-variant cache of
 *   CACHE_BYTES;
 * - `stream`: `serveHit` over the bare file store (no cache);
 * - `proxy` / `proxy-disk`: the whole proxy (`createAudioProxy`) serving `local://` sources from
 *   SOURCES with a file store in STORE, the hot cache on / off (`AP_HIT_CACHE_BYTES=0`); the one
 *   variant measured (about 1 MiB of wav) is rendered once before `LISTENING`.
 * Prints `LISTENING <port> <path>`. SIGUSR2 starts V8's sampling profiler on the main thread
 * (prints `PROFILING`), a second SIGUSR2 stops it and writes `$AP_BENCH_PROFILE` (prints
 * `PROFILED`). SIGTERM exits.
 */
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { Session } from 'node:inspector/promises';

const [mode, storeRoot, key, sources, cacheBytes] = process.argv.slice(2);
const dist = new URL('../dist/', import.meta.url);
const load = (p) => import(new URL(p, dist).href);

let port;
let path = '/v';
if (mode === 'proxy' || mode === 'proxy-disk') {
  const { loadConfig } = await load('config/index.js');
  const { createAudioProxy } = await load('proxy.js');
  const { pino } = await import('pino');
  const config = loadConfig({
    AP_LOCAL_ROOT: sources,
    AP_ALLOW_INSECURE: '1',
    AP_VARIANT_STORE: `file://${storeRoot}`,
    AP_SERVE_MODE: 'proxy',
    AP_LOG_LEVEL: 'error',
    ...(mode === 'proxy-disk' ? { AP_HIT_CACHE_BYTES: '0' } : {}),
  });
  const proxy = await createAudioProxy({ config, logger: pino({ level: 'silent' }) });
  const { url } = await proxy.listen({ host: '127.0.0.1', port: 0, metricsPort: 0 });
  // 6 s of 44.1 kHz stereo 16-bit wav trimmed to 5.944 s: 1,048,620 bytes, about 1 MiB.
  path = '/insecure/f:wav/t:0:5.944/plain/local://stereo-6s.wav';
  const first = await fetch(url + path);
  const etag = String(first.headers.get('etag')).replaceAll('"', '');
  await first.arrayBuffer();
  for (let i = 0; i < 200 && (await proxy.store.head(etag)) === undefined; i++) {
    await new Promise((r) => setTimeout(r, 50));
  }
  port = new URL(url).port;
} else {
  const { FileVariantStore } = await load('store/file.js');
  const { HotVariantCache } = await load('store/hotCache.js');
  const { lookupVariant, serveHit } = await load('http/hit.js');
  const disk = new FileVariantStore({ root: storeRoot });
  let handler;
  if (mode === 'memory') {
    const body = await disk.get(key);
    const parts = [];
    for await (const c of body.stream) parts.push(c);
    const data = Buffer.concat(parts);
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'audio/mpeg', 'content-length': data.length });
      res.end(data);
    };
  } else {
    const store =
      mode === 'hot' ? new HotVariantCache(disk, { maxBytes: Number(cacheBytes) }) : disk;
    handler = (req, res) => {
      void (async () => {
        const head = await lookupVariant(store, key);
        if (head === undefined) {
          res.writeHead(404);
          res.end();
          return;
        }
        const outcome = await serveHit(req, res, {
          store,
          key,
          head,
          etag: `"${key}"`,
          serveMode: 'proxy',
          presignTtlS: 300,
          nowS: Math.floor(Date.now() / 1000),
        });
        if (outcome === 'miss') {
          res.writeHead(500);
          res.end();
        }
      })();
    };
  }
  const server = createServer(handler);
  server.keepAliveTimeout = 60_000;
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = server.address().port;
}

const session = new Session();
session.connect();
let profiling = false;
process.on('SIGUSR2', () => {
  void (async () => {
    if (!profiling) {
      profiling = true;
      await session.post('Profiler.setSamplingInterval', { interval: 200 });
      await session.post('Profiler.enable');
      await session.post('Profiler.start');
      process.stdout.write('PROFILING\n');
      return;
    }
    const { profile } = await session.post('Profiler.stop');
    writeFileSync(process.env.AP_BENCH_PROFILE, JSON.stringify(profile));
    process.stdout.write('PROFILED\n');
  })();
});
process.once('SIGTERM', () => process.exit(0));
process.stdout.write(`LISTENING ${port} ${path}\n`);
