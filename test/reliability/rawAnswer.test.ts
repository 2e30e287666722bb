/**
 * The burst load generator's HTTP reader: statuses, headers and bodies come out as Node's own
 * client would read them, and a body cut short (chunked or sized) is never called complete.
 * Checked against a real node:http server's bytes, then against hand-made truncations.
 */
import { createServer } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readAnswer } from './rawAnswer.js';

let server: ReturnType<typeof createServer>;
let port = 0;

beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === '/chunked') {
      res.writeHead(200, { 'content-type': 'audio/mpeg' });
      res.write(Buffer.alloc(70_000, 1));
      res.end(Buffer.from('tail'));
    } else {
      const body = '{"error":"queue_full","message":"Render queue is full"}';
      res.writeHead(429, { 'retry-after': '3', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as { port: number }).port;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

function exchange(path: string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    const chunks: Buffer[] = [];
    socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => resolve(Buffer.concat(chunks)));
  });
}

describe('readAnswer', () => {
  it('reads a sized answer: status, lowercased headers, body, complete', async () => {
    const a = readAnswer(await exchange('/full'))!;
    expect(a.status).toBe(429);
    expect(a.headers['retry-after']).toBe('3');
    expect(JSON.parse(a.body.toString()).error).toBe('queue_full');
    expect(a.complete).toBe(true);
  });

  it('de-chunks a chunked answer and sees its last chunk', async () => {
    const a = readAnswer(await exchange('/chunked'))!;
    expect(a.status).toBe(200);
    expect(a.body.length).toBe(70_004);
    expect(a.body.subarray(-4).toString()).toBe('tail');
    expect(a.complete).toBe(true);
  });

  it('calls every truncation of a chunked answer incomplete', async () => {
    const whole = await exchange('/chunked');
    const headEnd = whole.indexOf('\r\n\r\n') + 4;
    for (const cut of [
      headEnd,
      headEnd + 3,
      headEnd + 40_000,
      whole.length - 5,
      whole.length - 2,
    ]) {
      const a = readAnswer(whole.subarray(0, cut))!;
      expect(a.status).toBe(200);
      expect(a.complete).toBe(false);
    }
  });

  it('calls a sized body with bytes missing incomplete, and no header block no answer', async () => {
    const whole = await exchange('/full');
    expect(readAnswer(whole.subarray(0, whole.length - 1))!.complete).toBe(false);
    expect(readAnswer(whole.subarray(0, 10))).toBeNull();
    expect(readAnswer(Buffer.from('garbage\r\n\r\n'))).toBeNull();
  });
});
