/**
 * The deployment files in docs/deploy (systemd unit, Kubernetes manifests, Containerfile) read
 * and checked against the code, so they cannot drift: every `GITEDGE_*` name is a setting's
 * variable and every value given parses as that setting; secrets come from a Secret or an
 * environment file, never a literal; probe paths are the health routes; the probed port is the
 * one the server listens on; the pod's and the unit's grace periods exceed the drain timeout; the
 * PodDisruptionBudget selects the Deployment's pods. Then the unit's own command line (its Deno
 * permissions) and environment start a real `gitedge serve` on an S3 store (`s3rver`, an S3
 * emulator from npm) with Redis, whose readiness route answers 200.
 */
import { parseAllDocuments } from "yaml";
import { assert, assertEquals } from "../support/assert.ts";
import { SETTINGS } from "../../src/proxy/settings/table.ts";
import { HEALTH_ROUTES } from "../../src/proxy/ops/health.ts";
import { startS3Emulator } from "../support/s3_emulator.ts";
import { redisMissing, startRedis } from "../support/redis_server.ts";
import { startServeProcess } from "../support/serve_process.ts";
import { skipped } from "../support/skips.ts";

const DIR = new URL("../../docs/deploy/", import.meta.url).pathname;
const ROOT = new URL("../../", import.meta.url).pathname;
const UNIT = await Deno.readTextFile(`${DIR}gitedge.service`);
const K8S = await Deno.readTextFile(`${DIR}kubernetes.yaml`);
const CONTAINERFILE = await Deno.readTextFile(`${DIR}Containerfile`);

/** The standard AWS variables the S3 store's client reads (docs/fleet.md names them). */
const AWS_NAMES = new Set([
  "AWS_REGION",
  "AWS_ACCESS_KEY_ID",
  "AWS_SECRET_ACCESS_KEY",
  "AWS_SESSION_TOKEN",
  "AWS_PROFILE",
  "AWS_ENDPOINT_URL_S3",
  "AWS_ENDPOINT_URL",
  "AWS_MAX_ATTEMPTS",
]);

const BY_ENV = new Map(SETTINGS.filter((s) => s.env).map((s) => [s.env as string, s]));

/** Throws unless `name` is a setting's variable (and `value`, when given, parses as it). */
function checkVariable(where: string, name: string, value?: string): void {
  if (AWS_NAMES.has(name)) return;
  const setting = BY_ENV.get(name);
  assert(setting !== undefined, `${where}: ${name} is no setting's variable`);
  if (value === undefined) return;
  assert(!setting.secret, `${where}: ${name} is a secret, given as a literal value`);
  try {
    setting.parse(value);
  } catch (error) {
    throw new Error(`${where}: ${name}=${value} does not parse: ${error}`);
  }
}

/** `NAME=value` pairs of the unit's `Environment=` lines. */
function unitEnvironment(): Map<string, string> {
  const env = new Map<string, string>();
  for (const line of UNIT.split("\n")) {
    const m = line.match(/^Environment=([A-Z0-9_]+)=(.*)$/);
    if (m) env.set(m[1], m[2]);
  }
  return env;
}

function unitValue(key: string): string | undefined {
  return UNIT.split("\n").find((l) => l.startsWith(`${key}=`))?.slice(key.length + 1);
}

// deno-lint-ignore no-explicit-any
type Doc = any;
const DOCS: Doc[] = parseAllDocuments(K8S).map((d) => d.toJS());
const byKind = (kind: string): Doc => {
  const doc = DOCS.find((d) => d?.kind === kind);
  assert(doc !== undefined, `a ${kind} in kubernetes.yaml`);
  return doc;
};

Deno.test("deploy files: every GITEDGE_ name anywhere in them, comments included, is a setting's variable", () => {
  for (const [file, text] of [["gitedge.service", UNIT], ["kubernetes.yaml", K8S]]) {
    for (const name of new Set(text.match(/\bGITEDGE_[A-Z0-9_]+/g) ?? [])) {
      checkVariable(file, name);
    }
  }
});

Deno.test("deploy files: the systemd unit's environment parses, secrets come from its environment file, it stops after the drain", () => {
  const env = unitEnvironment();
  for (const [name, value] of env) checkVariable("gitedge.service", name, value);
  assert(unitValue("EnvironmentFile") !== undefined, "secrets from an EnvironmentFile");
  for (const secret of ["GITEDGE_SIGNING_KEY", "GITEDGE_COORDINATOR"]) {
    assert(!env.has(secret), `${secret} is not written in the unit`);
    assert(UNIT.includes(`#   ${secret}=`), `the unit says where ${secret} goes`);
  }
  const drain = Number(env.get("GITEDGE_DRAIN_TIMEOUT_SECONDS") ?? 30);
  assert(Number(unitValue("TimeoutStopSec")) > drain, "TimeoutStopSec above the drain timeout");
  assertEquals(unitValue("KillSignal"), "SIGTERM", "SIGTERM drains");
  const exec = unitValue("ExecStart")!;
  const cli = exec.match(/ (\/opt\/gitedge\/(\S+)) serve$/);
  assert(cli !== null, `ExecStart runs the checkout's CLI: ${exec}`);
  assert(Deno.statSync(`${ROOT}${cli[2]}`).isFile, `${cli[2]} is in the checkout`);
});

