#!/usr/bin/env node
// Runs the compiled CLI when `npm run build` has produced dist/, else the TypeScript source
// through tsx's loader (so `npx audio-proxy` works straight after `npm ci`).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const dist = new URL('../dist/cli.js', import.meta.url);
if (existsSync(fileURLToPath(dist)) && !process.env.AUDIO_PROXY_FROM_SOURCE) {
  await import(dist.href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import(new URL('../src/cli.ts', import.meta.url).href);
}
