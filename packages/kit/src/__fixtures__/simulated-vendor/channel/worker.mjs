import { runWorker } from "@paperclipai/plugin-sdk";
import { simulatedVendorPlugin } from "../plugin.mjs";
const plugin = simulatedVendorPlugin("channel");
export default plugin;
runWorker(plugin, import.meta.url);
