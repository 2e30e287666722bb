/**
 * tuneSocket sets TCP_NOTSENT_LOWAT on a real loopback socket, read back from the kernel with
 * getsockopt; a socket already closed is refused quietly. Under AP_TEST_STRICT=1 the optional
 * package must be present (CI installs it with `npm ci`).
 */
import { createRequire } from 'node:module';
import { type AddressInfo, connect, createServer, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { NOTSENT_LOWAT_BYTES, tuneSocket, tuning } from '../../src/http/socketTuning.js';

const available = 'notsentLowatBytes' in tuning();
const strict = process.env.AP_TEST_STRICT === '1';

async function acceptedPair(): Promise<{ server: Socket; client: Socket; close: () => void }> {
  let accepted!: (s: Socket) => void;
  const got = new Promise<Socket>((r) => {
    accepted = r;
  });
  const listener = createServer((s) => accepted(s));
  await new Promise<void>((r) => listener.listen(0, '127.0.0.1', () => r()));
  const client = connect((listener.address() as AddressInfo).port, '127.0.0.1');
  const server = await got;
  return {
    server,
    client,
    close: () => {
      client.destroy();
      server.destroy();
      listener.close();
    },
  };
}

describe('socket tuning', () => {
  it('is available on Linux with the optional package installed', () => {
    if (!strict && !available) return; // a fresh machine without the binary still serves
    expect(tuning()).toEqual({ notsentLowatBytes: NOTSENT_LOWAT_BYTES });
  });

  it.skipIf(!available)('sets TCP_NOTSENT_LOWAT on a connected socket', async () => {
    const { getsockopt } = createRequire(import.meta.url)('sockopt') as {
      getsockopt: (s: Socket, level: number, name: number) => number;
    };
    const pair = await acceptedPair();
    try {
      expect(getsockopt(pair.server, 6, 25)).not.toBe(NOTSENT_LOWAT_BYTES);
      expect(tuneSocket(pair.server)).toBe(true);
      expect(getsockopt(pair.server, 6, 25)).toBe(NOTSENT_LOWAT_BYTES);
    } finally {
      pair.close();
    }
  });

  it.skipIf(!available)('answers false for a socket that is gone', async () => {
    const pair = await acceptedPair();
    pair.close();
    await new Promise<void>((r) => pair.server.once('close', () => r()));
    expect(tuneSocket(pair.server)).toBe(false);
  });
});
