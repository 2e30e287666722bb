/**
 * What a node accepts from the purge channel (`cluster/purge.ts`): only JSON naming another node
 * and a well-formed variant key. Everything else published there is dropped unread, so nothing
 * from Redis reaches a store's delete as a path. The broadcast itself is proven through HTTP in
 * test/integration/purge.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { purgeMessageKey } from '../../src/cluster/purge.js';

const KEY = 'ab'.repeat(32);

describe('purgeMessageKey', () => {
  it("takes another node's well-formed key", () => {
    expect(purgeMessageKey(JSON.stringify({ from: 'node-b', key: KEY }), 'node-a')).toBe(KEY);
  });

  it('drops its own messages and everything malformed', () => {
    const refused = [
      JSON.stringify({ from: 'node-a', key: KEY }), // its own: it purged before publishing
      JSON.stringify({ from: 'node-b', key: '../../etc/passwd' }),
      JSON.stringify({ from: 'node-b', key: 'a/b' }),
      JSON.stringify({ from: 'node-b', key: '' }),
      JSON.stringify({ from: 'node-b', key: 'x'.repeat(201) }),
      JSON.stringify({ from: 'node-b', key: 42 }),
      JSON.stringify({ from: 7, key: KEY }),
      JSON.stringify({ key: KEY }),
      JSON.stringify([KEY]),
      JSON.stringify(KEY),
      'null',
      'not json',
      '',
    ];
    for (const message of refused) {
      expect({ message, key: purgeMessageKey(message, 'node-a') }).toEqual({
        message,
        key: undefined,
      });
    }
  });
});
