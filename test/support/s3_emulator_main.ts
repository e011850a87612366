/**
 * Runs `s3rver` (an S3 *emulator* from npm, not a real S3 server: no MinIO or Ceph is installable
 * here) on 127.0.0.1 with a bucket `gitedge`, storing under the directory given; prints its address
 * as one JSON line. Started as a subprocess by `test/support/s3_emulator.ts` and by `.ci/run`.
 * Usage: deno run -A test/support/s3_emulator_main.ts DIR [PORT]
 */
import S3rver from "s3rver";

const [directory, port] = Deno.args;
if (!directory) {
  console.error("usage: s3_emulator_main.ts DIR [PORT]");
  Deno.exit(2);
}
const server = new S3rver({
  address: "127.0.0.1",
  port: Number(port ?? 0),
  directory,
  silent: true,
  // Tests reach it through relays too (another Host than the one signed).
  allowMismatchedSignatures: true,
  configureBuckets: [{ name: "gitedge", configs: [] }],
});
const addr = await server.run();
console.log(JSON.stringify({ port: addr.port }));
