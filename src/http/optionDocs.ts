/**
 * The URL reference, generated: `renderOptionsDocs()` is docs/options.md, made from the grammar's
 * table (`optionTable.ts`) and the parser itself, as docs/configuration.md is made from the
 * config rows.
 *
 * ## Invariants
 * - **The document is exactly what this renders** (`test/optionsDocs.test.ts`); regenerate it
 *   with `npx tsx scripts/gen-options-docs.ts`.
 * - **Every example is run, not quoted.** Rendering parses each accepted example and prints the
 *   canonical string the parser returns, and parses each refusal and prints the parser's own
 *   message; an example the parser disagrees with throws, so the page cannot be generated wrong.
 * - **Every refusal reason is shown** (`OPTION_ERROR_REASONS`), each with an example.
 * - **The formatter leaves it unchanged** (tables padded as Biome pads them).
 */
import { markdownTable } from '../config/index.js';
import { MAX_DECIMAL_PLACES, VARIANT_KEYS } from '../core/variant.js';
import {
  type InvalidOptions,
  normalizeOptionsString,
  OPTION_ERROR_REASONS,
  type OptionErrorReason,
  type OptionGrammar,
  parseRoute,
} from './options.js';
import {
  INFO_SEGMENT,
  OPTION_EXAMPLE_PRESETS,
  OPTION_ROWS,
  type OptionRow,
  PRESET_KEY,
  SOURCE_MARKERS,
} from './optionTable.js';
import { compilePresets } from './presets.js';

/** Refusals no single key owns: the shape of a segment, and the route around the options. */
export const GENERAL_REFUSALS: readonly (readonly [string, OptionErrorReason])[] = [
  ['f:mp3//br:96', 'empty_segment'],
  ['f', 'missing_value'],
  ['xyz:1', 'unknown_key'],
  ['F:mp3', 'unknown_key'],
];
/** Under `AP_ONLY_PRESETS`, with the sample presets. */
export const ONLY_PRESETS_EXAMPLES = {
  accepted: ['pr:preview', 'pr:wave/exp:1900000000'],
  refused: [
    ['f:opus', 'only_presets'],
    ['pr:preview/br:96', 'only_presets'],
    ['', 'preset_required'],
    ['exp:1900000000', 'preset_required'],
  ],
} as const;
/** A whole rest of path, refused around the options. */
const INFO_REFUSAL = '/info/f:mp3/plain/local://a.wav';

/** What the examples are parsed with: the sample presets, open or exclusive. */
function grammars(): { open: OptionGrammar; only: OptionGrammar } {
  const open = compilePresets(OPTION_EXAMPLE_PRESETS, false);
  return { open, only: { presets: open.presets, onlyPresets: true } };
}

const code = (text: string) => (text === '' ? '(none)' : `\`${visible(text)}\``);
/** Control characters shown as `\uXXXX` escapes, so an example is printable. */
function visible(text: string): string {
  let out = '';
  for (const c of text) {
    const n = c.charCodeAt(0);
    out += n < 0x20 || n === 0x7f ? `\\u${n.toString(16).padStart(4, '0')}` : c;
  }
  return out;
}
const cell = (text: string) => text.replaceAll('|', '\\|').replaceAll('\n', ' ');
const table = (header: readonly string[], rows: readonly (readonly string[])[]) =>
  markdownTable(
    header,
    rows.map((r) => r.map(cell)),
  );

/** The canonical string of an example the parser must accept; throws if it refuses. */
function canonicalOf(example: string, grammar: OptionGrammar): string {
  const r = normalizeOptionsString(example, grammar);
  if (!r.ok)
    throw new Error(
      `option reference: example ${JSON.stringify(example)} is refused: ${r.message}`,
    );
  return r.normalized;
}

/** The refusal of an example the parser must refuse for `reason`; throws otherwise. */
function refusalOf(example: string, reason: string, grammar: OptionGrammar): InvalidOptions {
  const r = normalizeOptionsString(example, grammar);
  if (r.ok || r.reason !== reason) {
    const got = r.ok ? `accepted as ${r.normalized}` : `refused as ${r.reason}`;
    throw new Error(`option reference: ${JSON.stringify(example)} should be ${reason}, is ${got}`);
  }
  return r;
}

function keyed(row: OptionRow): string {
  if (row.kind === 'variant') return 'yes';
  return row.kind === 'request' ? 'no' : 'its expansion';
}

function optionSection(row: OptionRow, grammar: OptionGrammar): string[] {
  const accepted = row.examples.map((e) => [code(e), code(canonicalOf(e, grammar))]);
  const refused = row.refused.map(([e, reason]) => [
    code(e),
    `\`${reason}\``,
    refusalOf(e, reason, grammar).message,
  ]);
  return [
    '',
    `### \`${row.key}\`: ${row.title}`,
    '',
    row.doc,
    '',
    `- Values: ${row.values}.`,
    `- Default: ${row.default}.`,
    `- Canonical form: ${row.canonical}.`,
    '',
    ...table(['URL options', 'Canonical options string'], accepted),
    '',
    ...table(['Refused', 'Reason', 'Message (422)'], refused),
  ];
}

