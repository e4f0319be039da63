import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["conformance.test.mjs"],
    setupFiles: ["./with_headers.mjs"],
    // vitest's generic 5 s default, not a protocol rule: the property tests send up to 360
    // requests each, which through the Lambda bridge on the embedded emulator take 3.5 s on
    // an idle 2-core machine (a CI machine running the suite's server beside it can pass 5 s).
    // Tests whose timing the suite cares about set their own timeouts.
    testTimeout: 20000,
    testNamePattern: process.env.CONFORMANCE_FILTER || undefined,
    reporters: ["default", "json"],
    outputFile: { json: process.env.CONFORMANCE_REPORT ?? "conformance-report.json" },
  },
});
