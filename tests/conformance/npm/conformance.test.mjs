// Registers the official suite against the server named by CONFORMANCE_TEST_URL.
import { runConformanceTests } from "@durable-streams/server-conformance-tests";

const baseUrl = process.env.CONFORMANCE_TEST_URL;
if (!baseUrl) throw new Error("set CONFORMANCE_TEST_URL to the server's base URL");

runConformanceTests({
  baseUrl,
  longPollTimeoutMs: Number(process.env.CONFORMANCE_LONG_POLL_MS ?? 1000),
  // The reserved __ds subscription APIs (webhooks, pull-wake): opt-in in the suite.
  subscriptions: true,
});