Deno.test("deploy files: the Kubernetes Deployment's environment, Secret references, probes, port and grace period", () => {
  const deployment = byKind("Deployment");
  const pod = deployment.spec.template.spec;
  const container = pod.containers[0];
  const env = new Map<string, Doc>(container.env.map((e: Doc) => [e.name, e]));
  for (const e of env.values()) {
    checkVariable("kubernetes.yaml", e.name, e.value === undefined ? undefined : String(e.value));
    if (BY_ENV.get(e.name)?.secret || e.name.startsWith("AWS_SECRET")) {
      assert(e.valueFrom?.secretKeyRef?.name, `${e.name} comes from a Secret`);
    }
  }
  const store = String(env.get("GITEDGE_STORE")?.value ?? "");
  if (store.startsWith("s3://")) {
    assert(env.has("GITEDGE_SIGNING_KEY"), "an S3 store needs the shared signing key");
  }
  assert(env.has("GITEDGE_COORDINATOR"), "the fleet's coordinator");
  const portSetting = Number(
    env.get("GITEDGE_PORT")?.value ?? SETTINGS.find((s) => s.key === "port")!.default,
  );
  const http = container.ports.find((p: Doc) => p.name === "http");
  assertEquals(http.containerPort, portSetting, "the container port is the one served");
  assertEquals(env.get("GITEDGE_HOST")?.value, "0.0.0.0", "listening beyond loopback");
  assertEquals(container.livenessProbe.httpGet.path, HEALTH_ROUTES.live);
  assertEquals(container.readinessProbe.httpGet.path, HEALTH_ROUTES.ready);
  for (const probe of [container.livenessProbe, container.readinessProbe]) {
    assert([http.name, http.containerPort].includes(probe.httpGet.port), "probes the served port");
  }
  const drain = Number(env.get("GITEDGE_DRAIN_TIMEOUT_SECONDS")?.value ?? 30);
  assert(pod.terminationGracePeriodSeconds > drain, "grace period above the drain timeout");
  assertEquals(
    deployment.spec.selector.matchLabels,
    deployment.spec.template.metadata.labels,
    "the Deployment selects its pods",
  );
  const service = byKind("Service");
  assertEquals(service.spec.selector, deployment.spec.template.metadata.labels);
  assertEquals(service.spec.ports[0].targetPort, http.name);
});

Deno.test("deploy files: the PodDisruptionBudget selects the Deployment's pods and leaves some running", () => {
  const deployment = byKind("Deployment");
  const pdb = byKind("PodDisruptionBudget");
  assertEquals(pdb.apiVersion, "policy/v1");
  assertEquals(pdb.spec.selector.matchLabels, deployment.spec.template.metadata.labels);
  assert(pdb.spec.minAvailable >= 1 && pdb.spec.minAvailable < deployment.spec.replicas);
});

Deno.test("deploy files: the Containerfile runs the unit's command with the same permissions and port", () => {
  const entry = JSON.parse(CONTAINERFILE.match(/^ENTRYPOINT (\[.*\])$/m)![1]) as string[];
  const perms = (cmd: string[]) => cmd.filter((a) => a.startsWith("--allow")).sort();
  const exec = unitValue("ExecStart")!.split(" ");
  assertEquals(perms(entry), perms(exec));
  assertEquals(entry.slice(-2), ["edge/deno/cli.ts", "serve"]);
  const port = byKind("Deployment").spec.template.spec.containers[0].ports[0].containerPort;
  assertEquals(CONTAINERFILE.match(/^EXPOSE (\d+)$/m)?.[1], String(port));
});

const noRedis = await redisMissing();
if (noRedis) skipped("deploy_manifests_test", "redis-server is not installed");

Deno.test({
  name:
    "deploy files: the unit's Deno permissions and environment start gitedge serve on an S3 store with Redis, ready",
  ignore: noRedis,
  // The emulator and Redis run in other processes.
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    await using s3 = await startS3Emulator();
    await using redis = await startRedis();
    const exec = unitValue("ExecStart")!.split(" ");
    const env: Record<string, string> = Object.fromEntries(unitEnvironment());
    // Here: loopback, a free port, the emulator, and the secrets the environment file holds.
    delete env.GITEDGE_HOST;
    delete env.GITEDGE_PORT;
    Object.assign(env, {
      GITEDGE_ORIGIN: "http://127.0.0.1:9",
      GITEDGE_STORE: "s3://gitedge/unit",
      GITEDGE_S3_PATH_STYLE: "on",
      AWS_ENDPOINT_URL_S3: s3.endpoint,
      AWS_ACCESS_KEY_ID: "S3RVER",
      AWS_SECRET_ACCESS_KEY: "S3RVER",
      GITEDGE_SIGNING_KEY: "ab".repeat(32),
      GITEDGE_COORDINATOR: redis.url,
    });
    await using serve = await startServeProcess([], {
      permissions: exec.filter((a) => a.startsWith("--allow")),
      env,
    });
    const ready = await fetch(`${serve.url}${HEALTH_ROUTES.ready}`);
    assertEquals(ready.status, 200, await ready.text());
    const live = await fetch(`${serve.url}${HEALTH_ROUTES.live}`);
    assertEquals(live.status, 200);
    await live.body?.cancel();
    assert(!serve.stdout().includes(redis.url), "the coordinator URL is not logged");
  },
});
