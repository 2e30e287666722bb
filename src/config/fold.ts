/**
 * The fold: one pass over the table of rows that reads each row's variable from the environment,
 * hands it to the row's reader, and keeps the load's ledger (the fields produced, the variables
 * set, the problems found). `ConfigError` is what a ledger with problems becomes.
 *
 * ## Invariants
 * - **The only environment access is `readVariable`, called once per row**, whatever the other
 *   values hold: every listed variable is read on every load, and no other (the test records the
 *   reads through a Proxy).
 * - **Unset means default.** Values are trimmed; empty or all-whitespace is the same as absent.
 * - **Rows are read in table order**, so a derived default sees its source's effective value, and
 *   single-variable problems are reported in table (documentation) order; the rules across
 *   variables run after the fold and report after them.
 * - **A problem names a variable**: it is recorded against a field, and the ledger names the
 *   field's row, so a rule across variables blames the one to change first.
 */
import type { ConfigFs, ConfigRow, FieldName, Fields, Reading } from './row.js';

export type Env = NodeJS.ProcessEnv | Readonly<Record<string, string | undefined>>;

/** One invalid value or combination. */
export interface ConfigProblem {
  /** The variable the problem is reported against (cross rules: the one to change first). */
  readonly variable: string;
  /** A full sentence naming the variable and the rule. */
  readonly message: string;
}

/** The environment does not describe a bootable proxy. Match on `code`. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly code = 'ERR_CONFIG' as const;
  readonly problems: readonly ConfigProblem[];
  constructor(problems: readonly ConfigProblem[]) {
    const count = problems.length === 1 ? '1 problem' : `${problems.length} problems`;
    super(
      `invalid configuration (${count}):\n${problems.map((p) => `  - ${p.message}`).join('\n')}`,
    );
    this.problems = Object.freeze([...problems]);
  }
}

/** What a load knows about its host besides the environment. */
export interface Host {
  readonly fs: ConfigFs;
  readonly cpuCount: number;
}

/** Reads one variable: trimmed, with empty meaning unset. The only environment access. */
function readVariable(env: Env, name: string): string | undefined {
  const value: unknown = env[name];
  if (typeof value !== 'string') return undefined;
  const trimmed = value.trim();
  return trimmed === '' ? undefined : trimmed;
}

/** Per-load state: the fields produced so far, which variables were set, and the problems. */
export class Ledger {
  readonly problems: ConfigProblem[] = [];
  readonly #names: ReadonlyMap<FieldName, string>;
  readonly #values: Partial<Record<FieldName, unknown>> = {};
  readonly #set = new Set<FieldName>();
  readonly #failed = new Set<FieldName>();

  constructor(readonly rows: readonly ConfigRow[]) {
    this.#names = new Map(rows.map((r) => [r.field, r.name]));
  }

  /**
   * Reads every row, in table order, and returns what they yielded. The table is complete (it
   * has a row for every field: `table.ts` proves it), so the result is a whole `Fields`.
   */
  fold(env: Env, host: Host): Fields {
    for (const r of this.rows) {
      const raw = readVariable(env, r.name);
      if (raw !== undefined) this.#set.add(r.field);
      this.#values[r.field] = r.read(this.#reading(r, raw, host));
    }
    return this.#values as Fields;
  }

  /** The variable that yields `field`. */
  nameOf(field: FieldName): string {
    const name = this.#names.get(field);
    if (name === undefined) throw new Error(`config: no row yields the field "${field}"`);
    return name;
  }

  /** Records a problem against the variable behind `field`. */
  fail(field: FieldName, message: string): undefined {
    this.#failed.add(field);
    this.problems.push({ variable: this.nameOf(field), message });
    return undefined;
  }

  /** Whether the variables behind these fields have no problem so far. */
  ok(...fields: readonly FieldName[]): boolean {
    return fields.every((f) => !this.#failed.has(f));
  }

  /** Whether the variable behind `field` was set (non-empty after trimming). */
  isSet(field: FieldName): boolean {
    return this.#set.has(field);
  }

  #reading(r: ConfigRow, raw: string | undefined, host: Host): Reading {
    return {
      name: r.name,
      raw,
      fs: host.fs,
      cpuCount: host.cpuCount,
      fail: (message) => this.fail(r.field, message),
      ok: (...fields) => this.ok(...fields),
      get: <K extends FieldName>(field: K): Fields[K] => {
        if (!(field in this.#values)) {
          throw new Error(`config table: ${r.name} reads the field "${field}" before its row`);
        }
        return this.#values[field] as Fields[K];
      },
    };
  }
}
