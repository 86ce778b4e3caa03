// The fixture's vendor client, shared by the worker (acquire, destroy) and the lister (gc), as a
// hosted provider's would be: the kit's vendor client, lease id codec and ownership check.
import { assertOwnedBy, createVendorClient, leaseLabels, opaqueLeaseIdCodec } from "@paperclip-sandbox/kit";

export const leaseIds = opaqueLeaseIdCodec({ vendor: "hosted-fixture", prefix: "hf-" });

export function parseConfig(config) {
  const errors = [];
  if (typeof config.apiUrl !== "string" || !/^https?:\/\//.test(config.apiUrl)) errors.push("apiUrl: expected an http(s) URL");
  if (typeof config.apiKey !== "string" || config.apiKey === "") errors.push("apiKey: required");
  for (const key of Object.keys(config)) if (key !== "apiUrl" && key !== "apiKey") errors.push(`${key}: unknown field`);
  return errors;
}

export function vendorClient(config) {
  const errors = parseConfig(config);
  if (errors.length) throw new Error(`invalid config: ${errors.join("; ")}`);
  return createVendorClient({ vendor: "hosted-fixture", baseUrl: config.apiUrl, headers: { authorization: `Bearer ${config.apiKey}` }, timeoutMs: 5_000, retry: { attempts: 2, baseDelayMs: 10 } });
}

export async function listSandboxes(config, labels, signal) {
  const selector = Object.entries(labels ?? {})
    .map(([k, v]) => `${k}=${v}`)
    .join(",");
  const body = await vendorClient(config).json({ operation: "listSandboxes", path: "/sandboxes", query: { labels: selector || undefined }, idempotent: true, signal });
  return body.sandboxes;
}

export async function createSandbox(config, params) {
  const labels = leaseLabels({ driverKey: params.driverKey, companyId: params.companyId, environmentId: params.environmentId, runId: params.runId });
  const body = await vendorClient(config).json({ operation: "createSandbox", method: "POST", path: "/sandboxes", json: { labels }, idempotent: false });
  return leaseIds.encode(body.id);
}

/** Deletes a sandbox after checking it belongs to the caller's provider, company and environment; a missing one is already gone. */
export async function destroySandbox(config, params) {
  const id = leaseIds.decode(params.providerLeaseId);
  const client = vendorClient(config);
  let sandbox;
  try {
    sandbox = await client.json({ operation: "getSandbox", path: ["sandboxes", id], idempotent: true });
  } catch (error) {
    if (error.gone) return;
    throw error;
  }
  assertOwnedBy(sandbox.labels, params, { resource: `sandbox ${id}` });
  try {
    await client.request({ operation: "deleteSandbox", method: "DELETE", path: ["sandboxes", id], idempotent: true });
  } catch (error) {
    if (!error.gone) throw error;
  }
}
