// The render task's contract, exercised in this thread (the task code is thread-agnostic; the
// pool tests run it in real workers): real ffmpeg output arrives byte-exact in transferred
// batches, the pid comes first, failures are classified from stderr, a clean exit is done
// whatever stderr says, the 1 MiB window holds back output and `done` until acks come, the
// timeout and cancel kill with TERM → 2 s → KILL and settle only after the reap, and the probe
// task returns ffprobe's stdout under its own bounds. No ffmpeg outlives its test.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { BATCH_BYTES, HIGH_WATER_BYTES, type ProbeTaskOutcome } from '../../src/core/worker.js';
import { statFields } from '../../src/workers/liveness.js';
import { PeaksReducer } from '../../src/workers/peaks.js';
import { probe, STDERR_TAIL_BYTES } from '../../src/workers/renderTask.js';
import {
  direct,
  expectNoSurvivors,
  expectReaped,
  fake,
  renderInThread,
  seenPids,
  sineArgv,
} from './harness.js';

afterEach(() => {
  expectNoSurvivors();
});

const LONG_MS = 30_000;
/** ffmpeg's first megabyte, or its exit: well under 1 s idle; a loaded 2-core box can take seconds. */
const WAIT_MS = 10_000;

describe('render task: real ffmpeg', () => {
  it('streams output byte-identical to running the argv directly, pid first', async () => {
    const argv = sineArgv(3);
    const run = renderInThread({ executable: 'ffmpeg', argv, timeoutMs: LONG_MS });
    const pid = await run.pid();
    const outcome = await run.result;
    const expected = await direct('ffmpeg', argv);
    expect(outcome).toMatchObject({ type: 'done', exitStatus: 0, bytes: expected.length });
    expect(Buffer.concat(run.chunks).equals(expected)).toBe(true);
    expect(run.calls[0]).toBe('pid');
    expect(run.calls.filter((c) => c === 'exited')).toHaveLength(1);
    for (const chunk of run.chunks) expect(chunk.length).toBeLessThanOrEqual(BATCH_BYTES);
    // Batching: fewer messages than ffmpeg's ~800-byte pipe reads would have made.
    expect(run.chunks.length).toBeLessThan(expected.length / 800);
    expectReaped(pid);
  });

  it("runs ffmpeg at the niceness it is given, and at the proxy's own without one", async () => {
    const niceOf = (pid: number) => Number(statFields(pid)?.[19 - 3]); // proc(5) field 19
    const own = niceOf(process.pid);
    // -re: one second of sine in real time, so the process is alive when it is looked at.
    const argv = ['-hide_banner', '-re', '-f', 'lavfi', '-i', 'sine=d=1', '-f', 'mp3', 'pipe:1'];
    for (const [nice, expected] of [
      [7, 7],
      [0, own],
      [undefined, own],
    ] as const) {
      const run = renderInThread({ executable: 'ffmpeg', argv, timeoutMs: LONG_MS, nice });
      const pid = await run.pid();
      expect(niceOf(pid)).toBe(expected);
      expect(await run.result).toMatchObject({ type: 'done', exitStatus: 0 });
    }
  });

  it('classifies a missing input file as not_found', async () => {
    const run = renderInThread({
      executable: 'ffmpeg',
      argv: ['-hide_banner', '-i', '/nonexistent/in.wav', '-f', 'mp3', 'pipe:1'],
      timeoutMs: LONG_MS,
    });
    const outcome = await run.result;
    expect(outcome).toMatchObject({ type: 'error', class: 'not_found', exitStatus: 1, bytes: 0 });
    expect(outcome.type === 'error' && outcome.stderrTail).toMatch(/No such file or directory/);
  });

  it('classifies undecodable input as undecodable', async () => {
    const run = renderInThread({
      executable: 'ffmpeg',
      argv: ['-hide_banner', '-i', fake('garbage.sh'), '-f', 'wav', 'pipe:1'],
      timeoutMs: LONG_MS,
    });
    expect(await run.result).toMatchObject({ type: 'error', class: 'undecodable' });
  });
});

