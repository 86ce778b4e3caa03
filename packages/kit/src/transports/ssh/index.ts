export { checkPrivateKey, looksLikeKeyMaterial, KEY_PROBLEMS, KEY_REPAIRS, type PrivateKeyCheck, type PrivateKeyFormat } from "./private-key.js";
export { forgetKnownHost, knownHostsLinesFor, knownHostsName, readKnownHosts, seedKnownHost, writePrivateFile } from "./known-hosts.js";
export { classifySshFailure, isSshTransportError, sshFailure, SshTransportError, type SshFailureCode } from "./errors.js";
export { createOpenSshSession, OPENSSH_TRANSPORT, type HostKeyPolicy, type OpenSshSession, type OpenSshSessionOptions, type SshDestination } from "./openssh.js";
export { openSshPty, type OpenSshPtyDeps } from "./openssh-pty.js";
