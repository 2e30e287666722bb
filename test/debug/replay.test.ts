// The replay server's doors (debug/replay.ts): it answers only a Host naming it (a DNS-rebound
// name or a page elsewhere gets 421), only GET/HEAD, serves the page with a CSP that loads
// nothing external, and the recording it was given; a file that is not a recording is refused
// before anything listens (and by the CLI, in one line, exit 1). About 1 s.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { RecordingError } from '../../src/core/recording.js';
import { readRecording, startReplay } from '../../src/debug/replay.js';
import { startBin } from '../binProcess.js';
import { get } from '../integration/harness.js';

const file = join(process.cwd(), 'docs/recordings/displaced-waiter.ndjson');

describe('audio-proxy replay', () => {
  it('answers its own address only, GET only, and serves the recording', async () => {
    const recording = await readRecording(file);
    const server = await startReplay({ recording, port: 0 });
    try {
      const base = new URL(server.url).origin;
      const page = await get(base, '/debug/actors');
      expect(page.status).toBe(200);
      expect(page.headers['content-security-policy']).toContain("default-src 'none'");
      expect(page.body.toString()).toContain('id="scrub"');
      expect(page.body.toString()).not.toMatch(/(src|href)=["']?(https?:)?\/\//i);
      const rec = await get(base, '/debug/actors/recording');
      expect(JSON.parse(rec.body.toString())).toEqual(recording);
      const seq = await get(base, '/debug/actors/sequence?actor=a1');
      expect(JSON.parse(seq.body.toString()).mermaid).toMatch(/^sequenceDiagram/);
      const rebound = await get(base, '/debug/actors/recording', {
        headers: { host: 'evil.example' },
      });
      expect(rebound.status).toBe(421);
      const otherPort = await get(base, '/debug/actors/recording', {
        headers: { host: 'localhost:1' },
      });
      expect(otherPort.status).toBe(421);
      expect((await get(base, '/debug/actors', { method: 'POST' })).status).toBe(405);
      expect((await get(base, '/nope')).status).toBe(404);
      expect((await get(base, '/')).headers.location).toBe('/debug/actors');
    } finally {
      await server.close();
    }
  });

  it('refuses a file that is not a recording, before listening', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'ap-replay-'));
    const bad = join(dir, 'bad.ndjson');
    await writeFile(bad, '{"format":"audio-proxy-recording","version":99}\n');
    await expect(readRecording(bad)).rejects.toBeInstanceOf(RecordingError);
    const bin = startBin(['replay', '--port', '0', bad], { PATH: process.env.PATH ?? '' });
    expect(await bin.exited).toBe(1);
    expect(bin.output()).toMatch(
      /^audio-proxy replay: recording line 1: version 99 is not supported/,
    );
  }, 30_000);
});
