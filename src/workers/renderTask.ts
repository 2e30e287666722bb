/**
 * The Piscina task module: runs one ffmpeg (or ffprobe) per task inside a worker thread and owns
 * it until it is reaped.
 *
 * A render task streams stdout to the main thread over the task's MessagePort: the worker calls
 * a Comlink sink there (`pid`, `chunk`, `exited`) and exposes a Comlink control surface (`ack`,
 * `cancel`) on the same port. Reads are batched into buffers of up to `BATCH_BYTES`, flushed at
 * least every `FLUSH_MS` (longer, up to `MAX_HOLD_MS`, while the listener has more than
 * `LISTENER_LEAD_MS` of audio ahead, when the task gives its output's byte rate bound), and
 * transferred, never cloned. stderr is kept as a 4096-byte tail in
 * memory (no scratch file: nothing outlives the task). A peaks render reduces ffmpeg's PCM here,
 * off the main thread, and sends one chunk. A probe task collects stdout (≤ 1 MiB).
 *
 * ## Invariants
 * - **No shell.** The executable is spawned by argv; the pid reported is ffmpeg's own.
 * - **The input is a descriptor, never a path.** `inputFd` (opened and owned by the main
 *   thread) is mapped to the child's fd 3; the argv names `/proc/self/fd/3`. This module never
 *   opens or closes it.
 * - **The pid reaches the main thread before anything else**, so it can finish a kill itself.
 * - **Unacknowledged bytes stay under `HIGH_WATER_BYTES` + one batch.** At the mark stdout is
 *   paused, which backs up into ffmpeg's pipe: memory is bounded, not queued.
 * - **The task settles only after ffmpeg is reaped and every chunk was delivered** (each sink
 *   call answered), so the result can never overtake a chunk on the other channel, and `done`
 *   is never sent while chunks are held back.
 * - **The timeout bounds ffmpeg's run**: armed at spawn, cleared at its exit, never at drain.
 * - **A clean exit is `done` whatever stderr says**; stderr is classified only on a failure.
 * - **Nothing outlives the run in the thread**: settling releases the Comlink sink proxy and
 *   closes the port, so no registry keeps a finished run (its child, its buffers) reachable.
 *
 * ## Races
 * - *Cancel vs. natural exit*: the first stop reason wins; a cancel after the exit kills nothing
 *   and reports `already_dead`, and the task still settles `cancelled`.
 * - *Main thread goes away* (port closed by the consumer): treated as a cancel, so ffmpeg never
 *   outlives its consumer; sink calls that can no longer be answered are not waited for.
 * - *Data after a stop*: stdout keeps flowing and is discarded, so ffmpeg never blocks on a full
 *   pipe while it handles SIGTERM.
 *
 * ## Events (worker → main sink; main → worker control)
 * | Call | Fields | When |
 * |---|---|---|
 * | `sink.pid` | pid | right after spawn |
 * | `sink.chunk` | ArrayBuffer (transferred) | first read; a batch is full; `FLUSH_MS` passed; exit |
 * | `sink.exited` | exit status, signal | ffmpeg was reaped (the pid is no longer ours) |
 * | `control.ack` | bytes | the consumer took `bytes`; reopens the window |
 * | `control.cancel` | | kill (TERM, grace, KILL); resolves once ffmpeg is reaped |
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { setPriority } from 'node:os';
import type { MessagePort } from 'node:worker_threads';
import * as Comlink from 'comlink';
import nodeEndpoint from 'comlink/dist/esm/node-adapter.mjs';
import type { ProcessFailureClass } from '../core/failure.js';
import {
  BATCH_BYTES,
  FLUSH_MS,
  HIGH_WATER_BYTES,
  KILL_WAIT_MS,
  type KillOutcome,
  LISTENER_LEAD_MS,
  MAX_HOLD_MS,
  type PeaksSpec,
  type ProbeTask,
  type ProbeTaskOutcome,
  type ProcessControl,
  type ProcessSink,
  type ProcessSpec,
  type RenderOutcome,
  type RenderTask,
  type TaskFailure,
  TERM_GRACE_MS,
  type WorkerKillReport,
  type WorkerTask,
} from '../core/worker.js';
import { appendTail, classifyFailure, STDERR_TAIL_BYTES } from './classify.js';
import { Fmp4DecodeTimeShift } from './fmp4.js';
import { PeaksReducer } from './peaks.js';
import { MAX_PROBE_OUTPUT_BYTES } from './probe.js';
import { infoFramePlaceholder, splitForInfoFrame } from './xingFrame.js';

export { STDERR_TAIL_BYTES };

interface Stop {
  readonly class: ProcessFailureClass;
  readonly detail?: string;
}

function assertSpec(task: ProcessSpec): void {
  if (typeof task.executable !== 'string' || task.executable === '') {
    throw new TypeError('executable must be a non-empty string');
  }
  if (
    !Array.isArray(task.argv) ||
    !task.argv.every((a) => typeof a === 'string' && !a.includes('\0'))
  ) {
    throw new TypeError('argv must be an array of strings without NUL bytes');
  }
  if (!Number.isFinite(task.timeoutMs) || task.timeoutMs <= 0) {
    throw new RangeError(`timeoutMs must be a positive number, got ${String(task.timeoutMs)}`);
  }
  if (task.inputFd !== undefined && !(Number.isInteger(task.inputFd) && task.inputFd > 2)) {
    throw new RangeError(`inputFd must be a descriptor above 2, got ${String(task.inputFd)}`);
  }
  if (task.maxBytes !== undefined && !(Number.isSafeInteger(task.maxBytes) && task.maxBytes >= 0)) {
    throw new RangeError(`maxBytes must be a non-negative integer, got ${String(task.maxBytes)}`);
  }
}

/**
 * One spawned process and everything that ends it: the run timeout, the stop reason, the kill
 * sequence and the settle condition. Subclasses decide what happens to stdout.
 */
