#!/usr/bin/env node
// Runs the compiled CLI (dist/cli.js: what the package ships, built by `prepack`, `prestart` and
// `npm run build`). In a git checkout without a build, or with AUDIO_PROXY_FROM_SOURCE set, it
// runs the TypeScript source through tsx, a dev dependency: present after `npm ci`, absent in a
// production install, where a missing dist/ is said in one line instead of a stack trace.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const dist = new URL('../dist/cli.js', import.meta.url);
if (existsSync(fileURLToPath(dist)) && !process.env.AUDIO_PROXY_FROM_SOURCE) {
  await import(dist.href);
} else {
  let register;
  try {
    ({ register } = await import('tsx/esm/api'));
  } catch {
    process.stderr.write(
      'audio-proxy: dist/ is not built and tsx (a dev dependency) is not installed: run `npm run build`\n',
    );
    process.exit(1);
  }
  register();
  await import(new URL('../src/cli.ts', import.meta.url).href);
}
