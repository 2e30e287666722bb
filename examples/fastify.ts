/**
 * The proxy mounted under `/audio` in a Fastify 5 app. Run it with
 *
 *     npx tsx examples/fastify.ts
 *
 * Fastify routes see its own request and reply objects; the proxy wants Node's. The route takes
 * the reply over (`reply.hijack()`, so Fastify sends nothing itself), strips the prefix, and hands
 * `request.raw` and `reply.raw` to the handler. The example asks itself for a 5 s mono FLAC
 * excerpt (GET, then HEAD), prints what came back, and exits.
 */

import { createAudioProxy, ensureDemoLibrary, loadConfig, resolveFfmpeg } from 'audio-proxy';
import Fastify from 'fastify';

const PREFIX = '/audio';

const library = await ensureDemoLibrary(resolveFfmpeg({ env: process.env }).path);
const proxy = await createAudioProxy({
  config: loadConfig({ AP_LOCAL_ROOT: library, AP_ALLOW_INSECURE: '1', AP_LOG_LEVEL: 'warning' }),
});

const app = Fastify();
app.get('/', async () => 'my own route');
app.route({
  method: ['GET', 'HEAD', 'OPTIONS'],
  url: `${PREFIX}/*`,
  exposeHeadRoute: false, // HEAD is listed above: the proxy answers it itself
  handler: (request, reply) => {
    reply.hijack();
    request.raw.url = request.raw.url!.slice(PREFIX.length); // signatures cover the proxy's path
    return proxy.handler(request.raw, reply.raw);
  },
});
const base = await app.listen({ port: 0, host: '127.0.0.1' });
console.log(`listening on ${base}`);

const path = `${PREFIX}/insecure/f:flac/t:0:5/ch:1/sr:22050/plain/local://music.flac`;
for (const method of ['GET', 'HEAD']) {
  const response = await fetch(base + path, { method });
  const body = Buffer.from(await response.arrayBuffer());
  console.log(`${method} ${path}`);
  console.log(
    `→ ${response.status} ${response.headers.get('content-type')}, ${body.length} bytes (content-length ${response.headers.get('content-length') ?? 'not sent'})`,
  );
}

await app.close();
await proxy.close();
console.log('closed');
