// The upstream reference server (npm @durable-streams/server), in memory, on loopback, for
// benchmarks/http_compare.py to measure our server against.
//
//   node reference_server.mjs --port N [--long-poll-timeout-ms MS]
//
// Prints one line "ready http://127.0.0.1:N" once it listens; stops on SIGTERM or SIGINT.
// Everything else is the package's default (compression included: the benchmark's client asks
// for uncompressed bodies, as it does of our server, which never compresses).
import { parseArgs } from "node:util"
import { DurableStreamTestServer } from "@durable-streams/server"

const { values } = parseArgs({
  options: {
    port: { type: "string" },
    "long-poll-timeout-ms": { type: "string", default: "30000" },
  },
})
if (values.port === undefined) {
  console.error("usage: node reference_server.mjs --port N [--long-poll-timeout-ms MS]")
  process.exit(2)
}

const server = new DurableStreamTestServer({
  host: "127.0.0.1",
  port: Number(values.port),
  longPollTimeout: Number(values["long-poll-timeout-ms"]),
})
const url = await server.start()
console.log(`ready ${url}`)

async function stop() {
  await server.stop()
  process.exit(0)
}
process.on("SIGTERM", stop)
process.on("SIGINT", stop)
