/**
 * Cluster render throughput on this machine: the same burst of distinct variants sent to one
 * cluster node, and spread round-robin over three nodes sharing one Redis (each node with the
 * same AP_MAX_CONCURRENCY), interleaved rounds, medians reported. A second figure sends one
 * identical request burst over the nodes: the cluster still makes one ffmpeg, and the price of
 * the forward hop shows in the wall time against the one-node figure.
 *
 * On a machine with fewer cores than 3 × AP_MAX_CONCURRENCY the three nodes compete for the
 * same CPUs, so the ratio measures the cluster's overhead rather than a speed-up: read it as
 * "what the claim, the forward and the registry cost", not as scaling.
 *
 * Run: `npx tsx bench/cluster.ts [rounds] [renders]` (defaults 3 and 18), or
 * `npm run bench -- cluster`. Needs ffmpeg and /usr/bin/redis-server.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { loadConfig } from '../src/config/index.js';
import { type AudioProxy, createAudioProxy } from '../src/proxy.js';
import { resolveFfmpeg } from '../src/workers/ffmpegPath.js';
import { startRedisServer } from '../test/cluster/redisServer.js';
import { freePort } from '../test/ports.js';
import { report } from './report.js';

const ROUNDS = Number(process.argv[2] ?? 3);
const RENDERS = Number(process.argv[3] ?? 18);
/** Render slots per node: the default on a 2-core machine. */
const SLOTS_PER_NODE = 2;
/** Source length, in seconds: long enough that encoding, not HTTP, dominates a render. */
const SOURCE_S = 20;
/** Identical requests in the coalescing figure. */
const IDENTICAL = 30;

const ffmpeg = resolveFfmpeg({ env: process.env }).path;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

function fetchAll(base: string, path: string): Promise<number> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path, agent: false }, (res) => {
      let bytes = 0;
      res.on('data', (c: Buffer) => {
        bytes += c.length;
      });
      res.on('end', () =>
        res.statusCode === 200 ? resolve(bytes) : reject(new Error(`${res.statusCode} ${path}`)),
      );
    });
    req.on('error', reject);
    req.end();
  });
}

async function startNode(id: string, root: string, redisUrl: string) {
  const port = await freePort();
  const proxy = await createAudioProxy({
    config: loadConfig({
      AP_LOCAL_ROOT: root,
      AP_ALLOW_INSECURE: '1',
      AP_KEY: 'c1'.repeat(32), // shared by the nodes: it authenticates their forwards
      AP_SALT: '5a17',
      AP_MAX_CONCURRENCY: String(SLOTS_PER_NODE),
      AP_MAX_PROBE_CONCURRENCY: '2',
      AP_QUEUE_SIZE: '256',
      AP_READY_QUEUE_THRESHOLD: '1',
      AP_LOG_LEVEL: 'error',
      AP_PORT: String(port),
      AP_CLUSTER_REDIS_URL: redisUrl,
      AP_CLUSTER_NODE_ID: id,
      AP_CLUSTER_ADVERTISE_URL: `http://127.0.0.1:${port}`,
    }),
    logger: pino({ level: 'silent' }),
  });
  const { url } = await proxy.listen({
    host: '127.0.0.1',
    port,
    metricsHost: '127.0.0.1',
    metricsPort: 0,
  });
  return { proxy, url };
}

/** Wall time of `count` requests fired at once, spread round-robin over `urls`. */
async function burst(urls: readonly string[], paths: readonly string[]): Promise<number> {
  const t0 = performance.now();
  await Promise.all(paths.map((p, i) => fetchAll(urls[i % urls.length]!, p)));
  return performance.now() - t0;
}

async function main() {
  const root = mkdtempSync(join(tmpdir(), 'ap-bench-cluster-'));
  execFileSync(ffmpeg, [
    ...['-nostdin', '-loglevel', 'error', '-y'],
    ...['-f', 'lavfi', '-i', `sine=frequency=440:sample_rate=44100:duration=${SOURCE_S}`],
    ...['-c:a', 'pcm_s16le', '-ac', '2', join(root, 'in.wav')],
  ]);
  const redis = await startRedisServer();
  const nodes: Array<{ proxy: AudioProxy; url: string }> = [];
  try {
    for (const id of ['bench-a', 'bench-b', 'bench-c']) {
      nodes.push(await startNode(id, root, redis.url));
    }
    const one = [nodes[0]!.url];
    const three = nodes.map((n) => n.url);
    let seq = 0;
    const distinct = () =>
      Array.from({ length: RENDERS }, () => `/insecure/f:mp3/cb:d${++seq}/plain/local://in.wav`);
    const identical = () => {
      const p = `/insecure/f:mp3/cb:i${++seq}/plain/local://in.wav`;
      return Array<string>(IDENTICAL).fill(p);
    };
    await burst(three, distinct().slice(0, 6)); // warm every node's pools and connections

    const oneMs: number[] = [];
    const threeMs: number[] = [];
    const sameOneMs: number[] = [];
    const sameThreeMs: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      oneMs.push(await burst(one, distinct()));
      threeMs.push(await burst(three, distinct()));
      sameOneMs.push(await burst(one, identical()));
      sameThreeMs.push(await burst(three, identical()));
    }
    const rate = (ms: number) => (RENDERS / ms) * 1000;
    const forwards = nodes.reduce((s, n) => s + n.proxy.cluster!.forwards.relayed, 0);
    console.log(
      `cluster render throughput, ${RENDERS} distinct ${SOURCE_S} s mp3 renders per burst, ` +
        `${SLOTS_PER_NODE} slots per node, median of ${ROUNDS} rounds`,
    );
    console.log(
      `  1 node : ${median(oneMs).toFixed(0)} ms  (${rate(median(oneMs)).toFixed(2)} renders/s)`,
    );
    console.log(
      `  3 nodes: ${median(threeMs).toFixed(0)} ms  (${rate(median(threeMs)).toFixed(2)} renders/s)` +
        `  ratio 3/1 = ${(median(oneMs) / median(threeMs)).toFixed(2)}`,
    );
    console.log(`${IDENTICAL} identical requests (one ffmpeg either way), median wall time`);
    console.log(`  1 node : ${median(sameOneMs).toFixed(0)} ms`);
    console.log(
      `  3 nodes: ${median(sameThreeMs).toFixed(0)} ms  (forward hop included; ${forwards} requests relayed in all)`,
    );
    report('cluster', {
      renders: RENDERS,
      one_node_ms: Math.round(median(oneMs)),
      three_nodes_ms: Math.round(median(threeMs)),
      throughput_ratio: Number((median(oneMs) / median(threeMs)).toFixed(3)),
      identical_one_node_ms: Math.round(median(sameOneMs)),
      identical_three_nodes_ms: Math.round(median(sameThreeMs)),
    });
  } finally {
    await Promise.allSettled(nodes.map((n) => n.proxy.close()));
    await redis.kill();
    rmSync(root, { recursive: true, force: true });
  }
}

await main();
