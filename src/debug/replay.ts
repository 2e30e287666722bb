/**
 * `audio-proxy replay FILE`: the live view's page served over a recording instead of a live
 * system. The page (`page.ts` in replay mode) fetches the recording once and rebuilds every
 * chart's state at any entry: a scrubber, play/pause, step by entry, filters (one request, one
 * cache key, one actor) and the sequence diagram of the filtered flow, with its Mermaid text.
 *
 * ## Routes (GET/HEAD)
 * | Path | Answer |
 * |---|---|
 * | `/` | 302 to `/debug/actors` |
 * | `/debug/actors` | the page (self-contained; CSP `default-src 'none'`, `connect-src 'self'`) |
 * | `/debug/actors/charts` | the chart models |
 * | `/debug/actors/recording` | the recording as one JSON document `{ header, entries }` |
 * | `/debug/actors/sequence?request=&key=&actor=` | `debug/sequence.ts`'s `sequenceJson` |
 *
 * ## Invariants
 * - **The file is untrusted**: it is read through `parseRecording` (bounded, checked); a bad
 *   file is a `RecordingError` before anything listens. The page sets every recorded string
 *   through `textContent`.
 * - **A closed door, like the inspector relay**: it binds loopback unless told otherwise, and
 *   answers only a `Host` naming it by a loopback name or its bound IP, so a web page elsewhere
 *   (or a DNS-rebound name) cannot read the recording. Anything else is a 421/404/405.
 * - **Offline**: nothing is fetched from anywhere but itself.
 */
import { readFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { MAX_RECORDING_BYTES, parseRecording, type Recording } from '../core/recording.js';
import { allCharts } from './chartModel.js';
import { LIVE_VIEW_PATH } from './liveView.js';
import { renderPage } from './page.js';
import { sequenceJson } from './sequence.js';

/** The replay server's port when none is given (the metrics listener's default + 1). */
export const DEFAULT_REPLAY_PORT = 9569;
export const DEFAULT_REPLAY_HOST = '127.0.0.1';

const CSP =
  "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:";
const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

export interface ReplayServer {
  /** `http://host:port/debug/actors` */
  readonly url: string;
  readonly recording: Recording;
  close(): Promise<void>;
}

/** Reads `file` as a recording (bounded; `RecordingError` when it is not one). */
export async function readRecording(file: string): Promise<Recording> {
  const buffer = await readFile(file);
  if (buffer.length > MAX_RECORDING_BYTES)
    return parseRecording(' '.repeat(MAX_RECORDING_BYTES + 1));
  return parseRecording(buffer.toString('utf8'));
}

export async function startReplay(options: {
  readonly recording: Recording;
  readonly host?: string;
  readonly port?: number;
}): Promise<ReplayServer> {
  const { recording } = options;
  const charts = allCharts();
  const page = renderPage(charts, { replay: true });
  const chartsJson = JSON.stringify(charts);
  const recordingJson = JSON.stringify(recording);
  let bound = '';
  let boundPort = 0;

  const send = (
    req: IncomingMessage,
    res: ServerResponse,
    status: number,
    type: string,
    body: string,
    extra: Record<string, string> = {},
  ) => {
    res.writeHead(status, {
      'content-type': type,
      'cache-control': 'no-store',
      'content-length': String(Buffer.byteLength(body)),
      ...extra,
    });
    res.end(req.method === 'HEAD' ? undefined : body);
  };
  const hostAllowed = (host: string | undefined) => {
    if (host === undefined) return false;
    const m = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(host.toLowerCase());
    if (!m || (m[2] !== undefined && Number(m[2]) !== boundPort)) return false;
    const name = m[1] ?? '';
    return LOOPBACK.has(name) || name === bound || name === `[${bound}]`;
  };

  const server = createServer((req, res) => {
    if (!hostAllowed(req.headers.host)) {
      send(
        req,
        res,
        421,
        'text/plain; charset=utf-8',
        'this replay answers its own address only\n',
      );
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      send(req, res, 405, 'text/plain; charset=utf-8', 'GET only\n', { allow: 'GET, HEAD' });
      return;
    }
    const [path = '/', query = ''] = (req.url ?? '/').split('?', 2);
    const sub = path.startsWith(LIVE_VIEW_PATH)
      ? path.slice(LIVE_VIEW_PATH.length).replace(/\/+$/, '')
      : null;
    if (path === '/') {
      res.writeHead(302, { location: LIVE_VIEW_PATH });
      res.end();
    } else if (sub === '') {
      send(req, res, 200, 'text/html; charset=utf-8', page, { 'content-security-policy': CSP });
    } else if (sub === '/charts') {
      send(req, res, 200, 'application/json', chartsJson);
    } else if (sub === '/recording') {
      send(req, res, 200, 'application/json', recordingJson);
    } else if (sub === '/sequence') {
      send(req, res, 200, 'application/json', sequenceJson(recording, new URLSearchParams(query)));
    } else {
      send(req, res, 404, 'text/plain; charset=utf-8', 'not found\n');
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? DEFAULT_REPLAY_PORT, options.host ?? DEFAULT_REPLAY_HOST, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  bound = address.address;
  boundPort = address.port;
  const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${shown}:${address.port}${LIVE_VIEW_PATH}`,
    recording,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
