/**
 * Named presets, built for the option grammar: `AP_PRESETS`'s definitions (their syntax already
 * proved by the config row) checked against the grammar itself, once, and turned into the
 * `OptionGrammar` the options stage parses with.
 *
 * ## Invariants
 * - **A preset is valid on its own.** Each one must parse, with no preset of its own, exactly as a
 *   URL carrying only its segments would (a preset of `pts:400` without `f:peaks` is refused),
 *   and may hold neither `pr` (presets do not nest) nor a request option such as `exp` (an expiry
 *   belongs to one URL, never to a stored string). So expanding one can never refuse a segment.
 * - **Refused at boot, all at once.** `optionGrammarOf` throws one `ConfigError` naming
 *   `AP_PRESETS` with a problem per bad preset; `createAudioProxy` calls it before building
 *   anything, so a bad preset stops the boot like any other bad value.
 * - **Built once per definition list**: memoised on the (frozen) list, so a request pays a map
 *   lookup.
 *
 * ## Races
 * None: pure, memoised on immutable input.
 *
 * ## Events
 * None.
 */
import {
  type Config,
  ConfigError,
  type ConfigProblem,
  type PresetDefinition,
  variableOf,
} from '../config/index.js';
import { NO_PRESETS, type OptionGrammar, parseOptions } from './options.js';
import { OPTION_ROWS, PRESET_KEY } from './optionTable.js';

const PER_URL_KEYS: ReadonlySet<string> = new Set(
  OPTION_ROWS.filter((r) => r.kind === 'request').map((r) => r.key),
);

/** The two grammars of one definition list: presets allowed, and presets only. */
interface Built {
  readonly open: OptionGrammar;
  readonly only: OptionGrammar;
}
const built = new WeakMap<readonly PresetDefinition[], Built>();

/** Why one preset cannot be expanded, or undefined when it can. */
function refusal(preset: PresetDefinition): string | undefined {
  const segments = preset.options.split('/');
  for (const segment of segments) {
    const key = segment.slice(0, Math.max(0, segment.indexOf(':')));
    if (key === PRESET_KEY) return `${JSON.stringify(segment)}: presets do not nest`;
    if (PER_URL_KEYS.has(key)) {
      return `${JSON.stringify(segment)} belongs to one URL, not to a stored preset`;
    }
  }
  const parsed = parseOptions(segments);
  return parsed.ok ? undefined : parsed.message;
}

/**
 * The grammar for `definitions`: each checked, then stored as its segments. Throws a
 * `ConfigError` naming `AP_PRESETS` with one problem per preset the grammar refuses.
 */
export function compilePresets(
  definitions: readonly PresetDefinition[],
  onlyPresets: boolean,
): OptionGrammar {
  const variable = variableOf('presets');
  const problems: ConfigProblem[] = [];
  const presets = new Map<string, readonly string[]>();
  for (const preset of definitions) {
    const why = refusal(preset);
    if (why === undefined) presets.set(preset.name, Object.freeze(preset.options.split('/')));
    else {
      problems.push({
        variable,
        message: `${variable}: the preset ${JSON.stringify(preset.name)} is not a valid option string: ${why}`,
      });
    }
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze({ presets, onlyPresets });
}

/** The option grammar `config` asks for (memoised); throws `ConfigError` for a bad preset. */
export function optionGrammarOf(config: Config): OptionGrammar {
  const { presets, onlyPresets } = config;
  if (presets.length === 0 && !onlyPresets) return NO_PRESETS;
  let pair = built.get(presets);
  if (pair === undefined) {
    const open = compilePresets(presets, false);
    pair = { open, only: Object.freeze({ presets: open.presets, onlyPresets: true }) };
    built.set(presets, pair);
  }
  return onlyPresets ? pair.only : pair.open;
}
