import { defineLeaseLister } from "@paperclip-sandbox/kit";
import { createDaytonaClient } from "./client.js";
import { daytonaConfig } from "./config.js";
import { DAYTONA_DRIVER_KEY } from "./manifest.js";
import { findByLabels, listedResource } from "./sandboxes.js";

/** For `paperclip-sandbox leases gc --provider daytona`: this provider's sandboxes, listed by label at Daytona. */
export const listLeases = defineLeaseLister(async (raw, { env, matchLabels }) => {
  const client = createDaytonaClient(daytonaConfig.parse(raw), { env });
  return (await findByLabels(client, { ...matchLabels, "paperclip-provider": DAYTONA_DRIVER_KEY })).map(listedResource);
});
