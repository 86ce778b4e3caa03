/**
 * The environment a command starts from. The runner replaces the process environment with what it
 * is given (`envMode: "replace"`, nothing of the agent's leaks in), so the plugin supplies the
 * basics a login would: PATH, HOME, USER, SHELL, LANG, plus the template's agent variables. The
 * command's own variables come on top, inside the kit's exec script.
 */
import { WORKSPACE_HOME } from "./config.js";

const WORKSPACE_USER = "coder";
const WORKSPACE_PATH = `${WORKSPACE_HOME}/.local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`;

const VALID_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export function commandBaseEnv(agentEnv: Readonly<Record<string, string>> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(agentEnv)) if (VALID_NAME.test(name) && !value.includes("\0")) env[name] = value;
  return {
    ...env,
    PATH: WORKSPACE_PATH,
    HOME: WORKSPACE_HOME,
    USER: WORKSPACE_USER,
    LOGNAME: WORKSPACE_USER,
    SHELL: "/bin/bash",
    LANG: env.LANG ?? "C.UTF-8",
  };
}
