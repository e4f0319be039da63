// A StreamDB (@durable-streams/state's createStreamDB, TanStack DB collections) over a JSON
// stream of change events of type "item", keyed by "id".
//
//   node state.mjs preload --url URL [--timeout S]
//        a one-shot preload (live: false); prints the collection once preload() resolves
//   node state.mjs follow --url URL --live long-poll|sse --until KEY [--timeout S]
//        preload, write "ready" on standard error, then follow the stream until an item KEY is
//        present; prints the collection
//
//   --live true: StreamDB's default (the client 0.2.7 long-polls for it)
//
// The answer: {"items": [row, ...] in the collection's order (each row as the collection holds
// it, less StreamDB's `_seq` stamp and TanStack DB's `$` virtual properties), "requests": N,
// "bytes": the response bodies' bytes (decoded), "offsets": the offsets requested in order,
// "offset": the last offset consumed}. A preload that never resolves (the stream never said it
// was up to date) fails with the number of items present by then.

import { createStateSchema, createStreamDB } from "@durable-streams/state/db"
import { z } from "zod"
import { options, run, waitFor, within } from "./common.mjs"

const [command] = process.argv.splice(2, 1)
const args = options({
  url: { type: "string" },
  live: { type: "string", default: "long-poll" },
  until: { type: "string" },
  timeout: { type: "string", default: "20" },
})
const seconds = Number(args.timeout)

const schema = createStateSchema({
  items: {
    schema: z.object({ id: z.string(), n: z.number(), text: z.string() }),
    type: "item",
    primaryKey: "id",
  },
})

async function main() {
  let requests = 0
  let bytes = 0
  const offsets = []
  const counting = []
  const db = createStreamDB({
    streamOptions: {
      url: args.url,
      contentType: "application/json",
      fetch: async (...request) => {
        requests += 1
        const asked = request[0] instanceof Request ? request[0].url : String(request[0])
        offsets.push(new URL(asked).searchParams.get("offset"))
        const response = await fetch(...request)
        // A copy of the body, read as the package reads its own, counts its bytes.
        const counted = response.clone().body
        if (counted) {
          counting.push(
            (async () => {
              for await (const chunk of counted) bytes += chunk.byteLength
            })().catch(() => {}),
          )
        }
        return response
      },
    },
    state: schema,
    live: command === "preload" ? false : args.live === "true" ? true : args.live,
  })
  const items = db.collections.items
  const describe = () => `${items.size} items present after ${requests} requests`
  try {
    await within(db.preload(), seconds, describe)
    if (command === "follow") {
      process.stderr.write("ready\n")
      await waitFor(() => items.has(args.until), seconds, describe)
    } else if (command !== "preload") {
      throw new Error(`unknown command ${command}`)
    }
    const held = ([name]) => name !== "_seq" && !name.startsWith("$")
    const rows = items.toArray.map((item) => Object.fromEntries(Object.entries(item).filter(held)))
    if (command === "preload") await Promise.all(counting)
    return { items: rows, requests, bytes, offsets, offset: db.offset }
  } finally {
    db.close()
  }
}

await run(main)
