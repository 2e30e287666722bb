/**
 * The Tee against a real RenderCoordinator (fed by a controllable render child) and real stores
 * (a temporary file store, and s3rver): the stored bytes and metadata equal what the client got;
 * a render whose only client left still completes into the store (and without a tee it is
 * cancelled); a failed or stopped render leaves nothing readable and no staging; a write failure
 * reaches telemetry and never the client; a queued render gets no tee until it is granted; a
 * tee that joins after completion still stores the whole variant.
 */
import diagnostics from 'node:diagnostics_channel';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AnyActorRef, createActor, fromCallback } from 'xstate';
import { call, inbox } from '../../src/actors/call.js';
import { loadConfig } from '../../src/config/index.js';
import {
  renderCoordinatorMachine,
  type SubscriberMessage,
} from '../../src/machines/renderCoordinator.js';
import {
  attachTee,
  TeeService,
  variantMetadata,
  WRITE_FAILURE_CHANNEL,
} from '../../src/services/teeService.js';
import { FileVariantStore } from '../../src/store/file.js';
import { S3VariantStore } from '../../src/store/s3.js';
import { createS3Client } from '../../src/store/s3client.js';
import type { VariantStore } from '../../src/store/types.js';
import { readBody } from '../store/helpers.js';
import { type S3rverHandle, startS3rver } from '../store/s3rver.js';

const config = loadConfig({ AP_RENDER_TIMEOUT: '30', AP_LOG_LEVEL: 'error' });
const METADATA = variantMetadata({ format: 'mp3', download: 'song.mp3' });

interface Rig {
  coordinator: AnyActorRef;
  renderReceived: string[];
  client: SubscriberMessage[];
  emit(event: { type: string; [k: string]: unknown }): void;
  chunk(data: Buffer): void;
  clientBytes(): Buffer;
}

let keySeq = 0;
function freshKey(): string {
  return `k${Date.now().toString(36)}x${++keySeq}`;
}

/** A coordinator with a controllable render child and one client subscriber `c`. */
function rig(key: string, opts: { admission?: 'granted' | 'queued'; tees?: TeeService } = {}): Rig {
  const renderReceived: string[] = [];
  const semaphore = createActor(fromCallback(() => {})).start();
  const machine = renderCoordinatorMachine.provide({
    actors: {
      render: fromCallback(({ receive }) => {
        receive((e) => renderReceived.push((e as { type: string }).type));
      }),
    },
  });
  const coordinator = createActor(machine, {
    input: {
      key,
      admission: opts.admission ?? 'granted',
      slotId: `slot-${key}`,
      semaphore,
      firstSubscriber: 'c',
      maxVariantBytes: () => 100_000_000,
      renderInput: {},
    },
  });
  const client: SubscriberMessage[] = [];
  inbox<SubscriberMessage>(coordinator, 'c', (m) => client.push(m));
  opts.tees?.onRendering(coordinator, key, METADATA);
  coordinator.start();
  const emit = (event: { type: string; [k: string]: unknown }) => coordinator.send(event as never);
  return {
    coordinator,
    renderReceived,
    client,
    emit,
    chunk: (data) => emit({ type: 'render.chunk', data }),
    clientBytes: () => Buffer.concat(client.flatMap((m) => (m.type === 'chunk' ? [m.data] : []))),
  };
}

/** Lets queued actor events, joins and store I/O run. */
const tick = () => new Promise((r) => setImmediate(r));

let s3: S3rverHandle;
let fileRoot: string;
const stores: Record<string, VariantStore> = {};

beforeAll(async () => {
  s3 = await startS3rver(['tees']);
  fileRoot = await mkdtemp(join(tmpdir(), 'ap-tee-'));
  const file = new FileVariantStore({ root: fileRoot });
  await file.sweepStaging();
  stores.file = file;
  const s3config = s3.config({ AP_VARIANT_STORE: 's3://tees' });
  stores.s3 = new S3VariantStore({ client: createS3Client(s3config.variantS3), bucket: 'tees' });
});

afterAll(async () => {
  await stores.s3?.close();
  await s3.close();
  await rm(fileRoot, { recursive: true, force: true });
});

async function nothingReadable(store: VariantStore, key: string) {
  expect(await store.head(key)).toBeUndefined();
  expect(await store.get(key)).toBeUndefined();
  if (store instanceof FileVariantStore) expect(await store.staging()).toEqual([]);
}

