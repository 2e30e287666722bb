/**
 * One chart's path-generated suite: every planned walk is a test that replays it on a live actor
 * and checks where it ends (and, for a transition walk, what its last step fired); the last test
 * checks that the walks together visited every state and transition of the chart, except those
 * in the chart's `UNREACHABLE` list, each of which must still be unvisited.
 */
import { describe, expect, it } from 'vitest';
import { MODELS, UNREACHABLE } from './models.js';
import { cover, plan, universe, type WalkResult, walk } from './walk.js';

export function chartSuite(name: string): void {
  const models = MODELS[name];
  if (!models) throw new Error(`no graph model for ${name}`);
  const allowed = UNREACHABLE[name] ?? {};
  const fired = new Set<string>();
  const states = new Set<string>();
  let walked = 0;
  let planned = 0;
  const record = (result: WalkResult) => {
    walked++;
    for (const k of result.fired) fired.add(k);
    for (const s of result.states) states.add(s);
  };

  describe(`${name}: paths generated from the chart`, () => {
    for (const model of models) {
      const p = plan(model);
      planned += p.walks.length;
      describe(model.variant, () => {
        it('plans a walk for every transition the exploration found', () => {
          const found = new Set([...p.initFires, ...p.edges.flatMap((e) => e.fired)]);
          const chosen = new Set([...p.initFires, ...p.walks.flatMap((w) => w.lastFires ?? [])]);
          expect(found.size).toBeGreaterThan(0);
          expect([...found].filter((k) => !chosen.has(k))).toEqual([]);
        });
        for (const w of p.walks) {
          it(`${w.kind}: ${w.description}`, async () => {
            const result = await walk(model, w.events);
            record(result);
            expect(result.reached).toBe(w.expected);
            if (w.lastFires) expect(result.lastFired).toEqual(w.lastFires);
          });
        }
      });
    }

    it('the walks visit every state and every transition of the chart', async () => {
      if (walked < planned) {
        // Some walk tests were filtered out (e.g. `-t`): walk everything here instead.
        await cover(models, (_m, _w, result) => record(result));
      }
      const chart = universe(models[0]!.machine);
      for (const key of Object.keys(allowed)) {
        expect(
          chart.transitions.map((t) => t.key),
          `allow-listed ${key} exists`,
        ).toContain(key);
        expect(fired.has(key), `allow-listed ${key} is really never taken`).toBe(false);
      }
      expect(chart.states.filter((s) => !states.has(s))).toEqual([]);
      const missing = chart.transitions.map((t) => t.key).filter((k) => !fired.has(k));
      expect(missing.filter((k) => !(k in allowed))).toEqual([]);
      expect(chart.transitions.length).toBeGreaterThan(0);
    });
  });
}
