/**
 * Regenerates docs/chart-coverage.md: the states and transitions of every chart that the
 * path-generated tests in test/graph/ visit.
 *
 *   npx tsx scripts/chart-coverage.ts           write the file
 *   npx tsx scripts/chart-coverage.ts --check   exit 1 if the file is stale (writes nothing)
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { renderCoverageReport } from '../test/graph/report.js';

const target = fileURLToPath(new URL('../docs/chart-coverage.md', import.meta.url));
const generated = await renderCoverageReport();

if (process.argv.includes('--check')) {
  let current = '';
  try {
    current = readFileSync(target, 'utf8');
  } catch {
    // missing counts as stale
  }
  if (current !== generated) {
    process.stderr.write(`${target} is stale; run: npx tsx scripts/chart-coverage.ts\n`);
    process.exit(1);
  }
} else {
  writeFileSync(target, generated);
  process.stdout.write(`wrote ${target}\n`);
}
