/**
 * A proxy in a process of its own, so its resident memory can be read from `/proc` without the
 * clients' buffers in it. Run as `node --import tsx slowServer.ts`; the environment to load is
 * the JSON in `AP_SLOW_SERVER_ENV`. Prints one JSON line `{url, metricsUrl, pid}` once both
 * listeners are bound, and closes the proxy (cancelling renders, draining pools) on SIGTERM.
 *
 * Invariants: nothing is printed on stdout but that line; the process exits only after
 * `proxy.close()` resolved, so "exited" means "nothing left running".
 * Races: a SIGTERM before the listeners are up waits for them, then closes.
 * Events: none.
 */
import { pino } from 'pino';
import { loadConfig } from '../../src/config/index.js';
import { createAudioProxy } from '../../src/proxy.js';

const env = JSON.parse(process.env.AP_SLOW_SERVER_ENV ?? '{}') as Record<string, string>;
const proxy = await createAudioProxy({
  config: loadConfig(env),
  logger: pino({ level: 'silent' }),
});
const { url, metricsUrl } = await proxy.listen({ host: '127.0.0.1', port: 0, metricsPort: 0 });
process.stdout.write(`${JSON.stringify({ url, metricsUrl, pid: process.pid })}\n`);
process.once('SIGTERM', () => {
  void proxy.close().then(() => process.exit(0));
});
