// The public listener's address comes from `AP_BIND`: `listen()` without a host binds it, and
// `audio-proxy serve` (spawned, as an operator runs it) listens there and nowhere else. Unset, the
// listener takes every interface, as the original does.

import type { ChildProcess } from 'node:child_process';
import { networkInterfaces } from 'node:os';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/index.js';
import { createAudioProxy } from '../src/proxy.js';
import { startBin } from './binProcess.js';
import { get, waitFor } from './integration/harness.js';
import { freePort } from './ports.js';

const silent = pino({ level: 'silent' });

/** A non-loopback IPv4 address of this host, if it has one. */
function externalIPv4(): string | undefined {
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return undefined;
}

describe('createAudioProxy().listen()', () => {
  it('binds AP_BIND when no host is given', async () => {
    const proxy = await createAudioProxy({
      config: loadConfig({ AP_BIND: '127.0.0.1', AP_LOG_LEVEL: 'error' }),
      logger: silent,
    });
    try {
      const { url } = await proxy.listen({ port: 0, metricsPort: 0 });
      expect(new URL(url).hostname).toBe('127.0.0.1');
      expect((await get(url, '/health')).status).toBe(200);
    } finally {
      await proxy.close();
    }
  });

  it('unset, it binds every interface (the original contract)', async () => {
    const proxy = await createAudioProxy({
      config: loadConfig({ AP_LOG_LEVEL: 'error' }),
      logger: silent,
    });
    try {
      const { url } = await proxy.listen({ port: 0, metricsPort: 0 });
      expect(['[::]', '0.0.0.0']).toContain(new URL(url).hostname);
    } finally {
      await proxy.close();
    }
  });
});

describe('audio-proxy serve (spawned)', () => {
  let child: ChildProcess | undefined;
  afterAll(() => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
  });

  it('listens on AP_BIND only', async () => {
    const [port, metricsPort] = [await freePort(), await freePort()];
    const bin = startBin(['serve'], {
      PATH: process.env.PATH ?? '',
      AP_BIND: '127.0.0.1',
      AP_PORT: String(port),
      AP_METRICS_PORT: String(metricsPort),
      AP_LOG_LEVEL: 'info',
    });
    child = bin.child;
    const { exited } = bin;
    await waitFor(() => bin.output().includes('audio-proxy listening'), 60_000, 50);
    expect(bin.output()).toContain(`http://127.0.0.1:${port}`);
    expect((await get(`http://127.0.0.1:${port}`, '/health')).status).toBe(200);
    const outside = externalIPv4();
    if (outside) {
      // Not listening there: the connection is refused.
      await expect(get(`http://${outside}:${port}`, '/health')).rejects.toThrow(/ECONNREFUSED/);
    }
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  }, 90_000);
});
