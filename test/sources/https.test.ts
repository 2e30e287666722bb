/**
 * `https://` sources against a local HTTPS server whose self-signed certificate (made here with
 * openssl) is trusted through `AP_S3_CA_BUNDLE`: an allowlisted, present file resolves with its
 * size and mtime and opens as a spool the proxy fetched (ffprobe reads fd 3, never the URL); an
 * unlisted host, or port, is a 404 without any request; a host on a loopback address is a 404
 * unless `AP_SOURCE_ALLOW_PRIVATE`; 404, 403 and redirects are 404, on the HEAD and on the GET
 * (HEAD 200 / GET 302 reaches no other host); 5xx, an untrusted certificate, a refused connection
 * and a timeout are 502; a server without HEAD is not refused; a large declared size is 413 for
 * renders only, and a HEAD that understates the size is caught by the spool's byte counter.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import type { ResolvedSource } from '../../src/core/source.js';
import { parseSource } from '../../src/sources/parse.js';
import { resolveRemote } from '../../src/sources/remote.js';
import { FD_INPUT_PATH } from '../../src/workers/argv.js';
import { resolveFfprobe } from '../../src/workers/ffmpegPath.js';
import { buildProbeArgv } from '../../src/workers/probe.js';
import { makeFixtures } from '../fixtures/audio.js';

const dir = mkdtempSync(join(tmpdir(), 'ap-https-'));
const certFile = join(dir, 'cert.pem');
const keyFile = join(dir, 'key.pem');
const LAST_MODIFIED = 'Tue, 01 Jul 2025 10:00:00 GMT';

let server: Server;
let port: number;
/** A second origin, never allowlisted: a redirect target that must never be contacted. */
let elsewhere: Server;
let elsewherePort: number;
const elsewhereRequests: string[] = [];
let wav: Buffer;
const requests: string[] = [];

