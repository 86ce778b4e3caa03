import { simulatedVendorManifest } from "../plugin.mjs";
export default simulatedVendorManifest("pid-signals");
