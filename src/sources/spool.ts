/**
 * Spools: the bytes of a remote source (https, s3), fetched by the proxy into a private temp
 * file that is unlinked as soon as it is created, and lent to ffmpeg/ffprobe as a descriptor
 * like a local file (`lease.ts`). ffmpeg never opens a URL: whatever a server answers, the proxy
 * reads it, counts it, and hands over a regular file.
 *
 * One spool per source version (`key`): a probe and the render that follows it share one fetch
 * when the render starts within `SPOOL_LINGER_MS` of the last lease's release (the usual case: a
 * MISS probes, then asks for a slot at once). A render that waited longer in the queue fetches
 * again; the cost is one more download of the source, what ffmpeg's own GET used to cost.
 *
 * ## Invariants
 * - **Nothing stays on disk.** The file is unlinked right after `open(…, 'wx+', 0o600)`; the
 *   descriptor is the only name it has, so a crash leaves nothing to sweep.
 * - **Every byte read is counted**: past `maxBytes` the fetch is abandoned and the answer is
 *   `source_too_large`, whatever the server declared (a HEAD that lied gets no further).
 * - **A fill is bounded in time** (`timeoutMs`) and shared by everyone who asks meanwhile.
 * - **Failures are never kept**: the next request fetches again.
 *
 * ## Races
 * - *A lease is taken while the spool lingers*: the close is cancelled (see `SharedHandle`).
 * - *A caller gives up while a fill runs* (its `signal`: a probe timeout, a cancelled render):
 *   it is answered at once; the fill runs on to its own bound and the spool lingers for the
 *   render that may follow.
 *
 * ## Events
 * None.
 */
import { randomBytes } from 'node:crypto';
import { type FileHandle, open, unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InFlight } from '../core/inflight.js';
import type { OpenOutcome, OpenRefusal } from '../core/source.js';
import { SharedHandle } from './lease.js';

/** How long an idle spool is kept for the render that follows its probe, in ms. */
export const SPOOL_LINGER_MS = 5_000; // a MISS asks for its slot right after the probe

/** What a fill reports: done, or why the source cannot be read. */
export type FillOutcome =
  | { readonly ok: true }
  | { readonly ok: false; readonly refusal: OpenRefusal; readonly detail?: string };

/** Where a fill writes. `write` answers false once `maxBytes` would be passed (stop reading). */
export interface SpoolSink {
  write(chunk: Uint8Array): Promise<boolean>;
  readonly bytes: number;
}

export type Fill = (sink: SpoolSink, signal: AbortSignal) => Promise<FillOutcome>;

const live = new Map<string, SharedHandle>();
const filling = new InFlight<string, FillOutcome>();

/** Spools being filled or held now (tests and diagnostics). */
export function spoolCount(): { readonly live: number; readonly filling: number } {
  return { live: live.size, filling: filling.size };
}

async function createSpoolFile(): Promise<FileHandle> {
  const path = join(tmpdir(), `ap-spool-${process.pid}-${randomBytes(12).toString('hex')}`);
  const handle = await open(path, 'wx+', 0o600);
  await unlink(path).catch(async (error: unknown) => {
    await handle.close();
    throw error;
  });
  return handle;
}

async function fillNow(
  key: string,
  fill: Fill,
  limits: { readonly maxBytes: number; readonly timeoutMs: number },
): Promise<FillOutcome> {
  let handle: FileHandle;
  try {
    handle = await createSpoolFile();
  } catch (error) {
    return { ok: false, refusal: 'not_configured', detail: `spool: ${String(error)}` };
  }
  let bytes = 0;
  let over = false;
  const sink: SpoolSink = {
    async write(chunk) {
      if (bytes + chunk.byteLength > limits.maxBytes) {
        over = true;
        return false;
      }
      bytes += chunk.byteLength;
      await handle.write(chunk);
      return true;
    },
    get bytes() {
      return bytes;
    },
  };
  const deadline = AbortSignal.timeout(limits.timeoutMs);
  let outcome: FillOutcome;
  try {
    outcome = await fill(sink, deadline);
  } catch (error) {
    outcome = { ok: false, refusal: 'upstream_unavailable', detail: String(error) };
  }
  if (over) outcome = { ok: false, refusal: 'source_too_large' };
  if (!outcome.ok) {
    await handle.close().catch(() => {});
    return outcome;
  }
  const shared: SharedHandle = new SharedHandle(handle, bytes, {
    lingerMs: SPOOL_LINGER_MS,
    onClosed: () => {
      if (live.get(key) === shared) live.delete(key);
    },
  });
  live.set(key, shared);
  return { ok: true };
}

const ABANDONED = Symbol('abandoned');

/** `work`, unless `signal` aborts first (the work goes on: a fill is shared and bounded). */
function abandonable<T>(
  work: Promise<T>,
  signal: AbortSignal | undefined,
): Promise<T | typeof ABANDONED> {
  if (signal === undefined) return work;
  if (signal.aborted) return Promise.resolve(ABANDONED);
  return new Promise((resolve) => {
    const onAbort = () => resolve(ABANDONED);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      () => {
        signal.removeEventListener('abort', onAbort);
        resolve(ABANDONED);
      },
    );
  });
}

/**
 * A lease on the spool of source version `key`: the lingering one, the one being filled, or a
 * new fill. Every caller gets its own lease (release it once its run has settled).
 */
export async function openSpooled(
  key: string,
  fill: Fill,
  limits: { readonly maxBytes: number; readonly timeoutMs: number },
  signal?: AbortSignal,
): Promise<OpenOutcome> {
  for (let attempt = 0; attempt < 2; attempt++) {
    const held = live.get(key);
    if (held !== undefined && !held.closed) {
      // Filled under another caller's limit: this one's applies too.
      if (held.size > limits.maxBytes) return { ok: false, refusal: 'source_too_large' };
      return { ok: true, lease: held.acquire() };
    }
    const outcome = await abandonable(
      filling.run(key, () => fillNow(key, fill, limits)),
      signal,
    );
    if (outcome === ABANDONED) {
      return { ok: false, refusal: 'upstream_unavailable', detail: 'abandoned while spooling' };
    }
    if (!outcome.ok) return outcome;
    // Resumed in the microtask that settled the fill: no timer (no linger) ran in between.
    const filled = live.get(key);
    if (filled !== undefined && !filled.closed) return { ok: true, lease: filled.acquire() };
  }
  return { ok: false, refusal: 'upstream_unavailable', detail: 'spool closed while opening' };
}
