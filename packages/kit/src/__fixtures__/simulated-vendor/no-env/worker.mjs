import { runWorker } from "@paperclipai/plugin-sdk";
import { simulatedVendorPlugin } from "../plugin.mjs";
const plugin = simulatedVendorPlugin("no-env");
export default plugin;
runWorker(plugin, import.meta.url);
