#!/usr/bin/env node
// The CLI's bin. It lives outside dist/ so that `npm ci` links it (npm skips a bin whose file is
// missing, and dist/ is built after the install); it runs the built CLI.
import("../dist/main.js").catch((error) => {
  if (error?.code === "ERR_MODULE_NOT_FOUND" && String(error.message).includes("dist/main.js")) {
    console.error("paperclip-sandbox: the CLI is not built (run `npm run build` in the checkout)");
  } else {
    console.error(error);
  }
  process.exit(1);
});
