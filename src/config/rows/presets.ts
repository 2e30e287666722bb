/**
 * Rows of named presets: option strings the operator stores under a name, which a signed URL
 * names with `pr:NAME` instead of spelling the options out, and the switch that makes presets
 * the only variant options a render URL may carry.
 *
 * ## Invariants
 * - **The syntax is proved here, the grammar where it lives.** These rows prove each entry is
 *   `name=options` with a unique name a `pr:` segment can carry and options a URL could spell;
 *   whether those options are valid is the option grammar's question (`http/presets.ts`), asked
 *   once when the proxy is built and refused there with a `ConfigError` naming `AP_PRESETS`.
 * - **Unset is no presets**: `pr:NAME` is then a 422 (`unknown_preset`) like any unknown name.
 *
 * Not here: that `AP_ONLY_PRESETS` needs `AP_PRESETS` (`cross.ts`); expanding a preset in a URL
 * (`http/options.ts`).
 */
import { boolean, presetList } from '../parsers.js';
import { row, SECTIONS } from '../row.js';
import { RULE } from '../rules.js';

const section = SECTIONS.presets;

export const PRESET_ROWS = [
  row({
    name: 'AP_PRESETS',
    field: 'presets',
    section,
    default: 'unset: no presets',
    rule: RULE.presets,
    doc: 'Named option strings a signed URL uses as `pr:NAME` (e.g. `preview=f:mp3/br:64/t:0:30,hq=f:opus/br:160`). The variant is the expansion: a preset URL and the same options spelled out share a cache key. See docs/options.md.',
    read: (v) => presetList(v),
  }),
  row({
    name: 'AP_ONLY_PRESETS',
    field: 'onlyPresets',
    section,
    default: '`false`',
    rule: RULE.boolean,
    doc: 'A render URL must name a preset (`pr:NAME`) and may carry no other option but `exp`: any other segment is a 422 (`only_presets`).',
    read: (v) => boolean(v, false),
  }),
] as const;
