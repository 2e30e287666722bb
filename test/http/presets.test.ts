// Named presets (#16 item 6): a preset is a stored option string (`AP_PRESETS`) a signed URL
// names with `pr:NAME[:NAME…]`. Proves, over generated option sets, that a preset URL and its
// expansion (each key from the URL if it spells it, else from the last preset naming it)
// normalise to the same canonical string, and so share a cache key, whatever the segment order;
// that an unknown or repeated preset is a 422; that `AP_ONLY_PRESETS` refuses every variant
// option a URL spells itself and requires a preset (`exp` and `/info` still pass); and that a
// preset the grammar refuses stops the boot with a ConfigError naming AP_PRESETS.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/index.js';
import { cacheKey } from '../../src/http/cacheKey.js';
import { ANSWERED } from '../../src/http/exchange.js';
import {
  NO_PRESETS,
  normalizeOptionsString,
  type OptionGrammar,
  parseOptions,
  parseRoute,
} from '../../src/http/options.js';
import { compilePresets, optionGrammarOf } from '../../src/http/presets.js';
import { joinCredential } from '../../src/http/roomAccess.js';
import { optionsStage, type ParsedRoute } from '../../src/http/stages/options.js';
import { createAudioProxy } from '../../src/proxy.js';
import { contextOf, exchange } from './stages/harness.js';

/** A few spellings per key, valid alone, with noise that must normalise away. */
const POOL: Record<string, readonly string[]> = {
  f: ['mp3', 'opus', 'flac', 'wav', 'peaks'],
  br: ['96', '0128'],
  q: ['2', '5.50', '0.1'],
  sr: ['44100', '048000', '96000'],
  ch: ['1', '2'],
  bd: ['16', '24', '32f'],
  t: ['0', '30', '12.5:30', '0:1.000'],
  fade: ['0', '2', '0.5:0.25'],
  gain: ['-3', '6.00', '-0'],
  norm: ['ebu', 'ebu:-14', 'ebu:-23:-2:7'],
  enhance: ['voice'],
  pts: ['400', '0800'],
  pk_fmt: ['json', 'dat'],
  dl: ['a%20b.mp3'],
  cb: ['v1', 'v2'],
};
const KEYS = Object.keys(POOL);

/** A set of distinct keys with a value each: what one preset, or one URL, spells. */
const part = (maxKeys: number) =>
  fc
    .uniqueArray(fc.constantFrom(...KEYS), { maxLength: maxKeys })
    .chain((keys) =>
      fc.tuple(...keys.map((k) => fc.constantFrom(...POOL[k]!).map((v) => [k, v] as const))),
    )
    .map((pairs) => new Map<string, string>(pairs));

const segmentsOf = (m: ReadonlyMap<string, string>) => [...m].map(([k, v]) => `${k}:${v}`);

function grammarOf(presets: Record<string, ReadonlyMap<string, string>>): OptionGrammar {
  return {
    presets: new Map(Object.entries(presets).map(([name, m]) => [name, segmentsOf(m)])),
    onlyPresets: false,
  };
}

describe('a preset URL is its expansion', () => {
  it('normalises like the options spelled out: the URL wins, then the later preset', () => {
    let accepted = 0;
    fc.assert(
      fc.property(
        part(4),
        part(4),
        part(3),
        fc.option(fc.integer({ min: 1, max: 2 ** 31 }), { nil: undefined }),
        fc.func(fc.integer()),
        (a, b, own, exp, order) => {
          const grammar = grammarOf({ a, b });
          const url = ['pr:a:b', ...segmentsOf(own), ...(exp ? [`exp:${exp}`] : [])];
          const shuffled = [...url].sort((x, y) => order(x) - order(y));
          const expansion = new Map([...a, ...b, ...own]);
          const viaPreset = normalizeOptionsString(shuffled, grammar);
          const spelled = normalizeOptionsString(segmentsOf(expansion));
          expect(viaPreset.ok).toBe(spelled.ok);
          if (viaPreset.ok && spelled.ok) {
            accepted++;
            expect(viaPreset.normalized).toBe(spelled.normalized);
            expect(viaPreset.normalized).not.toContain('pr:');
          }
        },
      ),
      { numRuns: 600 },
    );
    expect(accepted).toBeGreaterThan(100); // not vacuous
  });

  it('shares the spelled-out URL’s cache key, and the request option still stays out', () => {
    const grammar = compilePresets(
      [{ name: 'preview', options: 'f:mp3/br:64/t:0:30/fade:0:2' }],
      false,
    );
    const a = parseRoute('/pr:preview/exp:1900000000/plain/local://a.wav', grammar);
    const b = parseRoute('/t:0:30/fade:0:2/br:64/plain/local://a.wav');
    if (!a.ok || !b.ok || a.endpoint !== 'render' || b.endpoint !== 'render') throw new Error();
    expect(a.normalized).toBe('br:64/f:mp3/fade:0:2/t:0:30');
    expect(cacheKey(a.normalized, 'local://a.wav')).toBe(cacheKey(b.normalized, 'local://a.wav'));
    expect(a.request).toEqual({ exp: 1_900_000_000 });
  });
});

