/**
 * A deadline for every test. The test task (`.ci/test.ts`) preloads this module (`deno test
 * --preload test/support/test_deadline.ts`): each `Deno.test` (also `.ignore`, `.only`) that sets
 * no `timeout` of its own gets {@link DEFAULT_TEST_TIMEOUT_MS}, or {@link TEST_TIMEOUT_ENV}, so a
 * test that hangs, or spins, fails by name ("Test timed out after … ms") and the run goes on,
 * instead of holding the suite until CI gives up. `withinDeadline` (deadline.ts) still bounds
 * single waits with a clearer message; this is the net under every test. A test that needs longer
 * sets its own `timeout`.
 */

/** The default per-test deadline: far above any test's time on a loaded 2-core machine. */
export const DEFAULT_TEST_TIMEOUT_MS = 10 * 60_000;

/** The variable that changes it (milliseconds), e.g. for a slower machine. */
export const TEST_TIMEOUT_ENV = "GITEDGE_TEST_TIMEOUT_MS";

/** `raw` (the variable's value, if set) as a deadline in milliseconds. */
export function testTimeoutMs(raw: string | undefined): number {
  if (raw === undefined || raw === "") return DEFAULT_TEST_TIMEOUT_MS;
  const ms = Number(raw);
  if (!Number.isSafeInteger(ms) || ms <= 0) {
    throw new RangeError(
      `${TEST_TIMEOUT_ENV} must be a positive whole number of milliseconds, got ${
        JSON.stringify(raw)
      }`,
    );
  }
  return ms;
}

type TestFn = Deno.TestDefinition["fn"];
type TestOptions = Omit<Deno.TestDefinition, "fn">;

/** The one definition any of `Deno.test`'s call forms stands for. */
export function testDefinition(args: unknown[]): Deno.TestDefinition {
  const [a, b, c] = args;
  if (typeof a === "string") {
    return typeof b === "function"
      ? { name: a, fn: b as TestFn }
      : { ...(b as Partial<TestOptions>), name: a, fn: c as TestFn };
  }
  if (typeof a === "function") return { name: a.name, fn: a as TestFn };
  if (typeof b === "function") {
    const options = a as Partial<TestOptions>;
    return { ...options, name: options.name ?? b.name, fn: b as TestFn };
  }
  return a as Deno.TestDefinition;
}

/** `definition` with the default deadline unless it has its own. */
export function withTestDeadline(
  definition: Deno.TestDefinition,
  ms: number,
): Deno.TestDefinition {
  return definition.timeout === undefined ? { ...definition, timeout: ms } : definition;
}

/**
 * `(register, prepare) => (...args) => register(prepare(args))`, from a `data:` module: Deno gives a
 * test the location of the first `file:` frame on the stack when it is registered, so the
 * wrapper's own frame must not be one, or every test would be reported at this file's line.
 */
type Trampoline = (
  register: (definition: Deno.TestDefinition) => void,
  prepare: (args: unknown[]) => Deno.TestDefinition,
) => (...args: unknown[]) => void;
const TRAMPOLINE = "export default (register, prepare) => (...args) => register(prepare(args));";

/** Replaces `Deno.test` (and `.ignore`, `.only`) with versions that add the deadline. */
async function install(ms: number): Promise<void> {
  const module = await import(`data:text/javascript,${encodeURIComponent(TRAMPOLINE)}`);
  const trampoline = module.default as Trampoline;
  const register = Deno.test as (definition: Deno.TestDefinition) => void;
  const prepare = (args: unknown[]) => withTestDeadline(testDefinition(args), ms);
  const test = trampoline(register, prepare);
  const variants = {
    ignore: trampoline(register, (args) => ({ ...prepare(args), ignore: true })),
    only: trampoline(register, (args) => ({ ...prepare(args), only: true })),
  };
  // The hooks, `sanitizer` and `each` stay Deno's own.
  for (const key of Object.getOwnPropertyNames(Deno.test)) {
    if (key in test || key in variants) continue;
    Object.defineProperty(test, key, Object.getOwnPropertyDescriptor(Deno.test, key)!);
  }
  Object.assign(test, variants);
  Object.defineProperty(Deno, "test", { value: test });
}

function readEnv(): string | undefined {
  const state = Deno.permissions.querySync({ name: "env", variable: TEST_TIMEOUT_ENV }).state;
  return state === "granted" ? Deno.env.get(TEST_TIMEOUT_ENV) : undefined;
}

// Evaluated once per test module's worker, whether preloaded or imported.
await install(testTimeoutMs(readEnv()));
