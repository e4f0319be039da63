// The upstream TypeScript client's one-shot read: `stream({ live: false })` from the start,
// then `body()` or `json()`.
//
//   node one_shot.mjs --url URL --as body|json
//
// Prints {"requests": N, "upToDate": bool, "offset": s} and, for body, {"length": n,
// "sha256": hex}; for json, {"items": [...]}.

import { createHash } from "node:crypto"
import { stream } from "@durable-streams/client"
import { options, run, within } from "./common.mjs"

const args = options({
  url: { type: "string" },
  as: { type: "string", default: "body" },
  timeout: { type: "string", default: "30" },
})

async function main() {
  let requests = 0
  const counting = (...request) => {
    requests += 1
    return fetch(...request)
  }
  const read = async () => {
    const response = await stream({ url: args.url, offset: "-1", live: false, fetch: counting })
    const done = { requests: 0, upToDate: false, offset: "" }
    if (args.as === "json") {
      done.items = await response.json()
    } else {
      const body = await response.body()
      done.length = body.length
      done.sha256 = createHash("sha256").update(body).digest("hex")
    }
    return Object.assign(done, { requests, upToDate: response.upToDate, offset: response.offset })
  }
  return within(read(), Number(args.timeout), () => `${requests} requests made`)
}

await run(main)
