/**
 * Rich parameter values of a build, resolved as Coder's classic parameter flow does
 * (`codersdk.ParameterResolver.ValidateResolve`): the value given, else the last build's (unless
 * ephemeral), else the default; immutable parameters keep their first value; required ones must
 * be given once; each value is checked against its type, options and validation.
 */
import { HttpError } from "@paperclip-sandbox/emulator-kit";
import type { ParameterSpec } from "./options.js";

export type BuildParameter = { name: string; value: string };

export function resolveParameters(specs: readonly ParameterSpec[], given: readonly BuildParameter[], previous: readonly BuildParameter[] | undefined): BuildParameter[] {
  const known = new Set(specs.map((spec) => spec.name));
  for (const value of given) {
    // Coder ignores values for parameters the version does not declare; the emulator refuses them, so a typo is seen.
    if (!known.has(value.name)) throw validationError(value.name, `Parameter ${JSON.stringify(value.name)} is not declared by the template version`);
  }
  return specs.map((spec) => {
    const provided = given.find((value) => value.name === spec.name);
    const last = previous?.find((value) => value.name === spec.name);
    if (!(spec.mutable ?? false) && provided && last && provided.value !== last.value) {
      throw validationError(spec.name, `Parameter ${JSON.stringify(spec.name)} is not mutable, so it can't be updated after creating a workspace.`);
    }
    if ((spec.required ?? false) && !provided && !last) throw validationError(spec.name, `Parameter ${JSON.stringify(spec.name)} is required but not provided`);
    const value = provided?.value ?? (spec.ephemeral ? undefined : last?.value) ?? spec.defaultValue ?? "";
    checkValue(spec, value);
    return { name: spec.name, value };
  });
}

function checkValue(spec: ParameterSpec, value: string): void {
  const type = spec.type ?? "string";
  if (type === "number" && (value.trim() === "" || !Number.isFinite(Number(value)))) throw validationError(spec.name, `parameter value must be a number, got ${JSON.stringify(value)}`);
  if (type === "bool" && value !== "true" && value !== "false") throw validationError(spec.name, `boolean value can be either "true" or "false"`);
  if (type === "list(string)") {
    let parsed: unknown;
    try {
      parsed = JSON.parse(value);
    } catch {
      parsed = undefined;
    }
    if (!Array.isArray(parsed) || !parsed.every((item) => typeof item === "string")) throw validationError(spec.name, `failed to parse list of strings: ${JSON.stringify(value)}`);
  }
  if (spec.options && spec.options.length > 0 && !spec.options.some((option) => option.value === value)) {
    throw validationError(spec.name, `parameter value must match one of options: ${spec.options.map((option) => option.value).join(", ")}`);
  }
  if (spec.validationRegex && !new RegExp(spec.validationRegex).test(value)) {
    throw validationError(spec.name, spec.validationError ?? `value ${JSON.stringify(value)} does not match ${spec.validationRegex}`);
  }
  if (type === "number") {
    const number = Number(value);
    if ((spec.validationMin !== undefined && number < spec.validationMin) || (spec.validationMax !== undefined && number > spec.validationMax)) {
      throw validationError(spec.name, spec.validationError ?? `value ${number} is out of range [${spec.validationMin ?? "-inf"}, ${spec.validationMax ?? "+inf"}]`);
    }
  }
}

function validationError(name: string, detail: string): HttpError {
  return new HttpError(400, `Unable to validate parameter ${JSON.stringify(name)}`, { details: { detail } });
}
