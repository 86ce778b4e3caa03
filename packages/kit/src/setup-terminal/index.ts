export { createSshSetupGateway, type SetupShellTarget, type SshSetupGateway, type SshSetupGatewayOptions } from "./ssh-gateway.js";
