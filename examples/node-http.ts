/**
 * The proxy's handler mounted in a plain `node:http` server. Run it with
 *
 *     npx tsx examples/node-http.ts
 *
 * It generates the demo library (once, with ffmpeg, into the OS temp dir), serves it on a
 * loopback port chosen by the OS, asks itself for a 10 s Opus preview, prints the status and the
 * size of what came back, and shuts everything down. `createAudioProxy` owns the actors and the
 * worker pools; the server is yours, so the proxy can share it with your own routes.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAudioProxy, ensureDemoLibrary, loadConfig, resolveFfmpeg } from 'audio-proxy';

const library = await ensureDemoLibrary(resolveFfmpeg({ env: process.env }).path);
const config = loadConfig({
  AP_LOCAL_ROOT: library, // `local://` sources are read from here
  AP_ALLOW_INSECURE: '1', // dev only: accept the literal signature `insecure`
  AP_LOG_LEVEL: 'warning',
});
const proxy = await createAudioProxy({ config });

const server = createServer((req, res) => {
  if (req.url === '/') {
    res.end('my own route\n'); // anything that is not the proxy's stays yours
    return;
  }
  void proxy.handler(req, res);
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
console.log(`listening on ${base}`);

const path = '/insecure/f:opus/t:0:10/plain/local://music.flac';
const response = await fetch(base + path);
const body = Buffer.from(await response.arrayBuffer());
console.log(`GET ${path}`);
console.log(
  `→ ${response.status} ${response.headers.get('content-type')}, ${body.length} bytes (${response.headers.get('x-audio-proxy')})`,
);

// Stop accepting, let the proxy cancel what still runs and stop its pools, then close.
server.close();
server.closeAllConnections();
await proxy.close();
console.log('closed');
