/**
 * Regenerates docs/options.md from the option grammar's table (src/http/optionTable.ts), parsing
 * every example as it goes (src/http/optionDocs.ts).
 *
 *   npx tsx scripts/gen-options-docs.ts           write the file
 *   npx tsx scripts/gen-options-docs.ts --check   exit 1 if the file is stale (writes nothing)
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { renderOptionsDocs } from '../src/http/optionDocs.js';

const target = fileURLToPath(new URL('../docs/options.md', import.meta.url));
const generated = renderOptionsDocs();

if (process.argv.includes('--check')) {
  let current = '';
  try {
    current = readFileSync(target, 'utf8');
  } catch {
    // missing counts as stale
  }
  if (current !== generated) {
    process.stderr.write(`${target} is stale; run: npx tsx scripts/gen-options-docs.ts\n`);
    process.exit(1);
  }
} else {
  writeFileSync(target, generated);
  process.stdout.write(`wrote ${target}\n`);
}
