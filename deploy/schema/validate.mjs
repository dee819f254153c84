// SPDX-License-Identifier: Apache-2.0
// Validates Kubernetes objects against the OpenAPI schemas of each Kubernetes version we support,
// with kubernetes-models' generated validators (one npm alias per version: package.json). Input on
// stdin: a JSON array of {"source": "...", "object": {...}}. Prints one line per object and
// version that fails, naming the field; exits 1 if any did, 2 on bad input.
import { readFileSync } from "node:fs";

const VERSIONS = ["k8s-1.27", "k8s-1.33", "k8s-1.34"];
// CustomResources with a published model; other groups are reported, never passed silently.
const CRDS = { "monitoring.coreos.com": "@kubernetes-models/prometheus-operator" };
// API groups younger than the oldest version we support: validated from the version that has them
// (resource.k8s.io/v1, DRA's GA API, is Kubernetes 1.34's; ValidatingAdmissionPolicy is GA
// since 1.30), by apiVersion or by apiVersion/kind.
const SINCE = {
  "resource.k8s.io/v1": "k8s-1.34",
  "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy": "k8s-1.33",
  "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding": "k8s-1.33",
};
// No published model: its config (a JSON string) is checked by check_manifests.py and rdma itself.
const UNMODELLED = new Set(["k8s.cni.cncf.io/v1/NetworkAttachmentDefinition"]);

async function modelFor(pkg, apiVersion, kind) {
  const path = apiVersion.includes("/") ? apiVersion : `v1`;
  try {
    const mod = await import(`${pkg}/${path}`);
    return mod[kind] ?? null;
  } catch {
    return null;
  }
}

function describe(err) {
  return (err.errors ?? [err]).map((e) =>
    e.instancePath !== undefined ? `${e.instancePath || "/"} ${e.message}` : String(e.message)).join("; ");
}

async function check(item, counts) {
  const { apiVersion, kind, metadata } = item.object;
  const what = `${item.source}: ${kind}/${metadata?.name ?? "?"}`;
  const key = `${apiVersion}/${kind}`;
  if (UNMODELLED.has(key)) { counts.unmodelled++; return []; }
  const group = apiVersion.includes("/") ? apiVersion.split("/")[0] : "";
  const sinceVersion = SINCE[key] ?? SINCE[apiVersion];
  const since = sinceVersion ? VERSIONS.indexOf(sinceVersion) : 0;
  const pkgs = CRDS[group] ? [[group, CRDS[group]]] : VERSIONS.slice(since).map((v) => [v, v]);
  const errors = [];
  for (const [label, pkg] of pkgs) {
    const Model = await modelFor(pkg, apiVersion, kind);
    if (!Model) { errors.push(`${what}: ${label} has no ${apiVersion} ${kind}`); continue; }
    try {
      new Model(item.object).validate();
      counts.checks++;
    } catch (err) {
      errors.push(`${what}: ${label}: ${describe(err)}`);
    }
  }
  return errors;
}

let items;
try {
  items = JSON.parse(readFileSync(0, "utf8"));
  if (!Array.isArray(items)) throw new Error("not an array");
} catch (e) {
  console.error(`validate.mjs: stdin is not a JSON array of objects: ${e.message}`);
  process.exit(2);
}
const counts = { checks: 0, unmodelled: 0 };
const errors = [];
for (const item of items) errors.push(...(await check(item, counts)));
for (const e of errors) console.log(`FAIL ${e}`);
console.log(`${items.length} objects, ${counts.checks} object x version validations passed, ` +
  `${counts.unmodelled} without a published schema, ${errors.length} failed ` +
  `(Kubernetes ${VERSIONS.map((v) => v.slice(4)).join(", ")})`);
process.exit(errors.length ? 1 : 0);
