/**
 * Issue #14, "the allowlist is not the read", through a real proxy and a real HTTPS origin on
 * loopback (self-signed, trusted through `AP_S3_CA_BUNDLE`). A second origin, never allowlisted,
 * stands for the host an attacker wants the proxy to reach; it must never see a request.
 *
 * Before the fix ffmpeg fetched the URL itself: it followed the GET's redirect that the proxy's
 * HEAD never saw, fetched the segments a playlist named, trusted HEAD's size, and reached any
 * port of an allowed host.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spoolCount } from '../../src/sources/spool.js';
import { makeFixtures } from '../fixtures/audio.js';
import { closeLeavingNothing, get, type Harness, startHarness, waitFor } from './harness.js';

const dir = mkdtempSync(join(tmpdir(), 'ap-remote-'));
const certFile = join(dir, 'cert.pem');
const keyFile = join(dir, 'key.pem');

let origin: Server;
let port: number;
let elsewhere: Server;
let elsewherePort: number;
const elsewhereRequests: string[] = [];
let wav: Buffer;
let h: Harness;

async function listen(server: Server): Promise<number> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as AddressInfo).port;
}

beforeAll(async () => {
  execFileSync(
    'openssl',
    [
      ...['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', certFile],
      ...['-days', '1', '-subj', '/CN=localhost'],
      ...['-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1'],
    ],
    { stdio: 'ignore' },
  );
  wav = readFileSync((await makeFixtures()).stereoWav);
  const tls = { key: readFileSync(keyFile), cert: readFileSync(certFile) };
  elsewhere = createServer(tls, (req, res) => {
    elsewhereRequests.push(`${req.method} ${req.url}`);
    res.writeHead(200, { 'content-type': 'audio/mpeg', 'content-length': wav.length });
    res.end(req.method === 'HEAD' ? undefined : wav);
  });
  elsewherePort = await listen(elsewhere);
  origin = createServer(tls, (req, res) => {
    const head = req.method === 'HEAD';
    switch (req.url) {
      case '/a.wav':
        res.writeHead(200, { 'content-length': wav.length });
        res.end(head ? undefined : wav);
        return;
      case '/moved.wav':
        if (head) {
          res.writeHead(200, { 'content-length': wav.length });
          res.end();
        } else {
          res.writeHead(302, { location: `https://127.0.0.1:${elsewherePort}/secret.wav` });
          res.end();
        }
        return;
      case '/playlist.mp3': {
        const body = `#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:3,\nhttps://127.0.0.1:${elsewherePort}/seg.ts\n#EXT-X-ENDLIST\n`;
        res.writeHead(200, { 'content-length': Buffer.byteLength(body) });
        res.end(head ? undefined : body);
        return;
      }
      case '/lies.wav':
        if (head) {
          res.writeHead(200, { 'content-length': 100 });
          res.end();
        } else {
          res.writeHead(200, { 'transfer-encoding': 'chunked' });
          res.end(wav);
        }
        return;
      default:
        res.writeHead(404);
        res.end();
    }
  });
  port = await listen(origin);
  h = await startHarness({
    AP_S3_CA_BUNDLE: certFile,
    // The bare entry admits port 443 only (before the fix: every port of the host).
    AP_SOURCE_ALLOWLIST: `127.0.0.1:${port}, 127.0.0.1`,
    AP_SOURCE_ALLOW_PRIVATE: '1',
  });
});

afterAll(async () => {
  await closeLeavingNothing(h);
  for (const s of [origin, elsewhere]) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
  rmSync(dir, { recursive: true, force: true });
});

const src = (path: string, p = port) => `plain/https://127.0.0.1:${p}${path}`;
const errorOf = (body: Buffer) => (JSON.parse(body.toString()) as { error: string }).error;

describe('remote sources are read by the proxy, not by ffmpeg', () => {
  it('an allowlisted file renders', async () => {
    const r = await get(h.url, `/insecure/f:mp3/${src('/a.wav')}`);
    expect(r.status).toBe(200);
    expect(r.body.length).toBeGreaterThan(1000);
  });

  it('HEAD 200 / GET 302 to another host: 404, and the other host is never contacted', async () => {
    const r = await get(h.url, `/insecure/f:mp3/${src('/moved.wav')}`);
    expect(r.status).toBe(404);
    expect(elsewhereRequests).toEqual([]);
  });

  it('a playlist served by an allowed host: 415, its segments never fetched', async () => {
    const info = await get(h.url, `/insecure/info/${src('/playlist.mp3')}`);
    expect(info.status).toBe(415);
    expect(errorOf(info.body)).toBe('undecodable_source');
    const render = await get(h.url, `/insecure/f:mp3/${src('/playlist.mp3')}`);
    expect(render.status).toBe(415);
    expect(elsewhereRequests).toEqual([]);
  });

  it('a HEAD that understates the size: 413 once the bytes read pass AP_MAX_SRC_BYTES', async () => {
    h.config.set({ maxSrcBytes: 10_000 });
    try {
      const r = await get(h.url, `/insecure/f:mp3/${src('/lies.wav')}`);
      expect(r.status).toBe(413);
      expect(errorOf(r.body)).toBe('source_too_large');
    } finally {
      h.config.set({ maxSrcBytes: 2_000_000_000 });
    }
  });

  it('the allowlist names the port: the same host on another port is a 404', async () => {
    const r = await get(h.url, `/insecure/f:mp3/${src('/secret.wav', elsewherePort)}`);
    expect(r.status).toBe(404);
    expect(elsewhereRequests).toEqual([]);
  });

  it('non-public addresses are refused by default', async () => {
    h.config.set({ sourceAllowPrivate: false });
    try {
      const r = await get(h.url, `/insecure/f:mp3/br:65/${src('/a.wav')}`);
      expect(r.status).toBe(404);
    } finally {
      h.config.set({ sourceAllowPrivate: true });
    }
  });

  it('spools are gone once their linger has passed', async () => {
    await waitFor(() => spoolCount().live === 0 && spoolCount().filling === 0, 15_000);
  }, 20_000);
});
