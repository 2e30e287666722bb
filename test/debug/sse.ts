/**
 * A small Server-Sent Events reader over node:http for the live-view tests: it parses the
 * stream into `{ event, data }` records as they arrive and lets a test wait for the first
 * record (from now on, or already seen) that satisfies a predicate.
 */
import { type ClientRequest, type IncomingMessage, request } from 'node:http';

export interface SseRecord {
  readonly event: string;
  readonly data: unknown;
}

export interface SseClient {
  readonly status: number;
  readonly headers: IncomingMessage['headers'];
  /** Every record received so far, in order. */
  readonly records: SseRecord[];
  /** Resolves with the first record at index >= `from` matching `match`. */
  waitFor(match: (r: SseRecord) => boolean, timeoutMs?: number, from?: number): Promise<SseRecord>;
  /** Resolves when the server ends the stream. */
  readonly ended: Promise<void>;
  close(): void;
}

export function openSse(base: string, path: string): Promise<SseClient> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    let req: ClientRequest | null = null;
    req = request(
      { host: url.hostname, port: url.port, path, agent: false },
      (res: IncomingMessage) => {
        const records: SseRecord[] = [];
        const waiters = new Set<() => void>();
        let buffer = '';
        let endedResolve: () => void = () => {};
        const ended = new Promise<void>((r) => {
          endedResolve = r;
        });
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          buffer += chunk;
          let cut = buffer.indexOf('\n\n');
          while (cut >= 0) {
            const block = buffer.slice(0, cut);
            buffer = buffer.slice(cut + 2);
            let event = 'message';
            const data: string[] = [];
            for (const line of block.split('\n')) {
              if (line.startsWith('event: ')) event = line.slice(7);
              else if (line.startsWith('data: ')) data.push(line.slice(6));
            }
            if (data.length > 0) records.push({ event, data: JSON.parse(data.join('\n')) });
            cut = buffer.indexOf('\n\n');
          }
          for (const w of [...waiters]) w();
        });
        const finish = () => {
          endedResolve();
          for (const w of [...waiters]) w();
        };
        res.on('end', finish);
        res.on('close', finish);
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          records,
          ended,
          waitFor(match, timeoutMs = 10_000, from = 0) {
            return new Promise((ok, fail) => {
              const check = () => {
                for (let i = from; i < records.length; i++) {
                  const r = records[i]!;
                  if (match(r)) {
                    cleanup();
                    ok(r);
                    return;
                  }
                }
              };
              const timer = setTimeout(() => {
                cleanup();
                fail(new Error(`no matching SSE record in ${timeoutMs} ms`));
              }, timeoutMs);
              const cleanup = () => {
                clearTimeout(timer);
                waiters.delete(check);
              };
              waiters.add(check);
              check();
            });
          },
          close() {
            req?.destroy();
          },
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}
