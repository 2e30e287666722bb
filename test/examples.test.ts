// The examples in examples/ run as written: each is started the way its header says
// (`npx tsx examples/<file>`, here through the same tsx binary), one after another over one
// shared demo library, and must exit by itself with code 0 and print the line that shows it
// did its job (a 200 with bytes, the jobs' tally, "20 clients, 1 encode", …).
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { ensureDemoLibrary } from '../src/demo.js';
import { resolveFfmpeg } from '../src/workers/ffmpegPath.js';

const run = promisify(execFile);
const TSX = join(process.cwd(), 'node_modules/.bin/tsx');
/** Each example ends within ~30 s on an idle machine; this bound leaves room for a busy CI box. */
const EXAMPLE_TIMEOUT_MS = 90_000;

const EXAMPLES: ReadonlyArray<readonly [file: string, expected: readonly RegExp[]]> = [
  ['node-http.ts', [/^→ 200 audio\/ogg, [1-9]\d* bytes \(MISS\)$/m, /^closed$/m]],
  ['express.ts', [/^→ 200 audio\/mpeg, [1-9]\d* bytes$/m, /^ {2}duration 90 s$/m, /^closed$/m]],
  ['fastify.ts', [/^→ 200 audio\/flac, [1-9]\d* bytes/m, /^closed$/m]],
  ['semaphore-alone.ts', [/^6 jobs: 4 ran, 1 refused, 1 displaced$/m, /"held":0,"queued":0/]],
  [
    'coalescing-demo.ts',
    [/^answers: 200 MISS ×1, 200 COALESCED ×19$/m, /all identical/, /^20 clients, 1 encode$/m],
  ],
  [
    'actor-runtime.ts',
    [/^call get → 5$/m, /ERR_CALL_TIMEOUT$/m, /gone \(stopped\)$/m, /ERR_CALLEE_STOPPED$/m],
  ],
  ['waiting-room.ts', [/eve: \{"type":"full"/, /^runs timed: [1-9]/m]],
];

describe('examples/', () => {
  beforeAll(async () => {
    // Generated once and shared: the examples then find it in place.
    await ensureDemoLibrary(resolveFfmpeg({ env: process.env }).path);
  }, 120_000);

  for (const [file, expected] of EXAMPLES) {
    it(
      `${file} exits 0 by itself and prints what it demonstrates`,
      async () => {
        const { stdout } = await run(TSX, [join('examples', file)], {
          cwd: process.cwd(),
          timeout: EXAMPLE_TIMEOUT_MS,
          killSignal: 'SIGKILL',
          maxBuffer: 16 * 1024 * 1024,
        });
        for (const pattern of expected) expect(stdout).toMatch(pattern);
      },
      EXAMPLE_TIMEOUT_MS + 10_000,
    );
  }
});
