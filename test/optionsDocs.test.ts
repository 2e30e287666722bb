// Proves that the URL option reference and the grammar agree (#16 item 5): docs/options.md is
// exactly what renderOptionsDocs() generates (and stays as the formatter leaves it); the table
// has one row per key the parser accepts and no other; every example in it parses and every
// refusal is refused for the reason it names; every refusal reason has an example; and the
// bounds the reference states are where the parser turns (the bound accepted, one past refused).
// Regenerate the document with: npx tsx scripts/gen-options-docs.ts
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REQUEST_KEYS, VARIANT_KEYS } from '../src/core/variant.js';
import {
  GENERAL_REFUSALS,
  ONLY_PRESETS_EXAMPLES,
  renderOptionsDocs,
} from '../src/http/optionDocs.js';
import { OPTION_ERROR_REASONS, parseOptions } from '../src/http/options.js';
import {
  MAX_BITRATE_KBPS,
  MAX_EXP_S,
  MAX_GAIN_DB,
  MAX_PEAK_COUNT,
  MAX_SAMPLE_RATE_HZ,
  MAX_SECONDS,
  NORM_RANGES,
  OPTION_EXAMPLE_PRESETS,
  OPTION_ROWS,
  PRESET_KEY,
  QUALITY_RANGES,
} from '../src/http/optionTable.js';
import { compilePresets } from '../src/http/presets.js';

const DOC_PATH = join(process.cwd(), 'docs/options.md');
const open = compilePresets(OPTION_EXAMPLE_PRESETS, false);
const only = compilePresets(OPTION_EXAMPLE_PRESETS, true);

describe('docs/options.md', () => {
  it('is exactly the generated document (run `npx tsx scripts/gen-options-docs.ts` to refresh)', () => {
    expect(readFileSync(DOC_PATH, 'utf8')).toBe(renderOptionsDocs());
  });

  it('is left unchanged by the repository formatter, so lint and this test cannot fight', () => {
    const biome = join(process.cwd(), 'node_modules/.bin/biome');
    const out = spawnSync(biome, ['format', '--stdin-file-path=docs/options.md'], {
      input: renderOptionsDocs(),
      encoding: 'utf8',
    });
    expect(out.status, out.stderr).toBe(0);
    expect(out.stdout).toBe(renderOptionsDocs());
  });

  it('has a section per key, and lists the canonical key order', () => {
    const doc = renderOptionsDocs();
    for (const row of OPTION_ROWS) expect(doc).toContain(`### \`${row.key}\`: ${row.title}`);
    expect(doc).toContain(VARIANT_KEYS.map((k) => `\`${k}\``).join(', '));
  });
});

describe('the table against the parser', () => {
  it('has one row per key the grammar knows, and no other', () => {
    const keys = OPTION_ROWS.map((r) => r.key);
    expect(new Set(keys).size).toBe(keys.length);
    expect([...keys].sort()).toEqual([...VARIANT_KEYS, ...REQUEST_KEYS, PRESET_KEY].sort());
    for (const row of OPTION_ROWS) {
      const kind = (VARIANT_KEYS as readonly string[]).includes(row.key)
        ? 'variant'
        : row.key === PRESET_KEY
          ? 'preset'
          : 'request';
      expect(row.kind, row.key).toBe(kind);
    }
  });

  it('the parser knows every row’s key and refuses a key without a row', () => {
    for (const row of OPTION_ROWS) {
      const r = parseOptions(`${row.key}:x`, open);
      if (!r.ok) expect(r.reason, row.key).not.toBe('unknown_key');
    }
    for (const key of ['fmt', 'bitrate', 'preset', 'F', 'info']) {
      const r = parseOptions(`${key}:1`, open);
      expect(r.ok ? 'ok' : r.reason).toBe('unknown_key');
    }
  });

  it('every example parses, with the sample presets', () => {
    for (const row of OPTION_ROWS) {
      for (const example of row.examples) {
        const r = parseOptions(example, open);
        expect(r.ok ? 'ok' : r.message, `${row.key}: ${example}`).toBe('ok');
      }
    }
    for (const example of ONLY_PRESETS_EXAMPLES.accepted) {
      expect(parseOptions(example, only).ok, example).toBe(true);
    }
  });

  it('every refusal is refused for the reason it names', () => {
    const cases = [
      ...GENERAL_REFUSALS.map(([e, reason]) => [e, reason, open] as const),
      ...OPTION_ROWS.flatMap((row) => row.refused.map(([e, reason]) => [e, reason, open] as const)),
      ...ONLY_PRESETS_EXAMPLES.refused.map(([e, reason]) => [e, reason, only] as const),
    ];
    for (const [example, reason, grammar] of cases) {
      const r = parseOptions(example, grammar);
      expect(r.ok ? 'accepted' : r.reason, example).toBe(reason);
    }
    const named = new Set(cases.map(([, reason]) => reason));
    // `info_with_options` is a route's refusal; the page shows it through parseRoute.
    expect(OPTION_ERROR_REASONS.filter((r) => !named.has(r))).toEqual(['info_with_options']);
  });

  it('the stated bounds are where the parser turns', () => {
    const turns = (ok: string, refused: string, reason = 'out_of_range') => {
      expect(parseOptions(ok, open).ok, ok).toBe(true);
      const r = parseOptions(refused, open);
      expect(r.ok ? 'accepted' : r.reason, refused).toBe(reason);
    };
    turns(`br:${MAX_BITRATE_KBPS}`, `br:${MAX_BITRATE_KBPS + 1}`);
    turns(`f:flac/sr:${MAX_SAMPLE_RATE_HZ}`, `f:flac/sr:${MAX_SAMPLE_RATE_HZ + 1}`);
    turns(`f:peaks/pts:${MAX_PEAK_COUNT}`, `f:peaks/pts:${MAX_PEAK_COUNT + 1}`);
    turns(`gain:-${MAX_GAIN_DB}`, `gain:-${MAX_GAIN_DB}.001`);
    turns(`exp:${MAX_EXP_S}`, `exp:${MAX_EXP_S + 1}`);
    turns(`t:${MAX_SECONDS}`, `t:${MAX_SECONDS}.001`);
    const [[iMin, iMax], [tpMin, tpMax], [lraMin, lraMax]] = NORM_RANGES as [
      [number, number],
      [number, number],
      [number, number],
    ];
    turns(`norm:ebu:${iMin}:${tpMin}:${lraMin}`, `norm:ebu:${iMin - 1}`);
    turns(`norm:ebu:${iMax}:${tpMax}:${lraMax}`, `norm:ebu:${iMax}:${tpMax}:${lraMax + 1}`);
    for (const [format, [min, max]] of Object.entries(QUALITY_RANGES) as [
      string,
      [number, number],
    ][]) {
      turns(`f:${format}/q:${min}`, `f:${format}/q:${min - 1}`, 'out_of_range_for_format');
      turns(`f:${format}/q:${max}`, `f:${format}/q:${max + 1}`, 'out_of_range_for_format');
    }
  });
});
