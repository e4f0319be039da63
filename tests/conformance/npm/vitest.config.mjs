import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["conformance.test.mjs"],
    testNamePattern: process.env.CONFORMANCE_FILTER || undefined,
    reporters: ["default", "json"],
    outputFile: { json: process.env.CONFORMANCE_REPORT ?? "conformance-report.json" },
  },
});
