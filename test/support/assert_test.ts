import {
  assert,
  assertEquals,
  AssertionError,
  assertMatch,
  assertRejects,
  assertThrows,
} from "./assert.ts";

class CodeError extends Error {
  constructor(readonly code: string) {
    super(`failed with ${code}`);
  }
}

/** Runs `fn`, which must fail as an assertion does. */
function mustFail(fn: () => unknown): void {
  let caught: unknown;
  try {
    fn();
  } catch (error) {
    caught = error;
  }
  if (!(caught instanceof AssertionError)) throw new Error(`no AssertionError: ${caught}`);
}

Deno.test("assert and assertMatch pass and fail as they should", () => {
  assert(1);
  mustFail(() => assert(0, "zero"));
  assertMatch("abc", /b/);
  mustFail(() => assertMatch("abc", /d/));
});

Deno.test("assertEquals compares deeply and strictly", () => {
  assertEquals({ a: [1, 2], b: new Uint8Array([3]) }, { a: [1, 2], b: new Uint8Array([3]) });
  mustFail(() => assertEquals(new Uint8Array([1, 2]), new Uint8Array([1, 3])));
  mustFail(() => assertEquals<unknown>({ a: undefined }, {}));
  mustFail(() => assertEquals<unknown>(1, "1"));
});

Deno.test("assertThrows returns the error and checks class and message", () => {
  const e = assertThrows(
    () => {
      throw new CodeError("x");
    },
    CodeError,
    /with x/,
  );
  assertEquals(e.code, "x");
  assertThrows(
    () => {
      throw new CodeError("y");
    },
    Error,
    "with y",
  );
  mustFail(() => assertThrows(() => {}));
  mustFail(() =>
    assertThrows(() => {
      throw new Error("plain");
    }, CodeError)
  );
  mustFail(() =>
    assertThrows(
      () => {
        throw new CodeError("z");
      },
      CodeError,
      "other",
    )
  );
});

Deno.test("assertRejects takes a promise or a function and checks like assertThrows", async () => {
  const e = await assertRejects(Promise.reject(new CodeError("p")), CodeError);
  assertEquals(e.code, "p");
  await assertRejects(() => Promise.reject(new RangeError("r")), RangeError, /^r$/);
  for (
    const failing of [
      assertRejects(Promise.resolve(1)),
      assertRejects(Promise.reject(new Error("e")), CodeError),
      assertRejects(Promise.reject(new CodeError("q")), CodeError, /nope/),
    ]
  ) {
    let caught: unknown;
    await failing.catch((error) => caught = error);
    assert(caught instanceof AssertionError, `expected an AssertionError, got ${caught}`);
  }
});
