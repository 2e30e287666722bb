/**
 * `lease.ts` and `spool.ts`: one close per handle after the last lease, nothing on disk, the
 * byte counter, one fill shared by concurrent openers, failures not kept.
 */
import { fstatSync, readdirSync, readFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SharedHandle } from '../../src/sources/lease.js';
import { openSpooled, spoolCount } from '../../src/sources/spool.js';

const limits = { maxBytes: 1_000, timeoutMs: 5_000 };
const bytes = (n: number, fill = 7) => Buffer.alloc(n, fill);
const spoolFiles = () =>
  readdirSync(tmpdir()).filter((n) => n.startsWith(`ap-spool-${process.pid}-`));

describe('SharedHandle', () => {
  it('closes once, after the last lease, and refuses a lease after that', async () => {
    const fh = await open(join(tmpdir(), `ap-lease-${process.pid}`), 'w+');
    let closed = 0;
    const shared = new SharedHandle(fh, 0, { onClosed: () => closed++ });
    const a = shared.acquire();
    const b = shared.acquire();
    a.release();
    a.release();
    expect(shared.closed).toBe(false);
    b.release();
    expect(shared.closed).toBe(true);
    expect(closed).toBe(1);
    expect(() => shared.acquire()).toThrow(TypeError);
  });
});

describe('openSpooled', () => {
  it('fills once for concurrent openers, holds the bytes, leaves no file on disk', async () => {
    let fills = 0;
    const fill = async (sink: { write(c: Uint8Array): Promise<boolean> }) => {
      fills++;
      await new Promise((r) => setTimeout(r, 20));
      await sink.write(bytes(300, 1));
      await sink.write(bytes(200, 2));
      return { ok: true } as const;
    };
    const [a, b] = await Promise.all([
      openSpooled('k-share', fill, limits),
      openSpooled('k-share', fill, limits),
    ]);
    if (!a.ok || !b.ok) throw new Error('did not open');
    expect(fills).toBe(1);
    expect(a.lease.fd).toBe(b.lease.fd);
    expect(a.lease.size).toBe(500);
    const content = readFileSync(`/proc/self/fd/${a.lease.fd}`);
    expect(content.equals(Buffer.concat([bytes(300, 1), bytes(200, 2)]))).toBe(true);
    expect(spoolFiles()).toEqual([]); // unlinked at creation
    a.lease.release();
    b.lease.release();
    // Lingering: a later opener gets the same spool without a fill.
    const c = await openSpooled('k-share', fill, limits);
    expect(fills).toBe(1);
    if (c.ok) c.lease.release();
  });

  it('stops at maxBytes: source_too_large, nothing kept, the next open fills again', async () => {
    let fills = 0;
    const fill = async (sink: { write(c: Uint8Array): Promise<boolean> }) => {
      fills++;
      for (let i = 0; i < 10; i++)
        if (!(await sink.write(bytes(300)))) return { ok: true } as const;
      return { ok: true } as const;
    };
    expect(await openSpooled('k-big', fill, limits)).toEqual({
      ok: false,
      refusal: 'source_too_large',
    });
    expect(await openSpooled('k-big', fill, limits)).toEqual({
      ok: false,
      refusal: 'source_too_large',
    });
    expect(fills).toBe(2);
    expect(spoolCount().filling).toBe(0);
  });

  it('a fill that throws is upstream_unavailable, and its descriptor is closed', async () => {
    const fds = () => readdirSync('/proc/self/fd').length;
    const before = fds();
    const out = await openSpooled(
      'k-throw',
      async (sink) => {
        await sink.write(bytes(10));
        throw new Error('reset');
      },
      limits,
    );
    expect(out).toMatchObject({ ok: false, refusal: 'upstream_unavailable' });
    expect(fds()).toBe(before);
  });

  it('the lease descriptor is closed once released past the linger', async () => {
    const out = await openSpooled(
      'k-close',
      async (sink) => {
        await sink.write(bytes(5));
        return { ok: true };
      },
      limits,
    );
    if (!out.ok) throw new Error('did not open');
    const { fd } = out.lease;
    expect(fstatSync(fd).size).toBe(5);
    out.lease.release();
    // SPOOL_LINGER_MS is 5 s: the spool is still there now, and gone after.
    expect(spoolCount().live).toBeGreaterThan(0);
  });
});

describe('openSpooled: a caller that gives up', () => {
  it('is answered at once; the fill finishes for the next opener', async () => {
    let fills = 0;
    let finish!: () => void;
    const gate = new Promise<void>((r) => {
      finish = r;
    });
    const fill = async (sink: { write(c: Uint8Array): Promise<boolean> }) => {
      fills++;
      await gate;
      await sink.write(Buffer.from('late'));
      return { ok: true } as const;
    };
    const ac = new AbortController();
    const first = openSpooled('k-abandon', fill, limits, ac.signal);
    ac.abort();
    expect(await first).toMatchObject({ ok: false, refusal: 'upstream_unavailable' });
    const second = openSpooled('k-abandon', fill, limits);
    finish();
    const got = await second;
    expect(fills).toBe(1);
    if (!got.ok) throw new Error(got.refusal);
    expect(got.lease.size).toBe(4);
    got.lease.release();
  });
});
