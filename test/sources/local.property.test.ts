// Proves, over generated source strings built from a vocabulary of real names, links that escape,
// `..`, `.`, empty segments and percent-encodings of all of them, decoded exactly as a `plain/`
// URL would be, that resolveLocal never returns a path outside the root: every accepted path is
// its own realpath and lies strictly under the real root; and that whatever resolves is also
// authorised. Witness: some generated paths do resolve, and some reach a link that escapes.
import { realpathSync } from 'node:fs';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authorizeLocal, resolveLocal } from '../../src/sources/local.js';
import { parseSource } from '../../src/sources/parse.js';
import { buildLocalTree, type LocalTree } from './localTree.js';

let tree: LocalTree;
beforeAll(() => {
  tree = buildLocalTree();
});
afterAll(() => tree.cleanup());

const NAMES = [
  'previews',
  'track.wav',
  'alias.wav',
  'absolute.wav',
  'escape.wav',
  'elsewhere',
  'secret.wav',
  'outside',
  'root',
  'dirlink',
  'up.wav',
  'zigzag.wav',
  'parent',
  'grandparent',
  'roundabout.wav',
  'passwd',
  'ping',
  'ok0',
  'bad0',
  'big.wav',
  'beside.wav',
  'sub',
  '..',
  '.',
  '',
];

/** A component, sometimes percent-encoded (wholly or per character). */
const component = fc
  .tuple(fc.constantFrom(...NAMES), fc.constantFrom('raw', 'all', 'dots'))
  .map(([name, how]) => {
    if (how === 'raw') return name;
    if (how === 'dots') return name.replace(/\./g, '%2E');
    return [...name].map((c) => `%${c.charCodeAt(0).toString(16).padStart(2, '0')}`).join('');
  });
const separator = fc.constantFrom('/', '/', '/', '%2F', '%2f', '//');
const anyPath = fc
  .array(fc.tuple(component, separator), { minLength: 1, maxLength: 8 })
  .map((parts) => parts.map(([c, s], i) => (i === parts.length - 1 ? c : c + s)).join(''));
/** Paths near the real files (and the links out), spelled noisily, so the property bites. */
const nearPath = fc
  .tuple(
    fc.constantFrom(
      'previews/track.wav',
      'alias.wav',
      'previews/up.wav',
      'previews/zigzag.wav',
      'ok0',
      'big.wav',
      'dirlink/track.wav',
      'previews/parent/alias.wav',
      'escape.wav',
      'elsewhere/secret.wav',
      'absolute.wav',
      'previews/grandparent/outside/secret.wav',
    ),
    fc.constantFrom('', './', '/', 'previews/../', 'previews/sub/../../', '../root/'),
    fc.constantFrom('none', 'dots', 'slashes'),
  )
  .map(([target, noise, how]) => {
    const path = noise + target;
    if (how === 'dots') return path.replace(/\./g, '%2e');
    if (how === 'slashes') return path.replace(/\//g, '%2F');
    return path;
  });
const rawPath = fc.oneof({ weight: 1, arbitrary: anyPath }, { weight: 1, arbitrary: nearPath });

describe('local confinement property', () => {
  it('nothing outside the root is ever returned', async () => {
    let resolved = 0;
    let escapesTried = 0;
    await fc.assert(
      fc.asyncProperty(rawPath, async (raw) => {
        const parsed = parseSource(`plain/local://${raw}`);
        if (!parsed.ok || parsed.source.scheme !== 'local') return;
        const rel = parsed.source.path;
        if (/escape|elsewhere|grandparent|roundabout|passwd|\.\./.test(rel)) escapesTried += 1;
        const r = await resolveLocal(tree.root, rel);
        if (!r.ok) return;
        resolved += 1;
        expect(realpathSync(r.path)).toBe(r.path);
        expect(r.path.startsWith(`${tree.realRoot}/`)).toBe(true);
        expect(r.path.startsWith(tree.outside)).toBe(false);
        expect(await authorizeLocal(tree.root, rel)).toEqual({ ok: true });
      }),
      { numRuns: 250 },
    );
    expect(resolved).toBeGreaterThan(10);
    expect(escapesTried).toBeGreaterThan(10);
  });
});
