export {
  LOGIN_COMMANDS,
  LOGIN_SESSION_HOME_ROOT,
  HOME_REJECTED_EXIT,
  LoginPtyError,
  checkSessionHome,
  isLoginCommandKey,
  loginLaunchScript,
  sessionHomeScript,
  type LoginCommandKey,
} from "./login-command.js";
export { createLoginPtys, splitText, MAX_LOGIN_OUTPUT_CHARS, type LoginLeaseScope, type LoginPtys, type LoginPtysOptions } from "./login-ptys.js";