describe('render task: fake ffmpeg faults', () => {
  it('crash after N bytes: render_failed after exactly those bytes', async () => {
    const run = renderInThread({
      executable: fake('crash-after.sh'),
      argv: ['150000', '3'],
      timeoutMs: LONG_MS,
    });
    const pid = await run.pid();
    // Ack everything so the window never binds.
    const acker = setInterval(() => void run.control.ack(HIGH_WATER_BYTES), 5);
    const outcome = await run.result;
    clearInterval(acker);
    expect(outcome).toMatchObject({
      type: 'error',
      class: 'render_failed',
      exitStatus: 3,
      bytes: 150_000,
    });
    expect(outcome.type === 'error' && outcome.stderrTail).toMatch(/Error while encoding/);
    expect(Buffer.concat(run.chunks).equals(Buffer.alloc(150_000, 'a'))).toBe(true);
    expectReaped(pid);
  });

  it('garbage with "Invalid data found": undecodable', async () => {
    const run = renderInThread({ executable: fake('garbage.sh'), argv: [], timeoutMs: LONG_MS });
    const outcome = await run.result;
    expect(outcome).toMatchObject({ type: 'error', class: 'undecodable', exitStatus: 1 });
  });

  it('exit 0 with alarming stderr: done', async () => {
    const run = renderInThread({
      executable: fake('alarming-success.sh'),
      argv: [],
      timeoutMs: LONG_MS,
    });
    const outcome = await run.result;
    expect(outcome).toMatchObject({ type: 'done', exitStatus: 0, bytes: 9 });
    expect(outcome.stderrTail).toMatch(/Invalid data found/);
    expect(Buffer.concat(run.chunks).toString()).toBe('ok-output');
  });

  it('keeps only the last 4096 bytes of a stderr flood', async () => {
    const run = renderInThread({
      executable: fake('stderr-flood.sh'),
      argv: [],
      timeoutMs: LONG_MS,
    });
    const outcome = await run.result;
    expect(outcome.type).toBe('error');
    expect(outcome.stderrTail.length).toBeLessThanOrEqual(STDERR_TAIL_BYTES);
    expect(outcome.stderrTail.length).toBeGreaterThan(STDERR_TAIL_BYTES - 200);
    expect(outcome.stderrTail).toMatch(/Conversion failed! last line\n$/);
  });

  it('a missing executable is render_failed, and nothing was spawned', async () => {
    const run = renderInThread({
      executable: '/nonexistent/ffmpeg',
      argv: [],
      timeoutMs: LONG_MS,
    });
    const outcome = await run.result;
    expect(outcome).toMatchObject({ type: 'error', class: 'render_failed', exitStatus: null });
    expect(outcome.type === 'error' && outcome.detail).toMatch(/could not start .*ENOENT/);
    expect(run.calls).not.toContain('pid');
  });

  it('slow drip: each byte is flushed within the flush deadline, not held for a batch', async () => {
    const run = renderInThread({
      executable: fake('slow-drip.sh'),
      argv: ['6', '0.05'],
      timeoutMs: LONG_MS,
      flushMs: 5,
    });
    const outcome = await run.result;
    expect(outcome).toMatchObject({ type: 'done', bytes: 6 });
    // Bytes 50 ms apart with a 5 ms deadline: most go out on their own, none waits for a batch.
    expect(run.chunks.length).toBeGreaterThanOrEqual(4);
  });

  it('the first read goes out at once; later partial reads wait for the flush deadline', async () => {
    const run = renderInThread({
      executable: fake('slow-drip.sh'),
      argv: ['4', '0.03'],
      timeoutMs: LONG_MS,
      flushMs: 60_000, // never due within this run: only the first read and the exit flush
    });
    expect(await run.result).toMatchObject({ type: 'done', bytes: 4 });
    expect(run.chunks.map((c) => c.length)).toEqual([1, 3]);
  });

  it('lead rule: a listener far ahead gets the rest in one batch, not one per flush deadline', async () => {
    const run = renderInThread({
      executable: fake('slow-drip.sh'),
      argv: ['6', '0.05'],
      timeoutMs: LONG_MS,
      flushMs: 5,
      // One byte is 100 s of audio: after the first byte the listener is far ahead, so the
      // partial batches are held (up to MAX_HOLD_MS, longer than this run) until the exit.
      outputBytesPerSecond: 0.01,
    });
    expect(await run.result).toMatchObject({ type: 'done', bytes: 6 });
    expect(run.chunks.map((c) => c.length)).toEqual([1, 5]);
  });

  it('lead rule: a listener with less than LISTENER_LEAD_MS ahead gets the time rule', async () => {
    const run = renderInThread({
      executable: fake('slow-drip.sh'),
      argv: ['6', '0.05'],
      timeoutMs: LONG_MS,
      flushMs: 5,
      // One byte is 1 ms of audio: the listener is never ahead, so every deadline flushes.
      outputBytesPerSecond: 1_000,
    });
    expect(await run.result).toMatchObject({ type: 'done', bytes: 6 });
    expect(run.chunks.length).toBeGreaterThanOrEqual(4);
  });

  it('timeout 100 ms on a hanging script: class timeout, and the process is gone', async () => {
    const run = renderInThread({ executable: fake('hang.sh'), argv: [], timeoutMs: 100 });
    const pid = await run.pid();
    const started = performance.now();
    const outcome = await run.result;
    expect(outcome).toMatchObject({ type: 'error', class: 'timeout', exitStatus: null });
    expect(outcome.type === 'error' && outcome.kill?.outcome).toBe('terminated');
    expect(performance.now() - started).toBeLessThan(2_000);
    expectReaped(pid);
  });

  it('the timeout bounds ffmpeg only: a finished process waiting for acks is not timed out', async () => {
    const argv = sineArgv(20, 's16le'); // 3.5 MB, well over the window
    const run = renderInThread({ executable: 'ffmpeg', argv, timeoutMs: LONG_MS });
    await run.pid();
    await vi.waitFor(() => expect(run.received()).toBeGreaterThanOrEqual(HIGH_WATER_BYTES), {
      timeout: WAIT_MS,
    });
    // Ack as we go until ffmpeg has exited, then stop acking for longer than a short timeout.
    const acker = setInterval(() => void run.control.ack(HIGH_WATER_BYTES), 5);
    await vi.waitFor(() => expect(run.calls).toContain('exited'), { timeout: 10_000 });
    clearInterval(acker);
    const outcome = await run.result;
    expect(outcome.type).toBe('done');
  });
});

