/**
 * Regenerates docs/configuration.md from `CONFIG_VARIABLES` (src/config/table.ts).
 *
 *   npx tsx scripts/gen-config-docs.ts           write the file
 *   npx tsx scripts/gen-config-docs.ts --check   exit 1 if the file is stale (writes nothing)
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { renderConfigDocs } from '../src/config/index.js';

const target = fileURLToPath(new URL('../docs/configuration.md', import.meta.url));
const generated = renderConfigDocs();

if (process.argv.includes('--check')) {
  let current = '';
  try {
    current = readFileSync(target, 'utf8');
  } catch {
    // missing counts as stale
  }
  if (current !== generated) {
    process.stderr.write(`${target} is stale; run: npx tsx scripts/gen-config-docs.ts\n`);
    process.exit(1);
  }
} else {
  writeFileSync(target, generated);
  process.stdout.write(`wrote ${target}\n`);
}