abstract class ProcessRun<O> {
  protected readonly child: ChildProcess;
  protected stop: Stop | null = null;
  #stderr: Buffer = Buffer.alloc(0);
  protected readonly sink: Comlink.Remote<ProcessSink> | null;
  protected readonly port: MessagePort | null;
  #exitStatus: number | null = null;
  #exitSignal: NodeJS.Signals | null = null;
  #spawnError: Error | null = null;
  #exited = false;
  #closed = false;
  #portClosed = false;
  #inflight = 0;
  #deadline: NodeJS.Timeout | null;
  #kill: Promise<WorkerKillReport> | null = null;
  #killReport: WorkerKillReport | null = null;
  #settled = false;
  #onExit: Array<() => void> = [];
  readonly #result: Promise<O>;
  #resolve!: (outcome: O) => void;

  constructor(spec: ProcessSpec, port: MessagePort | null) {
    this.port = port;
    this.#result = new Promise<O>((resolve) => {
      this.#resolve = resolve;
    });
    // Everything that can fail runs before the spawn: the endpoint and the control surface.
    if (port) {
      const endpoint = nodeEndpoint(port);
      this.sink = Comlink.wrap<ProcessSink>(endpoint);
      const control: ProcessControl = {
        ack: (bytes) => this.ack(Number(bytes)),
        cancel: () => this.cancel(),
      };
      Comlink.expose(control, endpoint);
      port.on('close', () => {
        this.#portClosed = true;
        this.halt({ class: 'cancelled', detail: 'the consumer went away' });
        this.maybeSettle();
      });
    } else {
      this.sink = null;
    }

    // The source descriptor becomes the child's fd 3 (`INPUT_FD`); nothing else is inherited.
    this.child = spawn(spec.executable, spec.argv as string[], {
      stdio:
        spec.inputFd === undefined
          ? ['ignore', 'pipe', 'pipe']
          : ['ignore', 'pipe', 'pipe', spec.inputFd],
      windowsHide: true,
    });
    if (spec.nice && this.child.pid !== undefined) {
      // Raising one's own child's niceness needs no privilege; the process may already be gone
      // (ESRCH), and then there is nothing left to lower.
      try {
        setPriority(this.child.pid, spec.nice);
      } catch {}
    }
    this.#deadline = setTimeout(() => {
      this.#deadline = null;
      this.halt({ class: 'timeout', detail: `ffmpeg ran longer than ${spec.timeoutMs} ms` });
    }, spec.timeoutMs);

    const { child } = this;
    child.on('error', (error) => {
      // Spawn failures (ENOENT, EACCES) arrive here with no pid; 'close' follows.
      if (child.pid === undefined) this.#spawnError ??= error;
    });
    child.on('exit', (code, signal) => {
      this.#exited = true;
      this.#exitStatus = code;
      this.#exitSignal = signal;
      this.#clearDeadline(); // bounds ffmpeg's run, not the consumer's drain
      this.call(() => this.sink?.exited(code, signal));
      for (const waiter of this.#onExit.splice(0)) waiter();
    });
    child.on('close', () => {
      this.#closed = true;
      if (!this.#exited) {
        // Never started: no 'exit' comes.
        this.#exited = true;
        this.#clearDeadline();
        for (const waiter of this.#onExit.splice(0)) waiter();
      }
      this.onStdoutEnd();
      this.maybeSettle();
    });
    child.stderr!.on('data', (chunk: Buffer) => {
      this.#stderr = appendTail(this.#stderr, chunk, STDERR_TAIL_BYTES);
    });
    child.stdout!.on('data', (chunk: Buffer) => {
      if (this.stop) return; // stopping: keep the pipe moving, discard
      this.onStdout(chunk);
    });
    if (child.pid !== undefined) {
      const { pid } = child;
      this.call(() => this.sink?.pid(pid));
    }
  }

  /** The last `STDERR_TAIL_BYTES` of stderr, as text. */
  protected get stderrTail(): string {
    return this.#stderr.toString('utf8');
  }

  /** The task's result: settles once the process is gone and every sink call was answered. */
  get result(): Promise<O> {
    return this.#result;
  }

  protected abstract onStdout(chunk: Buffer): void;
  protected abstract onStdoutEnd(): void;
  /** True while output is still waiting to be delivered. */
  protected abstract holdsOutput(): boolean;
  protected abstract outcome(): O;

  protected ack(_bytes: number): void {}

  /** Invoke a sink method and count it until the main thread answers. */
  protected call(invoke: () => Promise<unknown> | undefined): void {
    const answer = invoke();
    if (answer === undefined) return;
    this.#inflight++;
    const done = () => {
      this.#inflight--;
      this.maybeSettle();
    };
    answer.then(done, done);
  }

  /** Records the first stop reason, stops forwarding, and starts the kill. */
  protected halt(stop: Stop): void {
    if (this.stop || this.#settled) return;
    this.stop = stop;
    this.onHalt();
    this.child.stdout?.resume();
    void this.#startKill();
  }

  protected onHalt(): void {}

  protected cancel(): Promise<WorkerKillReport> {
    this.halt({ class: 'cancelled' });
    return this.#startKill();
  }

  protected get exitInfo() {
    return { status: this.#exitStatus, signal: this.#exitSignal, spawnError: this.#spawnError };
  }

  protected maybeSettle(): void {
    if (this.#settled) return;
    const processGone = this.#closed || (this.stop !== null && this.#killReport !== null);
    if (!processGone) return;
    if (this.stop === null && this.holdsOutput()) return;
    if (!this.#portClosed && this.#inflight > 0) return;
    this.#settled = true;
    this.#clearDeadline();
    this.onSettle();
    // Closed after the microtasks that post pending Comlink replies (a `cancel` answered in
    // this same turn), so the main thread never waits on a reply that was never sent.
    const { port, sink } = this;
    if (port) {
      setImmediate(() => {
        // Comlink's finalization registry holds the endpoint until the sink proxy is collected,
        // and the endpoint's listeners reach this run (and the proxy) back: released, or every
        // finished run stays in the thread until it is recycled.
        void sink?.[Comlink.releaseProxy]();
        port.close();
      });
    }
    this.#resolve(this.outcome());
  }

  protected onSettle(): void {}

  /** Builds the failure for a process that ended without a stop reason and not cleanly. */
  protected failure(bytes: number): TaskFailure {
    const { status, signal, spawnError } = this.exitInfo;
    const stderrTail = this.stderrTail;
    if (this.stop) {
      return {
        type: 'error',
        class: this.stop.class,
        exitStatus: null,
        stderrTail,
        bytes,
        ...(this.stop.detail ? { detail: this.stop.detail } : {}),
        ...(this.#killReport ? { kill: this.#killReport } : {}),
      };
    }
    if (spawnError) {
      const code = (spawnError as NodeJS.ErrnoException).code ?? spawnError.message;
      return {
        type: 'error',
        class: 'render_failed',
        exitStatus: null,
        stderrTail,
        bytes,
        detail: `could not start ${this.child.spawnfile}: ${code}`,
      };
    }
    if (status === null) {
      return {
        type: 'error',
        class: 'render_failed',
        exitStatus: null,
        stderrTail,
        bytes,
        detail: `ffmpeg was killed by ${signal ?? 'a signal'}`,
      };
    }
    return {
      type: 'error',
      class: classifyFailure(status, stderrTail),
      exitStatus: status,
      stderrTail,
      bytes,
    };
  }

  #clearDeadline(): void {
    if (this.#deadline) clearTimeout(this.#deadline);
    this.#deadline = null;
  }

  #exitWithin(ms: number): Promise<boolean> {
    if (this.#exited) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(this.#exited), ms);
      this.#onExit.push(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  }

  /** SIGTERM, wait for the exit up to the grace, SIGKILL, wait again. Idempotent. */
  #startKill(): Promise<WorkerKillReport> {
    if (this.#kill) return this.#kill;
    const started = performance.now();
    const report = (outcome: KillOutcome): WorkerKillReport => {
      this.#killReport = { outcome, elapsedMs: performance.now() - started };
      queueMicrotask(() => this.maybeSettle());
      return this.#killReport;
    };
    this.#kill = (async () => {
      if (this.#exited) return report('already_dead');
      this.child.kill('SIGTERM');
      if (await this.#exitWithin(TERM_GRACE_MS)) return report('terminated');
      this.child.kill('SIGKILL');
      if (await this.#exitWithin(KILL_WAIT_MS)) return report('killed');
      return report('survived');
    })();
    return this.#kill;
  }
}

/** STREAMINFO's sample count ends here: `fLaC`, the block header, then 18 bytes of fields. */
const FLAC_TOTAL_SAMPLES_END = 26;

/**
 * Writes `samples` into the 36-bit total-samples field of the STREAMINFO a flac stream opens
 * with (bytes 21-25: the low nibble of 21, then 22-25 big-endian). ffmpeg writing to a pipe
 * leaves it 0 ("unknown"); ffprobe and players then estimate the duration. Anything that is not
 * such a stream is left as it is.
 */
export function writeFlacTotalSamples(head: Uint8Array, samples: number): boolean {
  if (head.length < FLAC_TOTAL_SAMPLES_END) return false;
  const magic = head[0] === 0x66 && head[1] === 0x4c && head[2] === 0x61 && head[3] === 0x43;
  if (!magic || (head[4]! & 0x7f) !== 0) return false; // block 0 must be STREAMINFO
  if (!Number.isSafeInteger(samples) || samples < 0 || samples >= 2 ** 36) return false;
  head[21] = (head[21]! & 0xf0) | Math.floor(samples / 2 ** 32);
  const low = samples % 2 ** 32;
  head[22] = (low >>> 24) & 0xff;
  head[23] = (low >>> 16) & 0xff;
  head[24] = (low >>> 8) & 0xff;
  head[25] = low & 0xff;
  return true;
}

/** Streams stdout to the sink in transferred batches under the acknowledgement window. */
class RenderRun extends ProcessRun<RenderOutcome> {
  readonly #batchBytes: number;
  readonly #flushMs: number;
  /** The output's byte rate bound (bytes per second of audio), if the render gave one. */
  readonly #bytesPerSecond: number | undefined;
  /** When the first bytes were sent (`performance.now()`): the listener's audio starts there. */
  #firstSentAt = 0;
  readonly #maxBytes: number;
  readonly #exactBytes: number | undefined;
  /** A flac render's exact sample count, written into its STREAMINFO before the first send. */
  readonly #flacTotalSamples: number | undefined;
  /** An mp3's head, held until the info frame's place is known (`xingFrame.ts`); null: done. */
  #mp3Head: Buffer[] | null = null;
  #pending: Buffer[] = [];
  #headOffset = 0;
  #pendingBytes = 0;
  #readBytes = 0;
  #sentBytes = 0;
  #outstanding = 0;
  #stdoutEnded = false;
  #partialDue = false;
  #flushTimer: NodeJS.Timeout | null = null;
  #paused = false;
  /** An f:hls segment's fragments, moved to where the playlist places them. */
  readonly #shift: Fmp4DecodeTimeShift | null;

  constructor(task: RenderTask) {
    super(task, task.port);
    this.#shift =
      task.decodeTimeShiftS === undefined ? null : new Fmp4DecodeTimeShift(task.decodeTimeShiftS);
    this.#batchBytes = task.batchBytes ?? BATCH_BYTES;
    this.#flushMs = task.flushMs ?? FLUSH_MS;
    const rate = task.outputBytesPerSecond;
    this.#bytesPerSecond = rate !== undefined && rate > 0 ? rate : undefined;
    this.#maxBytes = task.maxBytes ?? Number.POSITIVE_INFINITY;
    this.#exactBytes = task.exactBytes;
    this.#flacTotalSamples = task.flacTotalSamples;
    if (task.mp3InfoFrame === true) this.#mp3Head = [];
    if (task.prefix !== undefined && task.prefix.length > 0) {
      // The proxy's own header (an exact WAV's): the output's first bytes, counted like ffmpeg's.
      const prefix = Buffer.from(task.prefix.buffer, task.prefix.byteOffset, task.prefix.length);
      this.#pending.push(prefix);
      this.#pendingBytes += prefix.length;
      this.#readBytes += prefix.length;
    }
  }

  protected onStdout(chunk: Buffer): void {
    if (this.#mp3Head !== null) {
      this.#mp3Head.push(chunk);
      const head = Buffer.concat(this.#mp3Head);
      const split = splitForInfoFrame(head);
      if (split === 'more') return;
      this.#mp3Head = null;
      if (split === 'none') {
        chunk = head;
      } else {
        // The info frame's placeholder, completed by the tee at commit: counted like ffmpeg's.
        const frame = infoFramePlaceholder(split.first);
        chunk = Buffer.concat([head.subarray(0, split.offset), frame, head.subarray(split.offset)]);
      }
    }
    this.#readBytes += chunk.length;
    if (this.#readBytes > this.#maxBytes) {
      this.halt({
        class: 'render_failed',
        detail: `render output exceeded the ${this.#maxBytes}-byte retention cap (AP_MAX_VARIANT_BYTES)`,
      });
      return;
    }
    if (this.#exactBytes !== undefined && this.#readBytes > this.#exactBytes) {
      this.halt({
        class: 'render_failed',
        detail: `render output exceeded its announced length of ${this.#exactBytes} bytes`,
      });
      return;
    }
    let out = chunk;
    if (this.#shift) {
      try {
        out = this.#shift.push(chunk);
      } catch (error) {
        this.halt({
          class: 'render_failed',
          detail: `fragmented MP4: ${(error as Error).message}`,
        });
        return;
      }
    }
    this.#hold(out);
    this.#pump();
  }

  protected onStdoutEnd(): void {
    if (this.#mp3Head !== null) {
      // Too short to hold a frame: sent as it came.
      const head = Buffer.concat(this.#mp3Head);
      this.#mp3Head = null;
      if (head.length > 0) this.onStdout(head);
    }
    if (this.#shift) this.#hold(this.#shift.end());
    this.#stdoutEnded = true;
    this.#pump();
  }

  #hold(bytes: Buffer): void {
    if (bytes.length === 0) return;
    this.#pending.push(bytes);
    this.#pendingBytes += bytes.length;
  }

  protected holdsOutput(): boolean {
    return this.#pendingBytes > 0 || !this.#stdoutEnded;
  }

  protected override ack(bytes: number): void {
    if (!(bytes > 0)) return;
    // More than was outstanding is a consumer bug; clamping keeps the window sane.
    this.#outstanding = Math.max(0, this.#outstanding - bytes);
    this.#pump();
  }

  protected override onHalt(): void {
    this.#pending = [];
    this.#pendingBytes = 0;
    this.#headOffset = 0;
    this.#clearFlushTimer();
  }

  protected override onSettle(): void {
    this.#clearFlushTimer();
  }

  protected outcome(): RenderOutcome {
    const { status } = this.exitInfo;
    if (this.stop === null && status === 0) {
      if (this.#exactBytes !== undefined && this.#sentBytes !== this.#exactBytes) {
        // Short of the announced length: never a clean end a listener or the store could keep.
        return {
          type: 'error',
          class: 'render_failed',
          exitStatus: 0,
          stderrTail: this.stderrTail,
          bytes: this.#sentBytes,
          detail: `render output ended at ${this.#sentBytes} of its announced ${this.#exactBytes} bytes`,
        };
      }
      return { type: 'done', exitStatus: 0, bytes: this.#sentBytes, stderrTail: this.stderrTail };
    }
    return this.failure(this.#sentBytes);
  }

  /** Sends what the window and the batching rule allow, then sets stdout's flow to match. */
  #pump(): void {
    if (this.stop) return;
    while (this.#pendingBytes > 0 && this.#outstanding < HIGH_WATER_BYTES) {
      if (this.#batchBytes === 0) {
        this.#send(this.#take(this.#pending[0]!.length - this.#headOffset));
        continue;
      }
      const full = this.#pendingBytes >= this.#batchBytes;
      // The very first bytes go out at once: time to first byte is ffmpeg's, not ours.
      const first = this.#sentBytes === 0;
      if (!full && !first && !this.#partialDue && !this.#stdoutEnded) break;
      // A flac's first batch carries its whole STREAMINFO, so the count can be written into it.
      const patching = first && this.#flacTotalSamples !== undefined;
      if (patching && this.#pendingBytes < FLAC_TOTAL_SAMPLES_END && !this.#stdoutEnded) break;
      const batch = this.#take(Math.min(this.#batchBytes, this.#pendingBytes));
      if (patching) writeFlacTotalSamples(new Uint8Array(batch), this.#flacTotalSamples!);
      this.#send(batch);
    }
    if (this.#pendingBytes === 0) {
      this.#partialDue = false;
      this.#clearFlushTimer();
    } else if (this.#flushTimer === null && !this.#partialDue) {
      this.#flushTimer = setTimeout(() => {
        this.#flushTimer = null;
        this.#partialDue = true;
        this.#pump();
      }, this.#holdMs());
    }
    const stdout = this.child.stdout!;
    if (this.#outstanding >= HIGH_WATER_BYTES) {
      if (!this.#paused) stdout.pause();
      this.#paused = true;
    } else if (this.#paused) {
      this.#paused = false;
      stdout.resume();
    }
    this.maybeSettle();
  }

  /** Copies the next `n` pending bytes into one fresh buffer, ready to transfer. */
  #take(n: number): ArrayBuffer {
    const out = new Uint8Array(n);
    let filled = 0;
    while (filled < n) {
      const head = this.#pending[0]!;
      const count = Math.min(head.length - this.#headOffset, n - filled);
      out.set(head.subarray(this.#headOffset, this.#headOffset + count), filled);
      filled += count;
      this.#headOffset += count;
      if (this.#headOffset === head.length) {
        this.#pending.shift();
        this.#headOffset = 0;
      }
    }
    this.#pendingBytes -= n;
    return out.buffer;
  }

  /**
   * How long a partial batch may wait: `FLUSH_MS`, or, while the listener is more than
   * `LISTENER_LEAD_MS` ahead (the audio sent, at the rate bound, less the time since the first
   * bytes), until its lead falls to that, at most `MAX_HOLD_MS`.
   */
  #holdMs(): number {
    if (this.#bytesPerSecond === undefined || this.#sentBytes === 0) return this.#flushMs;
    const leadMs =
      (this.#sentBytes / this.#bytesPerSecond) * 1000 - (performance.now() - this.#firstSentAt);
    return Math.min(MAX_HOLD_MS, Math.max(this.#flushMs, leadMs - LISTENER_LEAD_MS));
  }

  #send(data: ArrayBuffer): void {
    if (this.#sentBytes === 0) this.#firstSentAt = performance.now();
    this.#outstanding += data.byteLength;
    this.#sentBytes += data.byteLength;
    this.call(() => this.sink?.chunk(Comlink.transfer(data, [data])));
  }

  #clearFlushTimer(): void {
    if (this.#flushTimer) clearTimeout(this.#flushTimer);
    this.#flushTimer = null;
  }
}

/**
 * Folds ffmpeg's PCM into waveform peaks as it arrives (the PCM is dropped chunk by chunk, so a
 * long source costs the pixels, not the audio), then sends the serialised peaks as the render's
 * only chunk once ffmpeg exited cleanly.
 */
class PeaksRun extends ProcessRun<RenderOutcome> {
  readonly #reducer: PeaksReducer;
  readonly #spec: PeaksSpec;
  readonly #maxBytes: number;
  #sent = 0;
  #delivered = false;

  constructor(task: RenderTask & { readonly peaks: PeaksSpec }, reducer: PeaksReducer) {
    super(task, task.port);
    this.#spec = task.peaks;
    this.#reducer = reducer;
    this.#maxBytes = task.maxBytes ?? Number.POSITIVE_INFINITY;
  }

  protected onStdout(chunk: Buffer): void {
    this.#reducer.push(chunk);
  }

  protected onStdoutEnd(): void {
    if (this.#delivered || this.stop || this.exitInfo.status !== 0) return;
    this.#delivered = true;
    const output = this.#reducer.finish({
      sampleRate: this.#spec.sampleRate,
      format: this.#spec.format,
    });
    const bytes = 'json' in output ? output.json : output.dat;
    if (bytes.length > this.#maxBytes) {
      this.halt({
        class: 'render_failed',
        detail: `render output exceeded the ${this.#maxBytes}-byte retention cap (AP_MAX_VARIANT_BYTES)`,
      });
      return;
    }
    const data = new Uint8Array(bytes).buffer; // a fresh, exactly sized buffer to transfer
    this.#sent = data.byteLength;
    this.call(() => this.sink?.chunk(Comlink.transfer(data, [data])));
  }

  protected holdsOutput(): boolean {
    return false; // the one chunk is in flight (counted) by the time the process has closed
  }

  protected outcome(): RenderOutcome {
    if (this.stop === null && this.exitInfo.status === 0) {
      return { type: 'done', exitStatus: 0, bytes: this.#sent, stderrTail: this.stderrTail };
    }
    return this.failure(0);
  }
}

/** Collects stdout in memory, up to the probe cap. */
class ProbeRun extends ProcessRun<ProbeTaskOutcome> {
  readonly #maxBytes: number;
  #chunks: Buffer[] = [];
  #bytes = 0;

  constructor(task: ProbeTask) {
    super(task, task.port ?? null);
    this.#maxBytes = task.maxBytes ?? MAX_PROBE_OUTPUT_BYTES;
  }

  protected onStdout(chunk: Buffer): void {
    this.#bytes += chunk.length;
    if (this.#bytes > this.#maxBytes) {
      this.halt({
        class: 'render_failed',
        detail: `ffprobe output exceeded ${this.#maxBytes} bytes`,
      });
      return;
    }
    this.#chunks.push(chunk);
  }

  protected onStdoutEnd(): void {}

  protected holdsOutput(): boolean {
    return false;
  }

  protected override onHalt(): void {
    this.#chunks = [];
  }

  protected outcome(): ProbeTaskOutcome {
    const { status } = this.exitInfo;
    if (this.stop === null && status === 0) {
      return {
        type: 'ok',
        stdout: Buffer.concat(this.#chunks).toString('utf8'),
        stderrTail: this.stderrTail,
      };
    }
    return this.failure(0);
  }
}

/**
 * Runs ffmpeg by argv and streams its output to the port's sink; with `peaks`, reduces its PCM
 * here and sends the peaks as one chunk.
 */
export function render(task: RenderTask): Promise<RenderOutcome> {
  assertSpec(task);
  if (!task.port || typeof task.port.postMessage !== 'function') {
    throw new TypeError('render task needs a MessagePort in `port`');
  }
  if (task.peaks) {
    const { peaks } = task;
    if (!Number.isInteger(peaks.sampleRate) || peaks.sampleRate < 1) {
      throw new RangeError(`peaks.sampleRate must be a positive integer, got ${peaks.sampleRate}`);
    }
    // Built before the spawn: its constructor validates channels, pts and the frame budget.
    const reducer = new PeaksReducer(peaks);
    return new PeaksRun({ ...task, peaks }, reducer).result;
  }
  return new RenderRun(task).result;
}

/** Runs ffprobe by argv and returns its stdout (≤ `maxBytes`, default 1 MiB). */
export function probe(task: ProbeTask): Promise<ProbeTaskOutcome> {
  assertSpec(task);
  return new ProbeRun(task).result;
}

/** Piscina's entry point: one pool, one module, dispatched on `kind`. */
export default function runTask(task: WorkerTask): unknown {
  switch (task.kind) {
    case 'render':
      return render(task);
    case 'probe':
      return probe(task);
    case 'echo':
      return task.value;
    default:
      throw new TypeError(`unknown worker task kind: ${String((task as { kind?: unknown }).kind)}`);
  }
}
