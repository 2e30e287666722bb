/**
 * Coalescing: twenty listeners ask for the same variant at the same moment, and ffmpeg runs
 * once. Run it with
 *
 *     npx tsx examples/coalescing-demo.ts
 *
 * The proxy is given a wrapper in place of ffmpeg that appends its pid to a log and then
 * becomes the real ffmpeg, so the spawns are counted from outside the proxy (all but the four
 * listings with which the proxy asks, at boot, what its ffmpeg can do). The first request
 * starts the render (`MISS`); the other nineteen join it (`COALESCED`) and receive the bytes
 * produced so far, then the rest live. Every body is compared with the first.
 */
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAudioProxy, ensureDemoLibrary, loadConfig, resolveFfmpeg } from 'audio-proxy';

const CLIENTS = 20;
const PATH = '/insecure/f:mp3/br:128/t:0:30/plain/local://music.flac';

const ffmpeg = resolveFfmpeg({ env: process.env }).path;
const library = await ensureDemoLibrary(ffmpeg);

// The counting wrapper: `exec` keeps the pid, so the log holds ffmpeg's own pids. The boot's
// capability listings (`ffmpeg -filters` and the like) are not encodes: they pass uncounted.
const scratch = await mkdtemp(join(tmpdir(), 'ap-coalescing-'));
const spawnLog = join(scratch, 'spawns.log');
const wrapper = join(scratch, 'ffmpeg');
await writeFile(spawnLog, '');
await writeFile(
  wrapper,
  [
    '#!/bin/sh',
    `case "$1" in -filters|-encoders|-decoders|-formats) exec '${ffmpeg}' "$@" ;; esac`,
    `echo "$$" >> '${spawnLog}'`,
    `exec '${ffmpeg}' "$@"`,
    '',
  ].join('\n'),
);
await chmod(wrapper, 0o755);

const proxy = await createAudioProxy({
  config: loadConfig({
    AP_LOCAL_ROOT: library,
    AP_ALLOW_INSECURE: '1',
    AP_LOG_LEVEL: 'warning',
    AP_FFMPEG_PATH: wrapper,
  }),
});
const { url, metricsUrl } = await proxy.listen({
  host: '127.0.0.1',
  port: 0,
  metricsHost: '127.0.0.1',
  metricsPort: 0,
});

const responses = await Promise.all(
  Array.from({ length: CLIENTS }, async () => {
    const response = await fetch(url + PATH);
    return {
      status: response.status,
      cache: response.headers.get('x-audio-proxy') ?? '?',
      body: Buffer.from(await response.arrayBuffer()),
    };
  }),
);

const spawns = (await readFile(spawnLog, 'utf8')).split('\n').filter(Boolean).length;
const tally = new Map<string, number>();
for (const r of responses)
  tally.set(`${r.status} ${r.cache}`, (tally.get(`${r.status} ${r.cache}`) ?? 0) + 1);
const first = responses[0]!.body;
const identical = responses.every((r) => r.body.equals(first));

console.log(`GET ${PATH} × ${CLIENTS}, all at once`);
console.log(`answers: ${[...tally].map(([k, n]) => `${k} ×${n}`).join(', ')}`);
console.log(`bodies: ${identical ? 'all identical' : 'DIFFERENT'}, ${first.length} bytes each`);
const metrics = await (await fetch(`${metricsUrl}/metrics`)).text();
for (const line of metrics.split('\n')) {
  if (line.startsWith('audio_proxy_cache_lookups_total{')) console.log(`metrics: ${line}`);
}
console.log(`${CLIENTS} clients, ${spawns} encode${spawns === 1 ? '' : 's'}`);

await proxy.close();
await rm(scratch, { recursive: true, force: true });
