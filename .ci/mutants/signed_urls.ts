/** Mutants: Signed pack URLs. */
import type { Mutant } from "./mutant.ts";

export const SIGNED_URLS_MUTANTS: Mutant[] = [
  {
    name: "signing/prefix-signature",
    file: "src/proxy/core/signing.ts",
    from:
      'return await crypto.subtle.verify("HMAC", await this.#key, mac, message(path, expires));',
    to:
      "const full = fromBase64Url(await this.sign(path, expires))!; return mac.every((b, i) => b === full[i]);",
    tests: ["test/proxy/core/signing_test.ts", "test/proxy/downloads/pack_urls_test.ts"],
  },
  {
    name: "signing/no-expiry",
    file: "src/proxy/core/signing.ts",
    from:
      "if (!Number.isSafeInteger(expires) || expires + this.#leeway < nowSeconds) return false;",
    to: "if (!Number.isSafeInteger(expires)) return false;",
    tests: ["test/proxy/core/signing_test.ts", "test/proxy/downloads/pack_urls_test.ts"],
  },
  {
    name: "signing/expiry-not-in-message",
    file: "src/proxy/core/signing.ts",
    from: "return encoder.encode(`${path}\\n${expires}`);",
    to: "return encoder.encode(`${path}\\n`);",
    tests: ["test/proxy/core/signing_test.ts", "test/proxy/downloads/pack_urls_test.ts"],
  },
  {
    name: "pack_urls/index-signed-as-itself",
    file: "src/proxy/downloads/pack_urls.ts",
    from: "if (!(await signer.verify(packPath(id, packFileOf(file)), exp, sig, nowSeconds))) {",
    to: "if (!(await signer.verify(packPath(id, file), exp, sig, nowSeconds)) && false) {",
    tests: ["test/proxy/downloads/pack_urls_test.ts"],
  },
];