describe('render task: backpressure', () => {
  it('a consumer that never acks gets between 1 MiB and 1 MiB + one batch, and no done; acks release the rest byte-exact', async () => {
    const argv = sineArgv(20, 's16le');
    const expected = await direct('ffmpeg', argv);
    const run = renderInThread({ executable: 'ffmpeg', argv, timeoutMs: LONG_MS });
    let settled = false;
    void run.result.then(() => {
      settled = true;
    });
    await vi.waitFor(() => expect(run.received()).toBeGreaterThanOrEqual(HIGH_WATER_BYTES), {
      timeout: WAIT_MS,
    });
    // Give the worker every chance to overshoot: ffmpeg keeps producing into the pipe.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(run.received()).toBeGreaterThanOrEqual(HIGH_WATER_BYTES);
    expect(run.received()).toBeLessThanOrEqual(HIGH_WATER_BYTES + BATCH_BYTES);
    expect(settled).toBe(false);
    expect(run.calls).not.toContain('exited'); // stdout paused: ffmpeg is blocked on its pipe

    // Now ack every chunk as it lands.
    let acked = 0;
    const acker = setInterval(() => {
      const received = run.received();
      if (received > acked) void run.control.ack(received - acked);
      acked = received;
    }, 2);
    const outcome = await run.result;
    clearInterval(acker);
    expect(outcome).toMatchObject({ type: 'done', bytes: expected.length });
    expect(Buffer.concat(run.chunks).equals(expected)).toBe(true);
  });

  it('output over maxBytes fails render_failed and never delivers past the cap; exactly the cap succeeds', async () => {
    const over = renderInThread({
      executable: fake('crash-after.sh'),
      argv: ['5000', '0'],
      timeoutMs: LONG_MS,
      maxBytes: 4999,
    });
    const failed = await over.result;
    expect(failed).toMatchObject({ type: 'error', class: 'render_failed', exitStatus: null });
    expect(failed.type === 'error' && failed.detail).toMatch(/4999-byte .*AP_MAX_VARIANT_BYTES/);
    expect(over.received()).toBeLessThanOrEqual(4999);

    const exact = renderInThread({
      executable: fake('crash-after.sh'),
      argv: ['5000', '0'],
      timeoutMs: LONG_MS,
      maxBytes: 5000,
    });
    expect(await exact.result).toMatchObject({ type: 'done', bytes: 5000 });
  });
});

