// Proves the table's own rules, which the rest of config relies on: each variable's name is
// written once in src/config/ (in its row), each row yields a field of its own, rows come section
// by section in documentation order, a row that reads a field before that field's row is caught,
// the published list carries documentation only, and problems are reported in table order, then
// the rules across variables.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Ledger } from '../src/config/fold.js';
import { CONFIG_VARIABLES, ConfigError, loadConfig, nodeConfigFs } from '../src/config/index.js';
import { SECTIONS } from '../src/config/row.js';
import { LISTENER_ROWS } from '../src/config/rows/listeners.js';
import { CONFIG_ROWS } from '../src/config/table.js';

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? sources(join(dir, e.name))
      : e.name.endsWith('.ts')
        ? [join(dir, e.name)]
        : [],
  );
}

function problemVariables(env: Record<string, string>): string[] {
  try {
    loadConfig(env, { cpuCount: 2 });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems.map((p) => p.variable);
  }
  throw new Error('expected a ConfigError');
}

describe('the table', () => {
  it('writes each variable name once in src/config/, as a string literal in its row', () => {
    const files = sources(join(process.cwd(), 'src/config')).map((f) => readFileSync(f, 'utf8'));
    for (const { name } of CONFIG_VARIABLES) {
      const count = files.reduce((n, text) => n + text.split(`'${name}'`).length - 1, 0);
      expect(count, name).toBe(1);
    }
  });

  it('gives every row a name and a field of its own', () => {
    const names = CONFIG_ROWS.map((r) => r.name);
    const fields = CONFIG_ROWS.map((r) => r.field);
    expect(new Set(names).size).toBe(names.length);
    expect(new Set(fields).size).toBe(fields.length);
  });

  it('lists the rows section by section, in documentation order', () => {
    const order = Object.values(SECTIONS) as string[];
    const seen = [...new Set(CONFIG_ROWS.map((r) => r.section))];
    expect(seen).toEqual(order);
    const positions = CONFIG_ROWS.map((r) => order.indexOf(r.section));
    expect(positions).toEqual([...positions].sort((a, b) => a - b));
  });

  it('publishes documentation only: no reader leaks into CONFIG_VARIABLES', () => {
    expect(CONFIG_VARIABLES.map((v) => v.name)).toEqual(CONFIG_ROWS.map((r) => r.name));
    for (const v of CONFIG_VARIABLES) {
      expect(Object.keys(v).sort()).toEqual(['default', 'doc', 'name', 'rule', 'section']);
      expect(Object.isFrozen(v)).toBe(true);
    }
    expect(Object.isFrozen(CONFIG_VARIABLES)).toBe(true);
  });
});

describe('the fold', () => {
  it('refuses a table whose row reads a field before that field’s row', () => {
    const [apPort, port] = LISTENER_ROWS;
    const misordered = new Ledger([port, apPort]);
    expect(() => misordered.fold({}, { fs: nodeConfigFs, cpuCount: 1 })).toThrow(
      'config table: PORT reads the field "apPort" before its row',
    );
  });

  it('reports single-variable problems in table order, then the rules across variables', () => {
    expect(
      problemVariables({ AP_QUEUE_SIZE: 'x', AP_METRICS_PORT: '4000', AP_KEY: 'short' }),
    ).toEqual(['AP_KEY', 'AP_QUEUE_SIZE', 'AP_METRICS_PORT']);
    expect(problemVariables({ AWS_ACCESS_KEY_ID: 'id', AP_CLUSTER_LEASE_MS: '1' })).toEqual([
      'AP_CLUSTER_LEASE_MS',
      'AWS_SECRET_ACCESS_KEY',
    ]);
  });
});