/** docs/options.md, generated from `OPTION_ROWS` and checked against the parser as it renders. */
export function renderOptionsDocs(): string {
  const { open, only } = grammars();
  const markers = SOURCE_MARKERS.map((m) => `\`${m}\``).join(' or ');
  const summary = OPTION_ROWS.map((r) => [`\`${r.key}\``, r.title, r.values, r.default, keyed(r)]);
  const lines: string[] = [
    '# URL options',
    '',
    '<!-- Generated from src/http/optionTable.ts by `npx tsx scripts/gen-options-docs.ts`; do not edit by hand.',
    '     test/optionsDocs.test.ts fails when this file and the option grammar disagree. -->',
    '',
    'A URL names a variant completely: its options are the whole API, and, normalised, half of the',
    'cache key. Every example below is parsed when this page is generated; the canonical strings and',
    'the refusal messages are what the parser returns.',
    '',
    '```',
    'GET /{signature}/{options}/{source}',
    'GET /{signature}/info/{source}',
    '```',
    '',
    'For example `/{signature}/f:opus/br:96/t:12.5:30/plain/s3://masters/piece.wav` is a 30-second',
    'Opus preview at 96 kbit/s starting 12.5 s in. [Errors](errors.md) lists every status;',
    '[configuration](configuration.md) every `AP_*` variable named here.',
    '',
    '## Signature',
    '',
    '- The first segment is `base64url(HMAC-SHA256(key, salt ‖ rest))`, where `rest` is the rest of the',
    '  path, its leading `/` included, exactly as sent: still percent-encoded, byte for byte, `//`',
    '  kept. The query string is neither signed nor read. The 43 unpadded characters verify, and so do',
    '  those 43 plus one `=`; no other spelling does.',
    '- The key and salt are `AP_KEY` and `AP_SALT`, hex. `audio-proxy sign <path>` prints a signed',
    '  path; in code, `sign(rest, key, salt)` with `loadConfig(process.env).key` and `.salt`.',
    '- Every failure (a tampered path, a wrong key, a malformed signature, no key configured) is the',
    '  same 401. With `AP_ALLOW_INSECURE` on, the literal signature `insecure` passes (development).',
    '',
    '### Key rotation',
    '',
    '`AP_KEY` and `AP_SALT` may each list several comma-separated values, paired by position',
    "(imgproxy's model). The first pair signs: `audio-proxy sign`, `loadConfig().key` and `.salt`,",
    "and a cluster node's forwarding hops. Every pair verifies: a URL signed with any of them is",
    'served. Each pair is checked, with a constant-time comparison and no early exit, so the time a',
    'verification takes depends on how many pairs are configured and never on which one matched.',
    'A single value behaves exactly as before; unequal counts stop the boot.',
    '',
    'To rotate: (1) append the new pair on every node, so it verifies before anything signs with it;',
    '(2) move it first, so it signs while the old pair still verifies the URLs already handed out;',
    '(3) remove the old pair once those URLs (and their `exp`) no longer matter. In a cluster, finish',
    'each step on every node before the next: a node signs its hops with its first pair, which its',
    'peers must already accept.',
    '',
    '## Options',
    '',
    `Zero or more \`/\`-separated \`key:value\` segments between the signature and the source:`,
    '',
    '- A segment splits at its first `:`. Keys are case-sensitive, spelled as below.',
    '- A key appears at most once; segment order never matters.',
    '- An empty segment (`//`), a segment without a value, or an unknown key is refused.',
    '- Integers are digits only and start at 1 unless stated. Decimals are plain notation with at',
    `  most ${MAX_DECIMAL_PLACES} places (\`12.5\`, \`-3\`); exponents, signs like \`+3\` and more places are refused, never`,
    '  rounded. `-0` is 0.',
    '- Every refusal is a 422 `{"error":"invalid_options","message":…}` whose message names the',
    '  segment in its canonical spelling.',
    '',
    ...table(['Key', 'Option', 'Values', 'Default', 'In the cache key'], summary),
  ];
  for (const row of OPTION_ROWS) lines.push(...optionSection(row, open));

  const presetRows = OPTION_EXAMPLE_PRESETS.map((p) => [`\`${p.name}\``, code(p.options)]);
  lines.push(
    '',
    '## Presets',
    '',
    'A preset is an option string stored under a name in `AP_PRESETS`, which a URL names with',
    `\`${PRESET_KEY}:NAME\` (several: \`${PRESET_KEY}:A:B\`). The examples on this page use these presets:`,
    '',
    '```sh',
    `AP_PRESETS=${OPTION_EXAMPLE_PRESETS.map((p) => `${p.name}=${p.options}`).join(',')}`,
    '```',
    '',
    ...table(['Name', 'Options'], presetRows),
    '',
    '- Each preset must be a valid option string on its own, without `pr` (presets do not nest) or',
    '  `exp` (an expiry belongs to one URL). A bad one stops the boot, naming `AP_PRESETS`.',
    '- Presets apply in the order named; a later one wins a key both set. A key the URL spells itself',
    '  wins over every preset, wherever it stands.',
    '- The cache key is the expansion: a preset URL and the same options spelled out are one variant.',
    '  Redefining a preset moves its URLs to the new variant; nothing stale is served under the name.',
    '  To compute an ETag without asking, a client needs the preset definitions.',
    '',
    '### Only presets',
    '',
    'With `AP_ONLY_PRESETS` on, a render URL must name a preset and may carry no variant option of',
    'its own; `exp` is still accepted (it is not part of the variant), and `/info` is unaffected.',
    '',
    ...table(
      ['URL options', 'Canonical options string'],
      ONLY_PRESETS_EXAMPLES.accepted.map((e) => [code(e), code(canonicalOf(e, only))]),
    ),
    '',
    ...table(
      ['Refused', 'Reason', 'Message (422)'],
      ONLY_PRESETS_EXAMPLES.refused.map(([e, reason]) => [
        code(e),
        `\`${reason}\``,
        refusalOf(e, reason, only).message,
      ]),
    ),
  );

  const info = parseRoute(INFO_REFUSAL);
  if (info.ok || info.error !== 'invalid_options' || info.reason !== 'info_with_options') {
    throw new Error('option reference: the info refusal example is not refused as documented');
  }
  lines.push(
    '',
    '## Source',
    '',
    `The source starts at the first segment exactly equal to ${markers}; a path with neither is a 404`,
    '(nothing servable was named), not a 422. `plain` and `enc` spellings of one source are one',
    'identity.',
    '',
    '- `plain/SOURCE`: the source as text, percent-decoded once: `plain/local://music/a%20b.flac`,',
    '  `plain/s3://bucket/key.wav`, `plain/https://host/path.mp3` (HTTPS hosts need',
    '  `AP_SOURCE_ALLOWLIST`; `http://` is refused). A malformed escape is a 404.',
    '- `enc/BASE64URL`: the same text, base64url-encoded (padding optional), for sources awkward to',
    '  escape.',
    '- `local://PATH` is relative to `AP_LOCAL_ROOT`, confined to it; the root is not part of the',
    '  identity.',
    '',
    `\`/{signature}/${INFO_SEGMENT}/{source}\` answers the source's probe as JSON. \`${INFO_SEGMENT}\` must be the only options`,
    `segment: \`${INFO_REFUSAL}\` is refused (\`info_with_options\`: ${info.message}).`,
    '',
    '## The canonical options string and the cache key',
    '',
    'The options normalise into one string, the first half of the cache key:',
    '',
    `- Variant keys only, sorted: ${VARIANT_KEYS.map((k) => `\`${k}\``).join(', ')}. \`exp\` and \`pr\` never appear`,
    '  (a preset contributes its expansion).',
    '- Defaults are materialised: `f` always; `ch`, `pts` and `pk_fmt` under `f:peaks`; all three',
    '  `norm` targets.',
    `- Numbers are minimal: \`30\` not \`30.0\`, \`12.5\` not \`12.50\`, \`0\` not \`-0\`, at most ${MAX_DECIMAL_PLACES} places.`,
    '- `t` is `t:S` or `t:S:D`, `fade` is always `fade:IN:OUT`, `norm` is `norm:ebu:I:TP:LRA`.',
    '- `dl` and `cb` are kept byte for byte, still percent-encoded.',
    '- No-ops are not collapsed: `t:0`, `gain:0` and no options at all are three variants.',
    '',
    'The cache key is `lowercase-hex(SHA-256(canonical options ‖ "\\n" ‖ canonical source))`, and the',
    "render's ETag is that key in double quotes, so it can be computed from the URL alone.",
    '',
    '## Every refusal',
    '',
    'Each reason the grammar refuses a segment for, with an example and the message it gets:',
    '',
  );
  const examples = new Map<string, readonly [string, string]>();
  const seen = [
    ...GENERAL_REFUSALS.map(([e, r]) => [e, r, open] as const),
    ...OPTION_ROWS.flatMap((row) => row.refused.map(([e, r]) => [e, r, open] as const)),
    ...ONLY_PRESETS_EXAMPLES.refused.map(([e, r]) => [e, r, only] as const),
  ];
  for (const [e, reason, grammar] of seen) {
    if (!examples.has(reason))
      examples.set(reason, [code(e), refusalOf(e, reason, grammar).message]);
  }
  examples.set('info_with_options', [code(INFO_REFUSAL), info.message]);
  const missing = OPTION_ERROR_REASONS.filter((r) => !examples.has(r));
  if (missing.length > 0) throw new Error(`option reference: no example of ${missing.join(', ')}`);
  lines.push(
    ...table(
      ['Reason', 'Example', 'Message'],
      OPTION_ERROR_REASONS.map((r) => [`\`${r}\``, ...examples.get(r)!]),
    ),
    '',
  );
  return lines.join('\n');
}
