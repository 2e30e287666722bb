/**
 * `node bench/listener-floor.mjs [--writes 22] [--listeners 64] [--rounds 5]`: the floor under
 * COAL's per-listener figure (`bench/cpu.ts`): what one more listener costs a plain Node HTTP
 * server that does only the unavoidable part of the proxy's fan-out. A child process accepts
 * `--listeners` connections, parses their requests, tunes each socket as the proxy does
 * (`tuneSocket`), writes the same 720 KiB to every response in `--writes` chunked writes 40 ms
 * apart (the render's pace: a batch every 50 ms), ends them, and reports its own CPU from
 * before the first connection to the last close; this process reads. Printed per listener, with
 * the kernel's share. Needs `dist/` (`npm run build`).
 */
import { fork } from 'node:child_process';
import { createServer } from 'node:http';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';

const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const at = args.indexOf(`--${name}`);
  return at === -1 ? fallback : Number(args[at + 1]);
};
const WRITES = flag('writes', 22);
const LISTENERS = flag('listeners', 64);
const ROUNDS = flag('rounds', 5);
const BYTES = 720 * 1024;

if (args[0] === '--server') {
  const { tuneSocket } = await import(
    new URL('../dist/http/socketTuning.js', import.meta.url).href
  );
  const chunk = Buffer.alloc(Math.ceil(BYTES / WRITES), 1);
  let responses = [];
  let closed = 0;
  let cpu0 = process.cpuUsage();
  const fanOut = async (all) => {
    for (let i = 0; i < WRITES; i++) {
      for (const res of all) res.write(chunk);
      await new Promise((r) => setTimeout(r, 40));
    }
    for (const res of all) res.end();
  };
  const server = createServer((_req, res) => {
    tuneSocket(res.socket);
    res.writeHead(200, { 'content-type': 'audio/ogg' });
    res.on('close', () => {
      if (++closed < LISTENERS) return;
      const { user, system } = process.cpuUsage(cpu0);
      process.send({ us: user + system, systemUs: system });
    });
    responses.push(res);
    if (responses.length === LISTENERS) {
      void fanOut(responses);
      responses = [];
    }
  });
  process.on('message', () => {
    closed = 0;
    cpu0 = process.cpuUsage();
    process.send({ ready: true });
  });
  process.once('disconnect', () => process.exit(0));
  server.listen(0, '127.0.0.1', () => process.send({ port: server.address().port }));
} else {
  const child = fork(fileURLToPath(import.meta.url), ['--server', ...args]);
  const next = () => new Promise((resolve) => child.once('message', resolve));
  const { port } = await next();
  const perListener = [];
  for (let round = 0; round < ROUNDS + 1; round++) {
    child.send('start');
    await next();
    const report = next();
    const sockets = await Promise.all(
      Array.from(
        { length: LISTENERS },
        () =>
          new Promise((resolve) => {
            const s = connect(port, '127.0.0.1', () => resolve(s));
          }),
      ),
    );
    const closes = sockets.map(
      (s) =>
        new Promise((resolve) => {
          s.on('data', () => {});
          s.on('close', resolve);
        }),
    );
    for (const s of sockets) s.write('GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    await Promise.all(closes);
    const { us, systemUs } = await report;
    if (round === 0) continue; // the first round warms the JIT up
    perListener.push(us / LISTENERS);
    console.log(
      `round ${round}: ${(us / LISTENERS).toFixed(0)} µs per listener (${((100 * systemUs) / us).toFixed(0)} % in the kernel)`,
    );
  }
  child.disconnect();
  const sorted = perListener.sort((a, b) => a - b);
  console.log(
    `plain Node, ${LISTENERS} listeners × ${WRITES} writes of ${BYTES / 1024} KiB: ${sorted[Math.floor(sorted.length / 2)].toFixed(0)} µs per listener (${sorted[0].toFixed(0)}–${sorted.at(-1).toFixed(0)})`,
  );
}
