import { simulatedVendorManifest } from "../plugin.mjs";
export default simulatedVendorManifest("no-eof");
