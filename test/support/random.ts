/** The tests' one deterministic pseudo-random generator (xoshiro128**; not for cryptography). */

/** A seeded generator of incompressible-looking bytes, floats and small integers: same seed, same sequence. */
export class SeededRandom {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;

  constructor(seed: number) {
    // splitmix32 expands the seed so nearby seeds give unrelated streams.
    let x = seed >>> 0;
    const next = () => {
      x = (x + 0x9e3779b9) >>> 0;
      let z = x;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.s0 = next();
    this.s1 = next();
    this.s2 = next();
    this.s3 = next() | 1;
  }

  /** The next 32-bit unsigned value. */
  nextU32(): number {
    const result = Math.imul(rotl(Math.imul(this.s1, 5), 7), 9) >>> 0;
    const t = this.s1 << 9;
    this.s2 ^= this.s0;
    this.s3 ^= this.s1;
    this.s1 ^= this.s2;
    this.s0 ^= this.s3;
    this.s2 ^= t;
    this.s3 = rotl(this.s3, 11);
    return result;
  }

  /** A float in [0, 1). */
  float(): number {
    return this.nextU32() / 4294967296;
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return this.nextU32() % n;
  }

  /** `n` fresh random bytes. */
  bytes(n: number): Uint8Array<ArrayBuffer> {
    const words = new Uint32Array(Math.ceil(n / 4));
    for (let i = 0; i < words.length; i++) words[i] = this.nextU32();
    return new Uint8Array(words.buffer, 0, n);
  }

  /** A line of `words` pseudo-words (lowercase letters), for compressible text. */
  words(count: number): string {
    const out: string[] = [];
    for (let i = 0; i < count; i++) out.push(WORDS[this.int(WORDS.length)]);
    return out.join(" ");
  }
}

const WORDS = [
  "alpha",
  "bravo",
  "charlie",
  "delta",
  "echo",
  "foxtrot",
  "golf",
  "hotel",
  "india",
  "juliet",
  "kilo",
  "lima",
  "mike",
  "november",
  "oscar",
  "papa",
  "quebec",
  "romeo",
  "sierra",
  "tango",
  "uniform",
  "victor",
  "whiskey",
  "xray",
  "yankee",
  "zulu",
  "pack",
  "tree",
  "blob",
  "commit",
];

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}
