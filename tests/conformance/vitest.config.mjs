// The suite ships as a module that registers its tests when imported; the published CLI finds
// no tests from inside node_modules, so this config includes the runner module directly.
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["node_modules/@durable-streams/server-conformance-tests/dist/test-runner.js"],
    testTimeout: 30000,
    reporters: ["default", "json"],
    outputFile: { json: process.env.CONFORMANCE_REPORT ?? "conformance-report.json" },
  },
});
