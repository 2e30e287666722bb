/**
 * One cluster node in a process of its own, for the test that kills a node mid-render: SIGKILL
 * is the only honest "crash" (no finally, no close, no release), and it cannot be had in-process.
 * Its whole configuration comes from the environment; it prints `listening <url>` once bound.
 */
import { pino } from 'pino';
import { loadConfig } from '../../src/config/index.js';
import { createAudioProxy } from '../../src/proxy.js';

const config = loadConfig(process.env);
const proxy = await createAudioProxy({ config, logger: pino({ level: 'silent' }) });
const { url } = await proxy.listen({
  host: '127.0.0.1',
  metricsHost: '127.0.0.1',
  metricsPort: 0,
});
process.stdout.write(`listening ${url}\n`);
