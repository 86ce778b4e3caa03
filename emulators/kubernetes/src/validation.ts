// Objects are checked the way the API server checks them: first decoding against the official
// OpenAPI schema (kubernetes-models carries it, compiled), where a wrong type is a 400 decode error,
// then field validation, where a missing or malformed field is a 422 Invalid naming every field.
import { validate as validateNamespace } from "kubernetes-models/_schemas/IoK8sApiCoreV1Namespace";
import { validate as validateServiceAccount } from "kubernetes-models/_schemas/IoK8sApiCoreV1ServiceAccount";
import { validate as validateSecret } from "kubernetes-models/_schemas/IoK8sApiCoreV1Secret";
import { validate as validatePod } from "kubernetes-models/_schemas/IoK8sApiCoreV1Pod";
import { validate as validatePodSpec } from "kubernetes-models/_schemas/IoK8sApiCoreV1PodSpec";
import { validate as validateResourceQuota } from "kubernetes-models/_schemas/IoK8sApiCoreV1ResourceQuota";
import { validate as validateLimitRange } from "kubernetes-models/_schemas/IoK8sApiCoreV1LimitRange";
import { validate as validateRole } from "kubernetes-models/_schemas/IoK8sApiRbacV1Role";
import { validate as validateRoleBinding } from "kubernetes-models/_schemas/IoK8sApiRbacV1RoleBinding";
import { validate as validateNetworkPolicy } from "kubernetes-models/_schemas/IoK8sApiNetworkingV1NetworkPolicy";
import { validate as validateJob } from "kubernetes-models/_schemas/IoK8sApiBatchV1Job";
import { isIP } from "node:net";
import { badRequest, invalid, type StatusCause } from "./status.js";

interface SchemaIssue {
  instancePath: string;
  keyword: string;
  params: Record<string, unknown>;
}
type SchemaValidator = ((data: unknown, ctx?: { instancePath?: string }) => boolean) & { errors?: SchemaIssue[] | null };

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: Record<string, any>;
  spec?: any;
  status?: any;
  [key: string]: any;
}

const SCHEMAS: Record<string, SchemaValidator> = {
  Namespace: validateNamespace as SchemaValidator,
  ServiceAccount: validateServiceAccount as SchemaValidator,
  Secret: validateSecret as SchemaValidator,
  Pod: validatePod as SchemaValidator,
  ResourceQuota: validateResourceQuota as SchemaValidator,
  LimitRange: validateLimitRange as SchemaValidator,
  Role: validateRole as SchemaValidator,
  RoleBinding: validateRoleBinding as SchemaValidator,
  NetworkPolicy: validateNetworkPolicy as SchemaValidator,
  Job: validateJob as SchemaValidator,
};

/** `/spec/containers/0/name` → `spec.containers[0].name`. */
function fieldPath(pointer: string): string {
  return pointer
    .split("/")
    .filter(Boolean)
    .map((part) => part.replace(/~1/g, "/").replace(/~0/g, "~"))
    .reduce((path, part) => (/^\d+$/.test(part) ? `${path}[${part}]` : path ? `${path}.${part}` : part), "");
}