describe('refusals', () => {
  const grammar = compilePresets(
    [
      { name: 'preview', options: 'f:mp3/br:64' },
      { name: 'voice', options: 'enhance:voice' },
    ],
    false,
  );
  const refused = (input: string, g: OptionGrammar = grammar) => {
    const r = parseOptions(input, g);
    if (r.ok) throw new Error(`expected ${input} to be refused`);
    return { reason: r.reason, segment: r.segment, message: r.message };
  };

  it.each([
    ['pr:nope', 'unknown_preset', 'pr:nope', '"pr:nope" names no preset "nope"'],
    ['pr:preview:nope', 'unknown_preset', 'pr:preview:nope', 'no preset "nope"'],
    ['pr:', 'unknown_preset', 'pr:', 'no preset ""'],
    ['pr:voice:voice', 'duplicate_preset', 'pr:voice:voice', 'more than once'],
    ['pr:preview/pr:voice', 'duplicate_key', 'pr:voice', 'more than once'],
    ['pr:preview/br:96/br:64', 'duplicate_key', 'br:64', 'more than once'],
    ['pr:preview/q:2', 'mutually_exclusive', 'q:2', 'conflicts with "br:64"'],
  ])('%s → %s naming %j', (input, reason, segment, message) => {
    const r = refused(input);
    expect(r).toMatchObject({ reason, segment });
    expect(r.message).toContain(message);
  });

  it('without presets configured, pr: is an unknown preset (a 422 as before)', () => {
    expect(refused('pr:preview', NO_PRESETS).reason).toBe('unknown_preset');
  });

  it('the options stage answers an unknown preset with 422 invalid_options', async () => {
    const ctx = contextOf({ AP_PRESETS: 'preview=f:mp3/br:64' });
    const r = await exchange((x) => optionsStage(x, '/pr:nope/plain/local://a.wav', ctx));
    expect(r.status).toBe(422);
    expect(r.result).toBe(ANSWERED);
    expect(JSON.parse(r.body)).toEqual({
      error: 'invalid_options',
      message: '"pr:nope" names no preset "nope"',
    });
    const ok = await exchange((x) => optionsStage(x, '/pr:preview/plain/local://a.wav', ctx));
    expect((ok.result as ParsedRoute).endpoint).toBe('render');
  });
});

describe('AP_ONLY_PRESETS', () => {
  const ctx = contextOf({
    AP_PRESETS: 'preview=f:mp3/br:64/t:0:30,wave=f:peaks,loud=gain:6',
    AP_ONLY_PRESETS: '1',
  });
  const stage = (rest: string) => exchange((x) => optionsStage(x, rest, ctx));

  it('serves a preset URL, with or without exp, and the info endpoint', async () => {
    for (const rest of [
      '/pr:preview/plain/local://a.wav',
      '/exp:1900000000/pr:wave/plain/local://a.wav',
      '/pr:preview:loud/plain/local://a.wav',
      '/info/plain/local://a.wav',
    ]) {
      const r = await stage(rest);
      expect(r.result, rest).not.toBe(ANSWERED);
    }
  });

  it.each([
    [
      '/f:opus/plain/local://a.wav',
      '"f:opus" is refused: only presets (pr:NAME) and exp may be given',
    ],
    ['/pr:preview/br:96/plain/local://a.wav', '"br:96" is refused'],
    ['/plain/local://a.wav', 'a preset is required (pr:NAME)'],
    ['/exp:1900000000/plain/local://a.wav', 'a preset is required (pr:NAME)'],
    ['/pr:nope/plain/local://a.wav', 'names no preset "nope"'],
  ])('%s is a 422', async (rest, message) => {
    const r = await stage(rest);
    expect(r.status).toBe(422);
    expect(JSON.parse(r.body).error).toBe('invalid_options');
    expect(JSON.parse(r.body).message).toContain(message);
  });

  it('a waiting-room join with a preset path is judged by the same grammar', () => {
    const grammar = optionGrammarOf(ctx.config);
    const join = (rest: string) =>
      `/api/v1/queue/join?path=${encodeURIComponent(`/insecure${rest}`)}`;
    const signing = { key: undefined, salt: undefined, allowInsecure: true };
    expect(joinCredential(join('/pr:preview/plain/local://a.wav'), signing, 1, grammar)).toEqual({
      ok: true,
    });
    expect(joinCredential(join('/f:opus/plain/local://a.wav'), signing, 1, grammar).ok).toBe(false);
  });
});

describe('presets are checked against the grammar at boot', () => {
  it('every bad preset is one problem of one ConfigError naming AP_PRESETS', () => {
    let error: unknown;
    try {
      compilePresets(
        [
          { name: 'ok', options: 'f:opus/br:96' },
          { name: 'typo', options: 'f:opus/brr:96' },
          { name: 'alone', options: 'pts:400' },
          { name: 'nested', options: 'pr:ok' },
          { name: 'expiring', options: 'f:opus/exp:1900000000' },
          { name: 'clash', options: 'br:96/q:2' },
        ],
        false,
      );
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems;
    expect(problems.map((p) => p.variable)).toEqual(Array(5).fill('AP_PRESETS'));
    expect(problems.map((p) => p.message)).toEqual([
      'AP_PRESETS: the preset "typo" is not a valid option string: unknown option "brr:96"',
      'AP_PRESETS: the preset "alone" is not a valid option string: "pts:400" requires f:peaks',
      'AP_PRESETS: the preset "nested" is not a valid option string: "pr:ok": presets do not nest',
      'AP_PRESETS: the preset "expiring" is not a valid option string: "exp:1900000000" belongs to one URL, not to a stored preset',
      'AP_PRESETS: the preset "clash" is not a valid option string: "q:2" conflicts with "br:96"',
    ]);
  });

  it('createAudioProxy refuses a bad preset before building anything', async () => {
    const config = loadConfig({ AP_PRESETS: 'typo=f:opus/brr:96' });
    await expect(createAudioProxy({ config })).rejects.toThrow(ConfigError);
  });

  it('is built once per definition list', () => {
    const config = loadConfig({ AP_PRESETS: 'a=f:opus' });
    expect(optionGrammarOf(config)).toBe(optionGrammarOf(config));
    expect(optionGrammarOf(loadConfig({}))).toBe(NO_PRESETS);
  });
});
