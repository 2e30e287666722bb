/**
 * Slow clients and memory: `npx tsx bench/slow-clients.ts [--clients 200] [--stalled 10]
 * [--seconds 600] [--late-stalled 0]`.
 *
 * 200 readers at 1/10 of the variant's bitrate plus readers that never read, all on one render
 * of a 10-minute generated source (mp3 128 kb/s), against a proxy in its own process. Prints the
 * proxy's RSS (idle, peak during the render, with only the stalled readers left), the bound
 * (idle + one backlog + 64 MiB), and the render's wall time with the crowd beside the same
 * render with one fast client (the baseline, same run). Exits 1 when a bound is broken.
 *
 * The proxy sets `TCP_NOTSENT_LOWAT` on each client socket itself when the optional `sockopt`
 * package is installed (src/http/socketTuning.ts); the line printed first says whether it does.
 * `--notsent-lowat BYTES` sets the kernel's `net.ipv4.tcp_notsent_lowat` for the run (root only;
 * restored after). By default Linux lets a socket whose reader stalls take ~3.8 MiB of unsent
 * data (send-buffer autotuning up to `tcp_wmem`'s 4 MiB), so 200 slow readers make the proxy copy
 * ~760 MiB into kernel buffers while ffmpeg renders; with the watermark the excess stays as
 * references to the shared backlog chunks in Node. The value in force is printed either way.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tuning } from '../src/http/socketTuning.js';
import { RSS_HEADROOM_BYTES, runCrowd } from '../test/reliability/slowCrowd.js';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : Number(process.argv[i + 1]);
}

const clients = arg('clients', 200);
const stalled = arg('stalled', 10);
const seconds = arg('seconds', 600);
const lateStalled = arg('late-stalled', 0);
const LOWAT_PATH = '/proc/sys/net/ipv4/tcp_notsent_lowat';
const readLowat = (): string => {
  try {
    return readFileSync(LOWAT_PATH, 'utf8').trim();
  } catch {
    return 'unknown';
  }
};
const lowatBefore = readLowat();
const wantedLowat = arg('notsent-lowat', Number.NaN);
if (!Number.isNaN(wantedLowat)) {
  if (!Number.isInteger(wantedLowat) || wantedLowat < 1) {
    throw new RangeError('--notsent-lowat needs a positive integer (bytes)');
  }
  writeFileSync(LOWAT_PATH, String(wantedLowat)); // throws without root: nothing half-done
  process.on('exit', () => writeFileSync(LOWAT_PATH, lowatBefore));
}
// Kept across runs: generating 10 minutes of wav is ~100 MB of writing.
const dir = join(tmpdir(), 'audio-proxy-bench-slow');
mkdirSync(dir, { recursive: true });

const mib = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`;
const perSocket = tuning();
console.log(
  `slow clients: ${clients} at 1/10 bitrate, ${stalled} stalled, ${lateStalled} stalled joining halfway, ${seconds} s source, net.ipv4.tcp_notsent_lowat ${readLowat()}, per-socket TCP_NOTSENT_LOWAT ${'notsentLowatBytes' in perSocket ? perSocket.notsentLowatBytes : `off (${perSocket.unavailable})`}`,
);
const f = await runCrowd({
  clients,
  stalled,
  lateStalled,
  seconds,
  dir,
  log: (l) => console.log(`  ${l}`),
});
const bound = f.idleRss + f.backlogBytes + RSS_HEADROOM_BYTES;
const rows: [string, string][] = [
  ['idle RSS', mib(f.idleRss)],
  ['backlog (variant size)', mib(f.backlogBytes)],
  ['bound: idle + backlog + 64 MiB', mib(bound)],
  ['peak RSS during the render', mib(f.peakRss)],
  ['RSS with only stalled readers', mib(f.stallRss)],
  ['render, one fast client (baseline)', `${(f.soloMs / 1000).toFixed(2)} s`],
  ['render, with the crowd', `${(f.crowdRenderMs / 1000).toFixed(2)} s`],
  ['ratio crowd / baseline', (f.crowdRenderMs / f.soloMs).toFixed(3)],
  [
    'proxy CPU: baseline / crowd',
    `${(f.soloCpuMs / 1000).toFixed(2)} s / ${(f.crowdCpuMs / 1000).toFixed(2)} s`,
  ],
  [
    'ffmpeg CPU: baseline / crowd',
    `${(f.soloFfmpegCpuMs / 1000).toFixed(2)} s / ${(f.crowdFfmpegCpuMs / 1000).toFixed(2)} s`,
  ],
  ['slow readers had read (min..max)', `${f.slowReceived[0]}..${f.slowReceived[1]} bytes`],
  ['statuses', JSON.stringify(f.statuses)],
  ['x-audio-proxy', JSON.stringify(f.cacheStatuses)],
  ['slots held / renders running after', `${f.slotsHeldAfter} / ${f.rendersRunningAfter}`],
  ['server exit code after SIGTERM', String(f.exitCode)],
];
console.log('');
for (const [k, v] of rows) console.log(`${k.padEnd(36)} ${v}`);
const ok =
  f.peakRss <= bound &&
  f.stallRss <= bound &&
  f.slotsHeldAfter === 0 &&
  f.rendersRunningAfter === 0 &&
  f.exitCode === 0;
console.log(`\n${ok ? 'PASS' : 'FAIL'}: peak and stall RSS within the bound, nothing held after`);
process.exit(ok ? 0 : 1);