beforeAll(async () => {
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      keyFile,
      '-out',
      certFile,
      '-days',
      '1',
      '-subj',
      '/CN=localhost',
      '-addext',
      'subjectAltName=DNS:localhost,IP:127.0.0.1',
    ],
    { stdio: 'ignore' },
  );
  wav = await readFile((await makeFixtures()).stereoWav);
  server = createServer(
    { key: readFileSync(keyFile), cert: readFileSync(certFile) },
    (req, res) => {
      requests.push(`${req.method} ${req.url}`);
      switch (req.url) {
        case '/a.wav':
          res.writeHead(200, {
            'content-type': 'audio/wav',
            'content-length': wav.length,
            'last-modified': LAST_MODIFIED,
          });
          res.end(req.method === 'HEAD' ? undefined : wav);
          return;
        case '/forbidden.wav':
          res.writeHead(403);
          res.end();
          return;
        case '/moved.wav':
          res.writeHead(302, { location: 'https://elsewhere.example/a.wav' });
          res.end();
          return;
        case '/broken.wav':
          res.writeHead(503);
          res.end();
          return;
        case '/nohead.wav':
          if (req.method === 'HEAD') {
            res.writeHead(405);
            res.end();
          } else {
            res.end(wav);
          }
          return;
        case '/slow.wav':
          return; // never answers
        case '/head-ok-get-moved.wav':
          // Issue #14: the proxy's HEAD saw 200, ffmpeg's GET followed this redirect.
          if (req.method === 'HEAD') {
            res.writeHead(200, { 'content-length': wav.length });
            res.end();
          } else {
            res.writeHead(302, { location: `https://127.0.0.1:${elsewherePort}/secret.wav` });
            res.end();
          }
          return;
        case '/lies.wav':
          // HEAD claims 100 bytes; the GET sends the whole file, with no length to check first.
          if (req.method === 'HEAD') {
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
    },
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
  elsewhere = createServer(
    { key: readFileSync(keyFile), cert: readFileSync(certFile) },
    (req, res) => {
      elsewhereRequests.push(`${req.method} ${req.url}`);
      res.writeHead(200, { 'content-length': wav.length });
      res.end(wav);
    },
  );
  await new Promise<void>((r) => elsewhere.listen(0, '127.0.0.1', r));
  elsewherePort = (elsewhere.address() as AddressInfo).port;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  elsewhere.closeAllConnections();
  await new Promise((r) => elsewhere.close(r));
  await rm(dir, { recursive: true, force: true });
});

const trusted = () => ({
  AP_S3_CA_BUNDLE: certFile,
  AP_SOURCE_ALLOWLIST: `127.0.0.1:${port}, localhost:${port}`,
  AP_SOURCE_ALLOW_PRIVATE: '1', // the test server is on loopback
  AP_LOG_LEVEL: 'error',
});

/** ffprobe on a lease's descriptor, as the proxy runs it (fd 3, whitelists). */
function probeFd(fd: number) {
  const ffprobe = resolveFfprobe({ env: process.env }).path;
  const argv = buildProbeArgv({ url: FD_INPUT_PATH, kind: 'local' });
  return spawnSync(ffprobe, argv, { stdio: ['ignore', 'pipe', 'pipe', fd] });
}

async function resolve(
  path: string,
  env: Record<string, string> = trusted(),
  opts: { enforceSize?: boolean; timeoutMs?: number; host?: string } = {},
) {
  const parsed = parseSource(`plain/https://${opts.host ?? '127.0.0.1'}:${port}${path}`);
  if (!parsed.ok) throw new Error(`unparseable ${path}`);
  return resolveRemote(parsed.source, parsed.canonical, loadConfig(env), opts);
}

describe('https:// sources', () => {
  it('an allowlisted file resolves with its size and mtime, and opens as a spool ffprobe reads', async () => {
    const r = (await resolve('/a.wav')) as ResolvedSource;
    expect(r.input).toEqual({ url: `https://127.0.0.1:${port}/a.wav`, kind: 'https' });
    expect(r.canonical).toBe(`https://127.0.0.1:${port}/a.wav`);
    expect(r.size).toBe(wav.length);
    expect(r.mtimeMs).toBe(Date.parse(LAST_MODIFIED));
    const byName = (await resolve('/a.wav', trusted(), { host: 'LOCALHOST' })) as ResolvedSource;
    expect(byName.canonical).toBe(`https://localhost:${port}/a.wav`);
    const opened = await r.open!();
    if (!opened.ok) throw new Error(opened.refusal);
    try {
      expect(readFileSync(`/proc/self/fd/${opened.lease.fd}`).equals(wav)).toBe(true);
      const probe = probeFd(opened.lease.fd);
      expect(probe.status, probe.stderr.toString()).toBe(0);
      expect(JSON.parse(probe.stdout.toString()).streams[0]).toMatchObject({
        codec_type: 'audio',
        channels: 2,
      });
    } finally {
      opened.lease.release();
    }
  });

  it('HEAD 200 / GET 302: the GET is refused as a 404, the other host never contacted', async () => {
    const r = (await resolve('/head-ok-get-moved.wav')) as ResolvedSource;
    expect(r.size).toBe(wav.length); // the HEAD alone looks fine
    const opened = await r.open!();
    expect(opened).toMatchObject({ ok: false, refusal: 'not_found' });
    expect(elsewhereRequests).toEqual([]);
  });

  it('a HEAD that understates the size: the spool stops at AP_MAX_SRC_BYTES (413)', async () => {
    const env = { ...trusted(), AP_MAX_SRC_BYTES: '1000' };
    const r = (await resolve('/lies.wav', env)) as ResolvedSource;
    expect(r.size).toBe(100);
    expect(await r.open!()).toEqual({ ok: false, refusal: 'source_too_large' });
  });

  it('the allowlist names ports: the right host on another port is a 404 without a request', async () => {
    const before = requests.length;
    for (const entry of ['127.0.0.1', `127.0.0.1:${port + 1}`, '127.0.0.1:443']) {
      expect(await resolve('/a.wav', { ...trusted(), AP_SOURCE_ALLOWLIST: entry }), entry).toEqual({
        failure: { type: 'not_found' },
      });
    }
    expect(requests.length).toBe(before);
  });

  it('a host on a loopback address is a 404 unless AP_SOURCE_ALLOW_PRIVATE', async () => {
    const before = requests.length;
    const { AP_SOURCE_ALLOW_PRIVATE: _, ...defaults } = trusted();
    expect(await resolve('/a.wav', defaults)).toEqual({ failure: { type: 'not_found' } });
    expect(await resolve('/a.wav', defaults, { host: 'localhost' })).toEqual({
      failure: { type: 'not_found' },
    });
    expect(requests.length).toBe(before);
  });

  it('an unlisted host is a 404 without any request; so is every host when the list is empty', async () => {
    const before = requests.length;
    expect(await resolve('/a.wav', { ...trusted(), AP_SOURCE_ALLOWLIST: 'media.example' })).toEqual(
      { failure: { type: 'not_found' } },
    );
    expect(await resolve('/a.wav', { AP_S3_CA_BUNDLE: certFile })).toEqual({
      failure: { type: 'not_found' },
    });
    expect(requests.length).toBe(before);
  });

  it('missing, forbidden and redirected are the one 404 (a redirect is never followed)', async () => {
    for (const path of ['/none.wav', '/forbidden.wav', '/moved.wav']) {
      expect(await resolve(path), path).toEqual({ failure: { type: 'not_found' } });
    }
  });

  it('a 5xx, an untrusted certificate and a refused connection are 502', async () => {
    expect(await resolve('/broken.wav')).toEqual({ failure: { type: 'upstream_unavailable' } });
    expect(
      await resolve('/a.wav', {
        AP_SOURCE_ALLOWLIST: `127.0.0.1:${port}`,
        AP_SOURCE_ALLOW_PRIVATE: '1',
      }),
    ).toEqual({
      failure: { type: 'upstream_unavailable' },
    });
    const parsed = parseSource('plain/https://127.0.0.1:9/a.wav');
    if (!parsed.ok) throw new Error('unparseable');
    const closedPort = { ...trusted(), AP_SOURCE_ALLOWLIST: '127.0.0.1:9' };
    expect(await resolveRemote(parsed.source, parsed.canonical, loadConfig(closedPort))).toEqual({
      failure: { type: 'upstream_unavailable' },
    });
  });

  it('a server that never answers the HEAD is 502 after the timeout', async () => {
    expect(await resolve('/slow.wav', trusted(), { timeoutMs: 200 })).toEqual({
      failure: { type: 'upstream_unavailable' },
    });
  });

  it('a server without HEAD is not refused: the size is left unknown', async () => {
    const r = (await resolve('/nohead.wav')) as ResolvedSource;
    expect(r.input.kind).toBe('https');
    expect(r.size).toBeUndefined();
  });

  it('a declared size over AP_MAX_SRC_BYTES is 413 for renders, not for /info', async () => {
    const env = { ...trusted(), AP_MAX_SRC_BYTES: '1000' };
    expect(await resolve('/a.wav', env)).toEqual({ failure: { type: 'source_too_large' } });
    expect(await resolve('/a.wav', env, { enforceSize: false })).toMatchObject({
      size: wav.length,
    });
  });
});