describe('render task: cancel', () => {
  it('cancel resolves only after the process is reaped (ESRCH right after the await)', async () => {
    const run = renderInThread({ executable: fake('hang.sh'), argv: [], timeoutMs: LONG_MS });
    const pid = await run.pid();
    const report = await run.control.cancel();
    expectReaped(pid);
    expect(report.outcome).toBe('terminated');
    expect(await run.result).toMatchObject({ type: 'error', class: 'cancelled', exitStatus: null });
  });

  it('a process that ignores SIGTERM takes the 2 s grace, then SIGKILL, and is gone', async () => {
    const run = renderInThread({
      executable: fake('ignore-term.sh'),
      argv: [],
      timeoutMs: LONG_MS,
    });
    const pid = await run.pid();
    await vi.waitFor(() => expect(run.received()).toBeGreaterThan(0), { timeout: WAIT_MS }); // the trap is set
    const started = performance.now();
    const report = await run.control.cancel();
    const elapsed = performance.now() - started;
    expectReaped(pid);
    expect(report.outcome).toBe('killed');
    expect(elapsed).toBeGreaterThanOrEqual(2_000);
    expect(elapsed).toBeLessThan(3_000);
    await run.result;
  });

  it('cancel after ffmpeg exited (output still held back) kills nothing and settles cancelled', async () => {
    // More than the window plus one batch, so some output is always held back; little enough
    // more that the rest fits in the pipe and the worker's buffers, so the script can exit. The
    // rest can be a whole batch, so the batch is one pipe's worth here (64 KiB), not the
    // default: a larger one would leave the script blocked on a full pipe, never exited.
    const batchBytes = 64 * 1024;
    const total = HIGH_WATER_BYTES + batchBytes + 16_000;
    const run = renderInThread({
      executable: fake('crash-after.sh'),
      argv: [String(total), '0'],
      timeoutMs: LONG_MS,
      batchBytes,
    });
    const pid = await run.pid();
    await vi.waitFor(() => expect(run.calls).toContain('exited'), { timeout: WAIT_MS });
    expectReaped(pid);
    const held = run.received();
    expect(held).toBeGreaterThanOrEqual(HIGH_WATER_BYTES);
    expect(held).toBeLessThanOrEqual(HIGH_WATER_BYTES + batchBytes);
    const report = await run.control.cancel();
    expect(report.outcome).toBe('already_dead');
    expect(await run.result).toMatchObject({ type: 'error', class: 'cancelled', bytes: held });
    expect(run.received()).toBe(held);
  });

  it('a consumer that closes its port is treated as gone: ffmpeg is killed', async () => {
    const run = renderInThread({ executable: fake('hang.sh'), argv: [], timeoutMs: LONG_MS });
    const pid = await run.pid();
    run.port.close();
    const outcome = await run.result;
    expect(outcome).toMatchObject({ type: 'error', class: 'cancelled' });
    expectReaped(pid);
  });
});

