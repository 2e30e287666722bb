/**
 * `https://` sources against a local HTTPS server whose self-signed certificate (made here with
 * openssl) is trusted through `AP_S3_CA_BUNDLE`: an allowlisted, present file resolves with its
 * size and mtime and ffprobe reads the URL, verifying the peer against that bundle (and refusing it
 * against the system roots); an unlisted host is a 404 without any request; 404,
 * 403 and redirects are 404; 5xx, an untrusted certificate, a refused connection and a timeout
 * are 502; a server without HEAD is not refused; a large declared size is 413 for renders only.
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import type { ResolvedSource } from '../../src/http/handler.js';
import { parseSource } from '../../src/sources/parse.js';
import { resolveRemote } from '../../src/sources/remote.js';
import { systemCaBundle } from '../../src/sources/trust.js';
import { resolveFfprobe } from '../../src/workers/ffmpegPath.js';
import { buildProbeArgv } from '../../src/workers/probe.js';
import { makeFixtures } from '../fixtures/audio.js';

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'ap-https-'));
const certFile = join(dir, 'cert.pem');
const keyFile = join(dir, 'key.pem');
const LAST_MODIFIED = 'Tue, 01 Jul 2025 10:00:00 GMT';

let server: Server;
let port: number;
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
        default:
          res.writeHead(404);
          res.end();
      }
    },
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  await rm(dir, { recursive: true, force: true });
});

const trusted = () => ({
  AP_S3_CA_BUNDLE: certFile,
  AP_SOURCE_ALLOWLIST: '127.0.0.1, localhost',
  AP_LOG_LEVEL: 'error',
});

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
  it('an allowlisted file resolves with its size and mtime, and ffprobe reads it', async () => {
    const r = (await resolve('/a.wav')) as ResolvedSource;
    expect(r.input).toEqual({
      url: `https://127.0.0.1:${port}/a.wav`,
      kind: 'https',
      caFile: certFile,
    });
    expect(r.canonical).toBe(`https://127.0.0.1:${port}/a.wav`);
    expect(r.size).toBe(wav.length);
    expect(r.mtimeMs).toBe(Date.parse(LAST_MODIFIED));
    const byName = (await resolve('/a.wav', trusted(), { host: 'LOCALHOST' })) as ResolvedSource;
    expect(byName.canonical).toBe(`https://localhost:${port}/a.wav`);
    const ffprobe = resolveFfprobe({ env: process.env }).path;
    const { stdout } = await run(ffprobe, buildProbeArgv(r.input));
    expect(JSON.parse(stdout).streams[0]).toMatchObject({ codec_type: 'audio', channels: 2 });
  });

  it('ffmpeg verifies the peer: ffprobe refuses a certificate its bundle does not vouch for', async () => {
    const r = (await resolve('/a.wav')) as ResolvedSource;
    const argv = buildProbeArgv(r.input);
    expect(argv).toEqual(expect.arrayContaining(['-tls_verify', '1', '-ca_file', certFile]));
    const ffprobe = resolveFfprobe({ env: process.env }).path;
    // The same URL against the system roots only (no bundle of ours): the handshake must fail.
    const system = systemCaBundle();
    const untrusted = buildProbeArgv({
      url: r.input.url,
      kind: 'https',
      ...(system ? { caFile: system } : {}),
    });
    await expect(run(ffprobe, untrusted)).rejects.toMatchObject({ code: expect.any(Number) });
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
    expect(await resolve('/a.wav', { AP_SOURCE_ALLOWLIST: '127.0.0.1' })).toEqual({
      failure: { type: 'upstream_unavailable' },
    });
    const parsed = parseSource('plain/https://127.0.0.1:9/a.wav');
    if (!parsed.ok) throw new Error('unparseable');
    expect(await resolveRemote(parsed.source, parsed.canonical, loadConfig(trusted()))).toEqual({
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
