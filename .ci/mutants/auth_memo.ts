/** Mutants: The credential memo. */
import { EDGE_SUITE, type Mutant } from "./mutant.ts";

export const AUTH_MEMO_MUTANTS: Mutant[] = [
  {
    name: "auth_memo/key-without-repo",
    file: "src/proxy/origin/auth_memo.ts",
    from: 'const text = new TextEncoder().encode(`${repoId}\\n${authorization ?? ""}\\n`);',
    to: 'const text = new TextEncoder().encode(`${authorization ?? ""}\\n`);',
    tests: ["test/proxy/origin/auth_memo_test.ts"],
  },
  {
    name: "auth_memo/key-without-credential",
    file: "src/proxy/origin/auth_memo.ts",
    from: 'const text = new TextEncoder().encode(`${repoId}\\n${authorization ?? ""}\\n`);',
    to: "const text = new TextEncoder().encode(`${repoId}\\n`);",
    tests: ["test/proxy/origin/auth_memo_test.ts"],
  },
  {
    name: "auth_memo/ttl-inclusive",
    file: "src/proxy/origin/auth_memo.ts",
    from: "if (now - at < ttlMs && now >= at) return true;",
    to: "if (now - at <= ttlMs && now >= at) return true;",
    tests: ["test/proxy/origin/auth_memo_test.ts"],
  },
  {
    name: "auth_memo/forget-noop",
    file: "src/proxy/origin/auth_memo.ts",
    from: "  forget(key: string): void {\n    this.#accepted.delete(key);",
    to: "  forget(key: string): void {\n    void key;",
    tests: ["test/proxy/origin/auth_memo_test.ts"],
  },
  {
    name: "forwarding/refusal-keeps-memo",
    file: "src/proxy/origin/forwarding.ts",
    from: "else if (status === 401 || status === 403) ctx.authMemo.forget(key);",
    to: "",
    tests: ["test/proxy/origin/auth_memo_test.ts"],
  },
  {
    name: "forwarding/any-answer-remembered",
    file: "src/proxy/origin/forwarding.ts",
    from: "if (status === 200) ctx.authMemo.remember(key, askedAt);",
    to: "if (status < 500) ctx.authMemo.remember(key, askedAt);",
    tests: ["test/proxy/origin/auth_memo_test.ts", EDGE_SUITE],
    filter: "private origin",
  },
];
