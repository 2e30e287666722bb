/**
 * One proxy in a process of its own, for scripts/gen-concurrency-docs.ts's cluster hand-off: two
 * nodes in one process would share the diagnostics channels, so each recorder would also hear the
 * other node's telemetry. Its whole configuration comes from the environment; it prints
 * `listening <url> <metricsUrl>` once bound, and closes the proxy and exits on SIGTERM.
 */
import { pino } from 'pino';
import { loadConfig } from '../src/config/index.js';
import { createAudioProxy } from '../src/proxy.js';

const config = loadConfig(process.env);
const proxy = await createAudioProxy({ config, logger: pino({ level: 'silent' }) });
const { url, metricsUrl } = await proxy.listen({
  host: '127.0.0.1',
  metricsHost: '127.0.0.1',
  metricsPort: 0,
});
process.once('SIGTERM', () => {
  void proxy.close().then(() => process.exit(0));
});
process.stdout.write(`listening ${url} ${metricsUrl}\n`);
