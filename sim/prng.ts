/**
 * The simulator's one source of chance: a seeded xorshift32 generator.
 *
 * Every choice a simulated run makes (when a client arrives, which key it asks for, how long an
 * encoder takes per chunk, which fault strikes where, which of two timers due at the same
 * instant runs first) is drawn from one `Prng` seeded by the run's seed, in the order the run
 * asks. Nothing else is random: no `Math.random`, no wall clock. So a seed is a complete
 * description of a run, and the same seed replays it bit for bit.
 *
 * Why xorshift32 (Marsaglia 2003) rather than fast-check's generators: it is five lines, has no
 * dependency, is fast enough to be invisible next to an actor step, and its whole state is one
 * 32-bit word, so a reader can follow it by hand. Its weaknesses (it fails some statistical
 * test batteries) do not matter for choosing interleavings. A zero state would stay zero, so
 * the seed is mixed (splitmix-style) into a non-zero state first.
 */
export class Prng {
  #s: number;

  constructor(seed: number) {
    // Mix the seed so that neighbouring seeds start far apart; never a zero state.
    let z = (seed | 0) + 0x9e3779b9;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    z ^= z >>> 16;
    this.#s = z === 0 ? 0x6d2b79f5 : z | 0;
  }

  /** The next 32-bit unsigned value. */
  next(): number {
    let x = this.#s;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.#s = x | 0;
    return x >>> 0;
  }

  /** An integer in `min..max`, both included. */
  int(min: number, max: number): number {
    return min + (this.next() % (max - min + 1));
  }

  /** True with probability `p`. */
  chance(p: number): boolean {
    return this.next() / 0x1_0000_0000 < p;
  }

  /** One element of a non-empty list. */
  pick<T>(items: readonly T[]): T {
    return items[this.next() % items.length] as T;
  }
}
