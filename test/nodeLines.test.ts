// The Node lines the project supports (#16 item 7). package.json's `engines` admits the Node
// running this test (CI runs this file on 20 and again on 24, 22 and 26), and `@types/node` is
// the lowest admitted line's, so the typecheck refuses an API that line lacks.
// scripts/node-line.sh, which CI uses to fetch the other lines, answers from its cache without a
// registry: the newest working version of the asked line, never a broken or a neighbouring one;
// nothing cached is exit 1 with nothing on stdout, a bad argument exit 2. (Its download path runs
// in CI's first pass on a new machine; it is not repeated here.)
import { execFile } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const SCRIPT = join(process.cwd(), 'scripts/node-line.sh');
const pkg = JSON.parse(readFileSync(join(process.cwd(), 'package.json'), 'utf8')) as {
  engines: { node: string };
  devDependencies: Record<string, string>;
};

type Version = readonly [number, number, number];
const parse = (v: string): Version => {
  const [a = 0, b = 0, c = 0] = v.replace(/^v/, '').split('.').map(Number);
  return [a, b, c];
};
const cmp = (x: Version, y: Version) => x[0] - y[0] || x[1] - y[1] || x[2] - y[2];

/** The `engines` grammar used here: `||` of `^a.b.c` or `>=a.b.c`. */
function admits(range: string, version: string): boolean {
  const v = parse(version);
  return range.split('||').some((part) => {
    const m = /^\s*(\^|>=)(\d+\.\d+\.\d+)\s*$/.exec(part);
    if (!m) throw new Error(`engines part not understood: ${part}`);
    const floor = parse(m[2]!);
    return cmp(v, floor) >= 0 && (m[1] === '>=' || v[0] === floor[0]);
  });
}

describe('supported Node lines', () => {
  it('engines admits the running Node, and 20.19 but not the 20 or 22 releases before require(esm)', () => {
    const range = pkg.engines.node;
    expect(admits(range, process.version), `${process.version} in ${range}`).toBe(true);
    for (const v of ['20.19.0', '22.12.0', '24.0.0', '26.0.0'])
      expect(admits(range, v), v).toBe(true);
    for (const v of ['18.20.0', '20.18.3', '22.11.0']) expect(admits(range, v), v).toBe(false);
  });

  it('types Node at the lowest admitted line', () => {
    const lowest = Math.min(
      ...pkg.engines.node.split('||').map((p) => parse(p.replace(/[\^>=\s]/g, ''))[0]),
    );
    expect(parse(pkg.devDependencies['@types/node']!)[0]).toBe(lowest);
  });
});

describe('scripts/node-line.sh from its cache', () => {
  const cache = mkdtempSync(join(tmpdir(), 'ap-node-line-'));
  afterAll(() => rmSync(cache, { recursive: true, force: true }));

  /** A cached version whose bin/node prints `prints` for --version. */
  const seed = (dir: string, prints: string) => {
    mkdirSync(join(cache, dir, 'bin'), { recursive: true });
    const node = join(cache, dir, 'bin/node');
    writeFileSync(node, `#!/bin/sh\necho ${prints}\n`);
    chmodSync(node, 0o755);
  };
  seed('24.9.0', 'v24.9.0');
  seed('24.10.1', 'v24.10.1');
  seed('24.11.0', 'v0.0.0-broken'); // newest, but does not run as what its folder says
  seed('240.1.0', 'v240.1.0'); // another line that merely starts with the same digits

  const run = (args: string[], env: Record<string, string> = {}) =>
    new Promise<{ code: number; stdout: string }>((resolve) => {
      execFile(
        'bash',
        [SCRIPT, ...args],
        { env: { ...process.env, AP_NODE_CACHE: cache, ...env }, timeout: 60_000 },
        (err, stdout) => resolve({ code: err ? Number(err.code ?? 1) : 0, stdout }),
      );
    });

  it('--offline prints the newest working version of the line', async () => {
    expect(await run(['--offline', '24'])).toEqual({
      code: 0,
      stdout: `${join(cache, '24.10.1/bin/node')}\n`,
    });
  });

  it('falls back to the cache when the registry does not answer', async () => {
    const r = await run(['24'], { npm_config_registry: 'http://127.0.0.1:9/' });
    expect(r).toEqual({ code: 0, stdout: `${join(cache, '24.10.1/bin/node')}\n` });
  });

  it('is exit 1 with nothing on stdout for a line not cached', async () => {
    expect(await run(['--offline', '22'])).toEqual({ code: 1, stdout: '' });
  });

  it('is exit 2 for an argument that is not a major version', async () => {
    expect((await run(['lts'])).code).toBe(2);
    expect((await run([])).code).toBe(2);
    expect((await run(['24', '26'])).code).toBe(2);
  });
});