function join(base: string, issue: SchemaIssue): string {
  const own = fieldPath(issue.instancePath);
  const missing = issue.keyword === "required" ? String(issue.params.missingProperty) : "";
  return [base, own, missing].filter(Boolean).join(".").replace(/\.\[/g, "[");
}

/** Runs a compiled schema; type errors throw the decode error, the rest become causes. */
function schemaCauses(kind: string, version: string, validator: SchemaValidator, data: unknown, base = ""): StatusCause[] {
  if (validator(data)) return [];
  const issues = validator.errors ?? [];
  const typeIssue = issues.find((i) => i.keyword === "type");
  if (typeIssue) {
    const path = join(base, typeIssue);
    const expected = String(typeIssue.params.type);
    throw badRequest(
      `${kind} in version "${version}" cannot be handled as a ${kind}: json: cannot unmarshal ${jsonType(valueAt(data, typeIssue.instancePath))} into Go struct field ${path} of type ${goType(expected)}`,
    );
  }
  const causes: StatusCause[] = [];
  const seen = new Set<string>();
  for (const issue of issues) {
    const field = join(base, issue);
    let cause: StatusCause | undefined;
    if (issue.keyword === "required") cause = { reason: "FieldValueRequired", message: "Required value", field };
    else if (issue.keyword === "enum") {
      const allowed = (issue.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(", ");
      cause = { reason: "FieldValueNotSupported", message: `Unsupported value: ${JSON.stringify(valueAt(data, issue.instancePath))}: supported values: ${allowed}`, field };
    } else if (issue.keyword === "format" && issue.params.format === "quantity") {
      throw badRequest(`${kind} in version "${version}" cannot be handled as a ${kind}: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`);
    } else if (issue.keyword === "oneOf") continue;
    else cause = { reason: "FieldValueInvalid", message: `Invalid value: ${JSON.stringify(valueAt(data, issue.instancePath))}: ${issue.keyword}`, field };
    const key = `${cause.field}|${cause.message}`;
    if (!seen.has(key)) {
      seen.add(key);
      causes.push(cause);
    }
  }
  return causes;
}

function valueAt(data: unknown, pointer: string): unknown {
  let value: any = data;
  for (const part of pointer.split("/").filter(Boolean)) value = value?.[part.replace(/~1/g, "/").replace(/~0/g, "~")];
  return value;
}

function jsonType(value: unknown): string {
  if (Array.isArray(value)) return "array";
  if (value === null) return "null";
  return typeof value === "object" ? "object" : typeof value;
}

function goType(schemaType: string): string {
  return ({ integer: "int64", number: "float64", string: "string", boolean: "bool", object: "map[string]interface {}", array: "[]interface {}" } as Record<string, string>)[schemaType] ?? schemaType;
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const LABEL_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;

function dnsLabelProblem(value: string): string | undefined {
  if (value.length > 63) return "must be no more than 63 characters";
  if (!DNS_LABEL.test(value))
    return "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
  return undefined;
}

function dnsSubdomainProblem(value: string): string | undefined {
  if (value.length > 253) return "must be no more than 253 characters";
  if (!DNS_SUBDOMAIN.test(value))
    return "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
  return undefined;
}

function labelCauses(labels: unknown, field: string): StatusCause[] {
  if (!labels || typeof labels !== "object") return [];
  const causes: StatusCause[] = [];
  for (const [key, value] of Object.entries(labels as Record<string, string>)) {
    const slash = key.lastIndexOf("/");
    const name = slash >= 0 ? key.slice(slash + 1) : key;
    const prefix = slash >= 0 ? key.slice(0, slash) : "";
    if (name.length > 63 || !LABEL_NAME.test(name) || (prefix && dnsSubdomainProblem(prefix))) {
      causes.push({
        reason: "FieldValueInvalid",
        field,
        message: `Invalid value: ${JSON.stringify(key)}: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`,
      });
    }
    if (typeof value === "string" && (value.length > 63 || !LABEL_VALUE.test(value))) {
      causes.push({
        reason: "FieldValueInvalid",
        field,
        message: `Invalid value: ${JSON.stringify(value)}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
      });
    }
  }
  return causes;
}

/** metadata checks every kind shares: name rules, labels, owner references. */
function metadataCauses(obj: KubeObject, nameRule: "label" | "subdomain"): StatusCause[] {
  const meta = obj.metadata ?? {};
  const causes: StatusCause[] = [];
  if (!meta.name && !meta.generateName) causes.push({ reason: "FieldValueRequired", field: "metadata.name", message: "Required value: name or generateName is required" });
  else if (meta.name) {
    const problem = nameRule === "label" ? dnsLabelProblem(meta.name) : dnsSubdomainProblem(meta.name);
    if (problem) causes.push({ reason: "FieldValueInvalid", field: "metadata.name", message: `Invalid value: ${JSON.stringify(meta.name)}: ${problem}` });
  }
  causes.push(...labelCauses(meta.labels, "metadata.labels"));
  (meta.ownerReferences ?? []).forEach((ref: Record<string, unknown>, i: number) => {
    for (const field of ["apiVersion", "kind", "name", "uid"]) {
      if (!ref?.[field]) causes.push({ reason: "FieldValueRequired", field: `metadata.ownerReferences[${i}].${field}`, message: "Required value" });
    }
  });
  return causes;
}

function podSpecCauses(spec: any, base: string, forPod: boolean): StatusCause[] {
  const causes: StatusCause[] = [];
  if (!spec || typeof spec !== "object") return causes;
  const volumes = new Set<string>((spec.volumes ?? []).map((v: { name: string }) => v.name));
  (spec.volumes ?? []).forEach((v: { name: string }, i: number) => {
    const problem = dnsLabelProblem(v.name ?? "");
    if (problem) causes.push({ reason: "FieldValueInvalid", field: `${base}.volumes[${i}].name`, message: `Invalid value: ${JSON.stringify(v.name)}: ${problem}` });
  });
  const names = new Set<string>();
  const containers = spec.containers ?? [];
  if (containers.length === 0) causes.push({ reason: "FieldValueRequired", field: `${base}.containers`, message: "Required value" });
  containers.forEach((c: any, i: number) => {
    const field = `${base}.containers[${i}]`;
    if (c.name) {
      const problem = dnsLabelProblem(c.name);
      if (problem) causes.push({ reason: "FieldValueInvalid", field: `${field}.name`, message: `Invalid value: ${JSON.stringify(c.name)}: ${problem}` });
      if (names.has(c.name)) causes.push({ reason: "FieldValueDuplicate", field: `${field}.name`, message: `Duplicate value: ${JSON.stringify(c.name)}` });
      names.add(c.name);
    }
    if (forPod && !c.image) causes.push({ reason: "FieldValueRequired", field: `${field}.image`, message: "Required value" });
    (c.volumeMounts ?? []).forEach((m: any, j: number) => {
      if (m.name && !volumes.has(m.name)) causes.push({ reason: "FieldValueNotFound", field: `${field}.volumeMounts[${j}].name`, message: `Not found: ${JSON.stringify(m.name)}` });
      if (m.mountPath && !String(m.mountPath).startsWith("/"))
        causes.push({ reason: "FieldValueInvalid", field: `${field}.volumeMounts[${j}].mountPath`, message: `Invalid value: ${JSON.stringify(m.mountPath)}: must be an absolute path` });
    });
  });
  if (spec.restartPolicy !== undefined && !["Always", "OnFailure", "Never"].includes(spec.restartPolicy)) {
    causes.push({
      reason: "FieldValueNotSupported",
      field: `${base}.restartPolicy`,
      message: `Unsupported value: ${JSON.stringify(spec.restartPolicy)}: supported values: "Always", "OnFailure", "Never"`,
    });
  }
  return causes;
}

function cidrProblem(cidr: unknown): boolean {
  if (typeof cidr !== "string") return true;
  const [address, prefix, extra] = cidr.split("/");
  if (extra !== undefined || prefix === undefined || !/^\d{1,3}$/.test(prefix)) return true;
  const family = isIP(address ?? "");
  return family === 0 || Number(prefix) > (family === 4 ? 32 : 128);
}

function peerCidrCauses(peers: any[] | undefined, base: string): StatusCause[] {
  const causes: StatusCause[] = [];
  (peers ?? []).forEach((peer, i) => {
    const block = peer?.ipBlock;
    if (!block) return;
    if (cidrProblem(block.cidr)) {
      causes.push({
        reason: "FieldValueInvalid",
        field: `${base}[${i}].ipBlock.cidr`,
        message: `Invalid value: ${JSON.stringify(block.cidr)}: must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)`,
      });
      return;
    }
    (block.except ?? []).forEach((except: unknown, j: number) => {
      if (cidrProblem(except))
        causes.push({
          reason: "FieldValueInvalid",
          field: `${base}[${i}].ipBlock.except[${j}]`,
          message: `Invalid value: ${JSON.stringify(except)}: must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)`,
        });
    });
  });
  return causes;
}

function networkPolicyCauses(obj: KubeObject): StatusCause[] {
  const spec = obj.spec ?? {};
  const causes: StatusCause[] = [];
  if (spec.podSelector === undefined) causes.push({ reason: "FieldValueRequired", field: "spec.podSelector", message: "Required value" });
  (spec.policyTypes ?? []).forEach((t: string, i: number) => {
    if (!["Ingress", "Egress"].includes(t))
      causes.push({ reason: "FieldValueNotSupported", field: `spec.policyTypes[${i}]`, message: `Unsupported value: ${JSON.stringify(t)}: supported values: "Ingress", "Egress"` });
  });
  const ports = (rules: any[] | undefined, dir: string) =>
    (rules ?? []).forEach((rule, i) =>
      (rule?.ports ?? []).forEach((p: any, j: number) => {
        if (p.protocol !== undefined && !["TCP", "UDP", "SCTP"].includes(p.protocol)) {
          causes.push({
            reason: "FieldValueNotSupported",
            field: `spec.${dir}[${i}].ports[${j}].protocol`,
            message: `Unsupported value: ${JSON.stringify(p.protocol)}: supported values: "SCTP", "TCP", "UDP"`,
          });
        }
        if (typeof p.port === "number" && (p.port < 1 || p.port > 65535)) {
          causes.push({ reason: "FieldValueInvalid", field: `spec.${dir}[${i}].ports[${j}].port`, message: `Invalid value: ${p.port}: must be between 1 and 65535, inclusive` });
        }
      }),
    );
  ports(spec.egress, "egress");
  ports(spec.ingress, "ingress");
  (spec.egress ?? []).forEach((rule: any, i: number) => causes.push(...peerCidrCauses(rule?.to, `spec.egress[${i}].to`)));
  (spec.ingress ?? []).forEach((rule: any, i: number) => causes.push(...peerCidrCauses(rule?.from, `spec.ingress[${i}].from`)));
  return causes;
}

function jobCauses(obj: KubeObject): StatusCause[] {
  const template = obj.spec?.template ?? {};
  const causes = podSpecCauses(template.spec, "spec.template.spec", true);
  const policy = template.spec?.restartPolicy;
  if (policy !== "Never" && policy !== "OnFailure") {
    causes.push({
      reason: "FieldValueNotSupported",
      field: "spec.template.spec.restartPolicy",
      message: `Unsupported value: ${JSON.stringify(policy ?? "Always")}: supported values: "OnFailure", "Never"`,
    });
  }
  return causes;
}

/** agent-sandbox's Sandbox, per its CRD: spec.podTemplate.spec is a core PodSpec. */
function sandboxCauses(obj: KubeObject, version: string): StatusCause[] {
  const spec = obj.spec;
  if (!spec || typeof spec !== "object") return [{ reason: "FieldValueRequired", field: "spec", message: "Required value" }];
  const causes: StatusCause[] = [];
  const template = spec.podTemplate;
  if (!template || typeof template !== "object") causes.push({ reason: "FieldValueRequired", field: "spec.podTemplate", message: "Required value" });
  else if (!template.spec) causes.push({ reason: "FieldValueRequired", field: "spec.podTemplate.spec", message: "Required value" });
  else {
    causes.push(...schemaCauses("Sandbox", `agents.x-k8s.io/${version}`, validatePodSpec as SchemaValidator, template.spec, "spec.podTemplate.spec"));
    causes.push(...podSpecCauses(template.spec, "spec.podTemplate.spec", true));
    causes.push(...labelCauses(template.metadata?.labels, "spec.podTemplate.metadata.labels"));
  }
  if (spec.shutdownPolicy !== undefined && !["Delete", "Retain"].includes(spec.shutdownPolicy)) {
    causes.push({ reason: "FieldValueNotSupported", field: "spec.shutdownPolicy", message: `Unsupported value: ${JSON.stringify(spec.shutdownPolicy)}: supported values: "Delete", "Retain"` });
  }
  if (spec.shutdownTime !== undefined && (typeof spec.shutdownTime !== "string" || Number.isNaN(Date.parse(spec.shutdownTime)))) {
    causes.push({ reason: "FieldValueInvalid", field: "spec.shutdownTime", message: `Invalid value: ${JSON.stringify(spec.shutdownTime)}: spec.shutdownTime in body must be of type date-time` });
  }
  if (version === "v1beta1" && spec.operatingMode !== undefined && !["Running", "Suspended"].includes(spec.operatingMode)) {
    causes.push({ reason: "FieldValueNotSupported", field: "spec.operatingMode", message: `Unsupported value: ${JSON.stringify(spec.operatingMode)}: supported values: "Running", "Suspended"` });
  }
  if (version === "v1alpha1" && spec.replicas !== undefined && !(Number.isInteger(spec.replicas) && spec.replicas >= 0 && spec.replicas <= 1)) {
    causes.push({ reason: "FieldValueInvalid", field: "spec.replicas", message: `Invalid value: ${JSON.stringify(spec.replicas)}: spec.replicas in body should be less than or equal to 1` });
  }
  return causes;
}

/** CiliumNetworkPolicy (cilium.io/v2), the fields the CRD's schema types. */
function ciliumCauses(obj: KubeObject): StatusCause[] {
  const spec = obj.spec;
  const causes: StatusCause[] = [];
  if (!spec || typeof spec !== "object") return [{ reason: "FieldValueRequired", field: "spec", message: "Required value" }];
  if (typeof spec.endpointSelector !== "object" || spec.endpointSelector === null) causes.push({ reason: "FieldValueRequired", field: "spec.endpointSelector", message: "Required value" });
  (spec.egress ?? []).forEach((rule: any, i: number) => {
    (rule.toFQDNs ?? []).forEach((f: any, j: number) => {
      if (typeof f?.matchName !== "string" && typeof f?.matchPattern !== "string") {
        causes.push({ reason: "FieldValueInvalid", field: `spec.egress[${i}].toFQDNs[${j}]`, message: 'Invalid value: "object": must have at least one of matchName, matchPattern' });
      } else if (typeof f.matchName === "string" && !/^[-a-zA-Z0-9_.]+$/.test(f.matchName)) {
        causes.push({
          reason: "FieldValueInvalid",
          field: `spec.egress[${i}].toFQDNs[${j}].matchName`,
          message: `Invalid value: ${JSON.stringify(f.matchName)}: spec.egress[${i}].toFQDNs[${j}].matchName in body should match '^([-a-zA-Z0-9_]+[.]?)+$'`,
        });
      }
    });
    (rule.toCIDRSet ?? []).forEach((c: any, j: number) => {
      if (cidrProblem(c?.cidr)) causes.push({ reason: "FieldValueInvalid", field: `spec.egress[${i}].toCIDRSet[${j}].cidr`, message: `Invalid value: ${JSON.stringify(c?.cidr)}: must be a CIDR` });
    });
    (rule.toPorts ?? []).forEach((tp: any, j: number) =>
      (tp.ports ?? []).forEach((p: any, k: number) => {
        if (typeof p.port !== "string")
          causes.push({
            reason: "FieldValueInvalid",
            field: `spec.egress[${i}].toPorts[${j}].ports[${k}].port`,
            message: `Invalid value: ${JSON.stringify(typeof p.port)}: spec.egress[${i}].toPorts[${j}].ports[${k}].port in body must be of type string`,
          });
        if (p.protocol !== undefined && !["TCP", "UDP", "SCTP", "ICMP", "ICMPV6", "VRRP", "IGMP", "ANY"].includes(p.protocol)) {
          causes.push({
            reason: "FieldValueNotSupported",
            field: `spec.egress[${i}].toPorts[${j}].ports[${k}].protocol`,
            message: `Unsupported value: ${JSON.stringify(p.protocol)}: supported values: "TCP", "UDP", "SCTP", "ICMP", "ICMPV6", "VRRP", "IGMP", "ANY"`,
          });
        }
      }),
    );
  });
  return causes;
}

const SEMANTIC: Record<string, (obj: KubeObject, version: string) => StatusCause[]> = {
  Pod: (obj) => podSpecCauses(obj.spec, "spec", true),
  NetworkPolicy: networkPolicyCauses,
  Job: jobCauses,
  Sandbox: sandboxCauses,
  CiliumNetworkPolicy: ciliumCauses,
};

export interface ValidationTarget {
  kind: string;
  group: string;
  version: string;
  /** Namespaces are DNS labels; most other names DNS subdomains. */
  nameRule: "label" | "subdomain";
}

/** Validates a whole object as written (create or update); throws the API server's error. */
export function validateObject(target: ValidationTarget, obj: KubeObject): void {
  const apiVersion = target.group ? `${target.group}/${target.version}` : target.version;
  if (obj === null || typeof obj !== "object" || Array.isArray(obj))
    throw badRequest(`the body of the request was in an unknown format - accepted media types include: application/json, application/yaml`);
  if (obj.kind !== undefined && obj.kind !== target.kind)
    throw badRequest(`${obj.kind} in version "${target.version}" cannot be handled as a ${target.kind}: the object provided is unrecognized (must be of type ${target.kind})`);
  if (obj.apiVersion !== undefined && obj.apiVersion !== apiVersion) throw badRequest(`the API version in the data (${obj.apiVersion}) does not match the expected API version (${apiVersion})`);
  const schema = SCHEMAS[target.kind];
  const causes: StatusCause[] = [];
  if (schema) causes.push(...schemaCauses(target.kind, target.version, schema, { ...obj, apiVersion, kind: target.kind }));
  causes.push(...metadataCauses(obj, target.nameRule));
  // The schema and the field checks may both name a field: report it once, as the server does.
  const seen = new Set(causes.map((c) => `${c.field}|${c.reason}`));
  for (const cause of SEMANTIC[target.kind]?.(obj, target.version) ?? []) {
    if (!seen.has(`${cause.field}|${cause.reason}`)) causes.push(cause);
  }
  if (causes.length > 0) throw invalid(target.kind, target.group, obj.metadata?.name ?? obj.metadata?.generateName ?? "", causes);
}
