// Proves, over generated keys, salts and raw paths, that a signature verifies iff nothing was
// tampered with: the signed (path, signature) pair and its padded spelling verify; any single-byte
// change to the path, and any signature spelling other than the two canonical ones, is refused.
// Witness: the tamper arbitrary is checked to actually change the path or signature it is given.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { sign, verifySignature } from '../../src/http/signature.js';

const bytes32 = fc.uint8Array({ minLength: 32, maxLength: 64 }).map((a) => Buffer.from(a));
const salt = fc.uint8Array({ minLength: 0, maxLength: 32 }).map((a) => Buffer.from(a));
// Raw path bytes as Node would hand them over: printable ASCII, including `%`, `/`, `:`.
const rest = fc
  .string({ unit: fc.constantFrom(...'abcXYZ019/%:._-~=+&?!'.split('')), maxLength: 60 })
  .map((s) => `/${s}`);

describe('signature properties', () => {
  it('a signed path verifies, unpadded and padded', () => {
    fc.assert(
      fc.property(bytes32, salt, rest, (key, s, path) => {
        const sig = sign(path, key, s);
        const config = { key, salt: s, allowInsecure: false };
        expect(verifySignature(sig, path, config).ok).toBe(true);
        expect(verifySignature(`${sig}=`, path, config).ok).toBe(true);
        expect(verifySignature(`${sig}==`, path, config).ok).toBe(false);
      }),
      { numRuns: 150 },
    );
  });

  it('any change to the path is refused', () => {
    fc.assert(
      fc.property(
        bytes32,
        salt,
        rest,
        fc.nat(),
        fc.integer({ min: 0x20, max: 0x7e }),
        fc.constantFrom('replace', 'insert', 'delete'),
        (key, s, path, at, code, how) => {
          const i = at % path.length;
          const c = String.fromCharCode(code);
          const tampered =
            how === 'replace'
              ? path.slice(0, i) + c + path.slice(i + 1)
              : how === 'insert'
                ? path.slice(0, i) + c + path.slice(i)
                : path.slice(0, i) + path.slice(i + 1);
          fc.pre(tampered !== path);
          const sig = sign(path, key, s);
          expect(verifySignature(sig, tampered, { key, salt: s, allowInsecure: true }).ok).toBe(
            false,
          );
        },
      ),
      { numRuns: 150 },
    );
  });

  it('any other spelling of the signature is refused', () => {
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=';
    fc.assert(
      fc.property(bytes32, salt, rest, fc.nat(), fc.nat(), (key, s, path, at, pick) => {
        const sig = sign(path, key, s);
        const i = at % sig.length;
        const c = alphabet[pick % alphabet.length]!;
        const mutated = sig.slice(0, i) + c + sig.slice(i + 1);
        fc.pre(mutated !== sig);
        expect(verifySignature(mutated, path, { key, salt: s, allowInsecure: false }).ok).toBe(
          false,
        );
      }),
      { numRuns: 250 },
    );
  });
});
