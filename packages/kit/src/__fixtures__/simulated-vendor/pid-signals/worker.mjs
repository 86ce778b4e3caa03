import { runWorker } from "@paperclipai/plugin-sdk";
import { simulatedVendorPlugin } from "../plugin.mjs";
const plugin = simulatedVendorPlugin("pid-signals");
export default plugin;
runWorker(plugin, import.meta.url);
