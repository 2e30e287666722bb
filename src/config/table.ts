/**
 * The table: every row, in documentation order. `loadConfig` folds over it, the operator
 * documentation is generated from it, and `CONFIG_VARIABLES` publishes its documentation half.
 *
 * ## Invariants
 * - **The published list is the read list.** A variable is read only by the fold, and only
 *   because it has a row here, so `CONFIG_VARIABLES` names every variable `loadConfig` reads and
 *   nothing else (a test records every environment read through a Proxy).
 * - **Every field has exactly one row**: the compiler refuses a table that leaves a field
 *   without a row (`Complete`), and `checked` refuses, at import, a name or field listed twice.
 * - **Order is meaning.** Sections appear in the order of `SECTIONS` (checked at import); within
 *   a section, rows appear in the order the documentation lists them; and a row that derives its
 *   default from another comes after it (`Reading.get` throws otherwise, on the first load).
 */
import { type ConfigRow, type ConfigVariable, type FieldName, SECTIONS } from './row.js';
import { CLUSTER_ROWS } from './rows/cluster.js';
import { EXECUTABLE_ROWS } from './rows/executables.js';
import { LIMIT_ROWS } from './rows/limits.js';
import { LISTENER_ROWS } from './rows/listeners.js';
import { PRESET_ROWS } from './rows/presets.js';
import { AWS_ROWS, S3_ROWS } from './rows/s3.js';
import { SOURCE_ROWS } from './rows/sources.js';
import { STORE_ROWS } from './rows/store.js';
import { TELEMETRY_ROWS } from './rows/telemetry.js';
import { WAITING_ROOM_ROWS } from './rows/waitingRoom.js';

/** `R` when its rows yield every field; otherwise a type naming the fields left without a row. */
type Complete<R extends readonly ConfigRow[]> = [Exclude<FieldName, R[number]['field']>] extends [
  never,
]
  ? R
  : { readonly fieldsWithoutARow: Exclude<FieldName, R[number]['field']> };

/** The table itself, once proved complete (by type) and free of repeats (at import). */
function checked<const R extends readonly ConfigRow[]>(rows: R & Complete<R>): R {
  const sectionOrder: readonly string[] = Object.values(SECTIONS);
  const names = new Set<string>();
  const fields = new Set<FieldName>();
  let section = 0;
  for (const r of rows) {
    if (names.has(r.name)) throw new Error(`config table: ${r.name} is listed twice`);
    if (fields.has(r.field)) throw new Error(`config table: field ${r.field} has two rows`);
    const at = sectionOrder.indexOf(r.section);
    if (at < section) throw new Error(`config table: ${r.name} is out of its section's place`);
    names.add(r.name);
    fields.add(r.field);
    section = at;
  }
  return rows;
}

/** Every row, in documentation order; what `loadConfig` folds over. */
export const CONFIG_ROWS = checked([
  ...LISTENER_ROWS,
  ...PRESET_ROWS,
  ...SOURCE_ROWS,
  ...STORE_ROWS,
  ...LIMIT_ROWS,
  ...WAITING_ROOM_ROWS,
  ...TELEMETRY_ROWS,
  ...S3_ROWS,
  ...EXECUTABLE_ROWS,
  ...CLUSTER_ROWS,
  ...AWS_ROWS,
]);

export type ConfigVariableName = (typeof CONFIG_ROWS)[number]['name'];

/** Every variable `loadConfig` reads, in documentation order. The docs table is generated from it. */
export const CONFIG_VARIABLES: readonly ConfigVariable[] = Object.freeze(
  CONFIG_ROWS.map(({ name, section, default: fallback, rule, doc }) =>
    Object.freeze({ name, section, default: fallback, rule, doc }),
  ),
);

export const KNOWN_NAMES: ReadonlySet<string> = new Set(CONFIG_ROWS.map((r) => r.name));

const NAME_OF_FIELD: ReadonlyMap<FieldName, string> = new Map(
  CONFIG_ROWS.map((r) => [r.field, r.name]),
);

/** The variable whose row yields `field`, for messages outside the fold. */
export function variableOf(field: FieldName): string {
  return NAME_OF_FIELD.get(field)!;
}
