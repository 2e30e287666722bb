/**
 * The operator documentation, generated: `renderConfigDocs()` is docs/configuration.md, made
 * from the table's rows, the general parsing rules and the rules across variables.
 *
 * ## Invariants
 * - **The document is exactly what this renders** (`test/configDocs.test.ts`); regenerate it
 *   with `npx tsx scripts/gen-config-docs.ts`.
 * - **The formatter leaves it unchanged**: tables are padded the way Biome pads them, so lint
 *   and the test cannot fight.
 * - **Sections appear in table order**, each listing its rows in table order.
 */
import { CONFIG_CROSS_RULES } from './cross.js';
import { CONFIG_EXIT_CODE } from './load.js';
import { RULE } from './rules.js';
import { CONFIG_VARIABLES } from './table.js';

/** The general parsing rules, as documented. */
export const CONFIG_GENERAL_RULES: readonly string[] = [
  'Values are trimmed; an empty or all-whitespace value counts as unset.',
  'Integers are plain decimal digits after trimming: `" 32 "` and `007` are accepted; `1.5`, `12kb`, `3 2`, `1e3`, `1_000`, `-1` and `+5` are refused (a sign is never needed for a count).',
  `Booleans are ${RULE.boolean}.`,
  'Enumerations are case-sensitive; the error lists the allowed values.',
  'Every error names the variable and the rule; all problems are reported together, and the process exits with code 2.',
  'The configuration is read once, at boot, and never changes while the process runs.',
];

const TABLE_HEADER = ['Variable', 'Default', 'Accepted values', 'What it does'];

function cell(text: string): string {
  return text.replaceAll('|', '\\|').replaceAll('\n', ' ');
}

/**
 * A Markdown table padded the way the repository's formatter (Biome) pads one, so it is stable.
 * Cells are taken as given (escape `|` first); also used by the option reference (`http/`).
 */
export function markdownTable(
  header: readonly string[],
  rows: readonly (readonly string[])[],
): string[] {
  const widths = header.map((h, i) => Math.max(3, h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: readonly string[]) =>
    `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)];
}

/** docs/configuration.md, generated from `CONFIG_VARIABLES` and the rule lists. */
export function renderConfigDocs(): string {
  const lines: string[] = [
    '# Configuration',
    '',
    '<!-- Generated from src/config/ by `npx tsx scripts/gen-config-docs.ts`; do not edit by hand.',
    '     test/configDocs.test.ts fails when this file and the code disagree. -->',
    '',
    'audio-proxy reads its configuration from the environment once, at boot. An invalid value stops the',
    `boot before anything listens: every problem is printed to stderr, each naming its variable and the`,
    `rule it breaks, and the process exits with code ${CONFIG_EXIT_CODE}. Embedders call \`loadConfig(env)\`, which throws`,
    "a `ConfigError` (`code: 'ERR_CONFIG'`) whose `problems` list holds the same messages.",
    '',
    '## General rules',
    '',
    ...CONFIG_GENERAL_RULES.map((r) => `- ${r}`),
    '',
    '## Rules across variables',
    '',
    ...CONFIG_CROSS_RULES.map((r) => `- ${r}`),
  ];
  const sections = [...new Set(CONFIG_VARIABLES.map((v) => v.section))];
  for (const section of sections) {
    const rows = CONFIG_VARIABLES.filter((v) => v.section === section).map((v) =>
      [`\`${v.name}\``, v.default, v.rule, v.doc].map(cell),
    );
    lines.push('', `## ${section}`, '', ...markdownTable(TABLE_HEADER, rows));
  }
  lines.push(
    '',
    'An `AP_*` name that nothing reads is ignored; `configWarnings()` lists such names (usually typos)',
    'for the boot log. The proposed `AP_BACKLOG_MODE`, `AP_SPOOL_DIR`, `AP_SPOOL_MAX_BYTES` and',
    '`AP_BACKLOG_SPILL_BYTES` are not implemented.',
    '',
  );
  return lines.join('\n');
}