describe.each(['file', 's3'] as const)('tee into the %s store', (kind) => {
  it('stores exactly the bytes and metadata the client received', async () => {
    const store = stores[kind]!;
    const tees = new TeeService({ store, config });
    const key = freshKey();
    const r = rig(key, { tees });
    expect(tees.live).toBe(1);
    const parts = [Buffer.from('ID3'), Buffer.alloc(70_000, 7), Buffer.from('tail')];
    for (const p of parts) r.chunk(p);
    r.emit({ type: 'render.done' });
    await tees.drain();
    expect(tees.live).toBe(0);
    expect(r.client.at(-1)?.type).toBe('done');
    const head = await store.head(key);
    expect(head).toEqual({ key, size: r.clientBytes().length, ...METADATA });
    expect((await readBody(await store.get(key))).equals(r.clientBytes())).toBe(true);
  });

  it('a render whose only client left still completes into the store', async () => {
    const store = stores[kind]!;
    const tees = new TeeService({ store, config });
    const key = freshKey();
    const r = rig(key, { tees });
    r.chunk(Buffer.from('first'));
    await tick();
    await call(r.coordinator, { type: 'unsubscribe', id: 'c' });
    expect(r.renderReceived).not.toContain('cancel');
    r.chunk(Buffer.from('-second'));
    r.emit({ type: 'render.done' });
    await tees.drain();
    expect((await readBody(await store.get(key))).toString()).toBe('first-second');
  });

  it('a render that fails mid-stream leaves nothing readable', async () => {
    const store = stores[kind]!;
    const tees = new TeeService({ store, config });
    const key = freshKey();
    const r = rig(key, { tees });
    r.chunk(Buffer.alloc(kind === 's3' ? 6 * 1024 * 1024 : 100_000, 1)); // s3: a part is uploaded
    await tick();
    r.emit({ type: 'render.error', failure: { class: 'render_failed', exitStatus: 1 } });
    await tees.drain();
    await nothingReadable(store, key);
  });

  it('a render stopped by shutdown leaves nothing readable', async () => {
    const store = stores[kind]!;
    const tees = new TeeService({ store, config });
    const key = freshKey();
    const r = rig(key, { tees });
    r.chunk(Buffer.alloc(50_000, 2));
    await tick();
    const stopping = call(r.coordinator, { type: 'shutdown' });
    expect(r.renderReceived).toContain('cancel');
    r.emit({ type: 'render.cancelled' });
    await stopping;
    await tees.drain();
    await nothingReadable(store, key);
  });
});

describe('tee failures and timing', () => {
  it('a write failure is published, and the client still gets every byte', async () => {
    const root = await mkdtemp(join(tmpdir(), 'ap-tee-broken-'));
    const broken = new FileVariantStore({ root });
    await writeFile(broken.stagingDir, 'not a directory'); // every staging open fails
    const published: unknown[] = [];
    const listener = (m: unknown) => published.push(m);
    diagnostics.subscribe(WRITE_FAILURE_CHANNEL, listener);
    try {
      const tees = new TeeService({ store: broken, config });
      const key = freshKey();
      const r = rig(key, { tees });
      r.chunk(Buffer.from('abc'));
      await tick();
      await tees.drain(); // the tee has failed and left
      r.chunk(Buffer.from('def'));
      r.emit({ type: 'render.done' });
      expect(published).toEqual([{ key, reason: 'enotdir' }]);
      expect(r.clientBytes().toString()).toBe('abcdef');
      expect(r.client.at(-1)?.type).toBe('done');
      expect(r.renderReceived).not.toContain('cancel');
      expect(await broken.head(key)).toBeUndefined();
    } finally {
      diagnostics.unsubscribe(WRITE_FAILURE_CHANNEL, listener);
      await rm(root, { recursive: true, force: true });
    }
  });

  it('a queued render gets no tee: when its only client leaves it stops, storing nothing', async () => {
    const store = stores.file!;
    const tees = new TeeService({ store, config });
    const key = freshKey();
    const r = rig(key, { tees, admission: 'queued' });
    expect(tees.live).toBe(0);
    await call(r.coordinator, { type: 'unsubscribe', id: 'c' });
    expect(r.coordinator.getSnapshot().status).toBe('done');
    expect(tees.live).toBe(0);
    await nothingReadable(store, key);
  });

  it('a queued render gets its tee when granted, and stores from byte 0', async () => {
    const store = stores.file!;
    const tees = new TeeService({ store, config });
    const key = freshKey();
    const r = rig(key, { tees, admission: 'queued' });
    expect(tees.live).toBe(0);
    r.emit({ type: 'slot.granted' });
    expect(tees.live).toBe(1);
    r.chunk(Buffer.from('granted'));
    r.emit({ type: 'render.done' });
    await tees.drain();
    expect((await readBody(await store.get(key))).toString()).toBe('granted');
  });

  it('a tee that joins after completion stores the whole backlog', async () => {
    const store = stores.file!;
    const key = freshKey();
    const r = rig(key);
    r.chunk(Buffer.from('all '));
    r.chunk(Buffer.from('done'));
    r.emit({ type: 'render.done' });
    expect(r.coordinator.getSnapshot().value).toBe('completed');
    const handle = attachTee({
      coordinator: r.coordinator,
      key,
      store,
      metadata: METADATA,
      config,
    });
    expect(await handle.done).toEqual({ outcome: 'committed', bytes: 8 });
    expect((await readBody(await store.get(key))).toString()).toBe('all done');
  });

  it('without a tee, the only client leaving cancels the render (the tee is what keeps it alive)', async () => {
    const r = rig(freshKey());
    r.chunk(Buffer.from('x'));
    const leaving = call(r.coordinator, { type: 'unsubscribe', id: 'c' });
    expect(r.renderReceived).toContain('cancel');
    r.emit({ type: 'render.cancelled' });
    await leaving;
  });
});
