/**
 * A bench's command-line flags: `--name value`, `--name=value` and bare switches (`--quick`).
 * Every bench reads its flags through one {@link Flags}; unknown flags are ignored, so
 * `deno task bench --runs 1` can hand the same flags to every bench.
 */
export class Flags {
  constructor(readonly args: readonly string[] = Deno.args) {}

  /** The value of `--name value` or `--name=value`, if given. */
  value(name: string): string | undefined {
    const inline = this.args.find((a) => a.startsWith(`--${name}=`));
    if (inline !== undefined) return inline.slice(name.length + 3);
    const at = this.args.indexOf(`--${name}`);
    return at >= 0 && at + 1 < this.args.length ? this.args[at + 1] : undefined;
  }

  string(name: string, fallback: string): string {
    return this.value(name) ?? fallback;
  }

  /** A finite number; a value that is not one is refused rather than read as NaN. */
  number(name: string, fallback: number): number {
    const text = this.value(name);
    if (text === undefined) return fallback;
    const n = Number(text);
    if (text.trim() === "" || !Number.isFinite(n)) {
      throw new RangeError(`--${name} needs a number, got ${JSON.stringify(text)}`);
    }
    return n;
  }

  /** A comma-separated list. */
  list(name: string, fallback: string[]): string[] {
    const text = this.value(name);
    return text === undefined ? fallback : text.split(",").filter((s) => s !== "");
  }

  /** Whether the switch `--name` is given (`--name=false` says no). */
  has(name: string): boolean {
    return this.args.includes(`--${name}`) ||
      this.args.some((a) => a.startsWith(`--${name}=`) && a !== `--${name}=false`);
  }
}

/** This process's flags. */
export const flags: Flags = new Flags();
