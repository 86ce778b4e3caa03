import { simulatedVendorManifest } from "../plugin.mjs";
export default simulatedVendorManifest("channel");
