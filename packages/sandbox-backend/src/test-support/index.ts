// Test helpers for suites built on the backend (not used at run time): loopback stand-ins for the
// internet, and a scan for what a test run left on this machine.
export { selfSignedCert, startHttpServer, startHttpsServer, type TestServer } from "./servers.js";
export { sandboxLeftovers } from "./leftovers.js";
export { isStopped, supervisorPidOf } from "./supervisor-pid.js";
