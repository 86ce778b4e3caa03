import type { ConformanceCase } from "../case.js";
import { requireMethods } from "../case.js";
import { assert } from "../expect.js";
import { ConformanceSkip } from "../skip.js";

export const configAndProbeCases: ConformanceCase[] = [
  {
    name: "validate-good-config",
    async run(world) {
      requireMethods(world, ["environmentValidateConfig"]);
      const { driverKey, config } = world.options;
      const result = await world.client.env.validateConfig({ driverKey, config });
      assert.equal(result.ok, true, `valid config rejected: ${JSON.stringify(result.errors)}`);
      assert.equal(typeof result.normalizedConfig, "object", "validate must return normalizedConfig for a good config");
      assert.notEqual(result.normalizedConfig, null);
    },
  },
  {
    name: "validate-bad-configs",
    async run(world) {
      requireMethods(world, ["environmentValidateConfig"]);
      const { driverKey, invalidConfigs } = world.options;
      if (invalidConfigs.length === 0) throw new ConformanceSkip("no invalidConfigs given");
      for (const { config, error } of invalidConfigs) {
        const result = await world.client.env.validateConfig({ driverKey, config });
        assert.equal(result.ok, false, `invalid config accepted: ${JSON.stringify(config)}`);
        const errors = result.errors ?? [];
        assert.ok(errors.length > 0, `ok:false without errors for ${JSON.stringify(config)}`);
        assert.ok(
          errors.some((text) => error.test(text)),
          `no error matches ${error} for ${JSON.stringify(config)}: ${JSON.stringify(errors)}`,
        );
      }
    },
  },
  {
    name: "probe",
    async run(world) {
      requireMethods(world, ["environmentProbe"]);
      const result = await world.client.env.probe(world.base());
      assert.equal(result.ok, true, `probe failed: ${result.summary ?? ""} ${JSON.stringify(result.diagnostics ?? [])}`);
    },
  },
];
