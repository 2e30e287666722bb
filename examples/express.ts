/**
 * The proxy mounted under `/audio` in an Express 5 app. Run it with
 *
 *     npx tsx examples/express.ts
 *
 * Express strips the mount path from `req.url`, so the proxy sees `/insecure/f:…/plain/…` and
 * verifies signatures over that path: sign URLs without the `/audio` prefix. The example asks
 * itself for a 64 kbps mono MP3 and for the source's `/info`, prints what came back, and exits.
 */
import type { AddressInfo } from 'node:net';
import { createAudioProxy, ensureDemoLibrary, loadConfig, resolveFfmpeg } from 'audio-proxy';
import express from 'express';

const library = await ensureDemoLibrary(resolveFfmpeg({ env: process.env }).path);
const proxy = await createAudioProxy({
  config: loadConfig({ AP_LOCAL_ROOT: library, AP_ALLOW_INSECURE: '1', AP_LOG_LEVEL: 'warning' }),
});

const app = express();
app.get('/', (_req, res) => {
  res.send('my own route');
});
// The handler answers every request it is given (404 for paths it does not know).
app.use('/audio', (req, res) => void proxy.handler(req, res));

const server = app.listen(0, '127.0.0.1');
await new Promise<void>((resolve) => server.once('listening', resolve));
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
console.log(`listening on ${base}`);

for (const path of [
  '/audio/insecure/f:mp3/ch:1/br:64/plain/local://speech.wav',
  '/audio/insecure/info/plain/local://music.flac',
]) {
  const response = await fetch(base + path);
  const body = Buffer.from(await response.arrayBuffer());
  console.log(`GET ${path}`);
  console.log(`→ ${response.status} ${response.headers.get('content-type')}, ${body.length} bytes`);
  if (path.includes('/info/')) {
    const info = JSON.parse(body.toString()) as { duration?: number };
    console.log(`  duration ${info.duration} s`);
  }
}

server.close();
server.closeAllConnections();
await proxy.close();
console.log('closed');
