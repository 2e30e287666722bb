// Fixture for host.test.ts: an embedding app whose proxy suffers a fatal actor failure (a
// singleton stopped from outside while the system runs). The library must not exit the process:
// the app hears of it through `onFatal`, after the proxy has stopped, and carries on.
import { createServer } from 'node:http';
import { pino } from 'pino';
import { loadConfig } from '../../src/config/index.js';
import { createAudioProxy } from '../../src/proxy.js';

const host = createServer((_req, res) => res.end('host ok')); // the app's own server
await new Promise<void>((r) => host.listen(0, '127.0.0.1', r));
const proxy = await createAudioProxy({
  config: loadConfig({ AP_LOG_LEVEL: 'error' }),
  logger: pino({ level: 'silent' }),
  onFatal: async (fatal) => {
    process.stdout.write(`onFatal: ${fatal.child} ${fatal.reason.type}\n`);
    let refused = false;
    try {
      await fetch(`${url}/health`);
    } catch {
      refused = true;
    }
    process.stdout.write(`proxy listener refused: ${refused}\n`);
    const port = (host.address() as { port: number }).port;
    const body = await (await fetch(`http://127.0.0.1:${port}/`)).text();
    process.stdout.write(`host still serving: ${body}\n`);
    host.close();
  },
});
const { url } = await proxy.listen({ host: '127.0.0.1', port: 0, metricsPort: 0 });
proxy.actors.readiness.stop(); // a singleton ending while the system runs is fatal
