/**
 * The benchmarks that measure the proxy compiled (`bench/serve.mjs`, `bench/hitServe.mjs`) build
 * `dist/` first when it is missing or older than any file under `src/`: a stale build would
 * measure yesterday's code.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export function ensureBuilt(): void {
  const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));
  const built = join(here('../dist'), 'proxy.js');
  const newest = (dir: string): number =>
    readdirSync(dir, { withFileTypes: true }).reduce((m, e) => {
      const p = join(dir, e.name);
      return Math.max(m, e.isDirectory() ? newest(p) : statSync(p).mtimeMs);
    }, 0);
  if (existsSync(built) && statSync(built).mtimeMs >= newest(here('../src'))) return;
  process.stderr.write('building dist/ (the proxy is measured compiled)…\n');
  execFileSync('npm', ['run', '--silent', 'build'], { cwd: here('..'), stdio: 'inherit' });
}