describe('render task: peaks', () => {
  it('reduces the PCM in the task and sends the peaks as the only chunk', async () => {
    const argv = [
      '-hide_banner',
      '-loglevel',
      'error',
      '-f',
      'lavfi',
      '-i',
      'sine=frequency=440:sample_rate=8000:duration=2',
      '-ac',
      '1',
      '-f',
      's16le',
      'pipe:1',
    ];
    const peaks = { channels: 1, pts: 100, totalFrames: 16_000, sampleRate: 8000 } as const;
    const run = renderInThread({
      executable: 'ffmpeg',
      argv,
      timeoutMs: LONG_MS,
      peaks: { ...peaks, format: 'json' },
    });
    const outcome = await run.result;
    expect(run.chunks).toHaveLength(1);
    expect(outcome).toMatchObject({ type: 'done', bytes: run.chunks[0]!.length });
    // The same PCM reduced here gives the same bytes.
    const local = new PeaksReducer(peaks);
    local.push(await direct('ffmpeg', argv));
    const expected = local.finish({ sampleRate: 8000, format: 'json' });
    expect('json' in expected && run.chunks[0]!.equals(expected.json)).toBe(true);
    const parsed = JSON.parse(run.chunks[0]!.toString());
    expect(parsed).toMatchObject({ version: 2, channels: 1, length: 100, sample_rate: 8000 });
    expect(Math.max(...parsed.data)).toBeGreaterThan(3000); // a 1/8-amplitude sine: ~4096
  });

  it('a failed decode sends no peaks', async () => {
    const run = renderInThread({
      executable: fake('crash-after.sh'),
      argv: ['4000', '1'],
      timeoutMs: LONG_MS,
      peaks: { channels: 1, pts: 10, totalFrames: 2000, sampleRate: 8000, format: 'dat' },
    });
    expect(await run.result).toMatchObject({ type: 'error', class: 'render_failed', bytes: 0 });
    expect(run.chunks).toHaveLength(0);
  });
});

describe('probe task', () => {
  it('returns ffprobe stdout for real audio', async () => {
    const outcome: ProbeTaskOutcome = await probe({
      kind: 'probe',
      executable: 'ffprobe',
      argv: [
        '-v',
        'error',
        '-f',
        'lavfi',
        '-i',
        'sine=frequency=440:duration=2',
        '-show_streams',
        '-of',
        'json',
      ],
      timeoutMs: LONG_MS,
    });
    expect(outcome.type).toBe('ok');
    const parsed = JSON.parse(outcome.type === 'ok' ? outcome.stdout : '{}');
    expect(parsed.streams[0].codec_type).toBe('audio');
  });

  it('times out, and fails over the 1 MiB output bound', async () => {
    const slow = await probe({
      kind: 'probe',
      executable: fake('hang.sh'),
      argv: [],
      timeoutMs: 100,
    });
    expect(slow).toMatchObject({ type: 'error', class: 'timeout' });

    const big = await probe({
      kind: 'probe',
      executable: fake('crash-after.sh'),
      argv: ['2000000', '0'],
      timeoutMs: LONG_MS,
    });
    expect(big).toMatchObject({ type: 'error', class: 'render_failed' });
    expect(big.type === 'error' && big.detail).toMatch(/exceeded 1048576 bytes/);
  });
});

describe('argument checks', () => {
  it('rejects a bad spec at the boundary', () => {
    expect(() => renderInThread({ executable: '', argv: [], timeoutMs: 1 })).toThrow(TypeError);
    expect(() => renderInThread({ executable: 'ffmpeg', argv: [], timeoutMs: 0 })).toThrow(
      RangeError,
    );
    expect(seenPids.size).toBe(0);
  });
});
