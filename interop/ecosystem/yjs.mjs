// Collaborative editing through @durable-streams/y-durable-streams against a Durable Streams
// server: its YjsServer in front of the server, three YjsProvider editors editing one document
// at once, compactions along the way, and an editor that joins once the document has a
// snapshot and updates after it.
//
//   node yjs.mjs --ds-url ROOT --live sse|long-poll --doc NAME [--rounds N] [--threshold BYTES]
//
// ROOT is the server's root URL (streams under ROOT/v1/stream). Prints one JSON object: every
// editor's final text and map, the late joiner's, the tokens each editor inserted, and the
// compactions that succeeded and failed.

import { YjsProvider } from "@durable-streams/y-durable-streams"
import { YjsServer } from "@durable-streams/y-durable-streams/server"
import * as Y from "yjs"
import { options, run, sleep, waitFor } from "./common.mjs"

const args = options({
  "ds-url": { type: "string" },
  live: { type: "string", default: "sse" },
  doc: { type: "string" },
  rounds: { type: "string", default: "40" },
  threshold: { type: "string", default: "1024" },
})
const SERVICE = "eco"
const EDITORS = 3
const rounds = Number(args.rounds)

function snapshotOf(doc) {
  return { text: doc.getText("text").toString(), map: doc.getMap("map").toJSON() }
}

async function main() {
  const yjsServer = new YjsServer({
    dsServerUrl: args["ds-url"],
    host: "127.0.0.1",
    port: 0,
    compactionThreshold: Number(args.threshold),
  })
  await yjsServer.start()
  const compactions = { ok: [], failed: [] }
  // The compactor runs in the background and only logs its failures: wrapping it lets the
  // test count both outcomes.
  const compactor = yjsServer.compactor
  const perform = compactor.performCompaction.bind(compactor)
  compactor.performCompaction = async (service, docPath) => {
    try {
      const result = await perform(service, docPath)
      compactions.ok.push(result.snapshotOffset)
      return result
    } catch (error) {
      compactions.failed.push(String(error))
      throw error
    }
  }
  const providers = []
  const errors = []
  const connect = (doc) => {
    const who = providers.length < EDITORS ? `editor ${providers.length}` : "late joiner"
    const provider = new YjsProvider({
      doc,
      baseUrl: `${yjsServer.url}/v1/yjs/${SERVICE}`,
      docId: args.doc,
      liveMode: args.live,
    })
    provider.on("error", (error) => errors.push(`${who}: ${error}`))
    providers.push(provider)
    return provider
  }
  const describe = () =>
    JSON.stringify({
      errors,
      compactions,
      docs: providers.map((p) => {
        const { text, map } = snapshotOf(p.doc)
        return { synced: p.synced, textLength: text.length, mapSize: Object.keys(map).length }
      }),
    })
  try {
    const docs = Array.from({ length: EDITORS }, () => new Y.Doc())
    const editors = docs.map(connect)
    await waitFor(() => editors.every((p) => p.synced), 15, describe)

    // Each editor inserts its tokens at positions that depend on what it has seen so far, so
    // the edits interleave with the others' and with the compactions they trigger.
    const tokens = []
    await Promise.all(
      docs.map(async (doc, e) => {
        const text = doc.getText("text")
        for (let r = 0; r < rounds; r++) {
          const token = `<${e}.${r}>`
          tokens.push(token)
          // Between two tokens, never inside one, so that every token stays whole.
          const current = text.toString()
          const boundaries = [0]
          for (let i = 1; i <= current.length; i++) if (current[i - 1] === ">") boundaries.push(i)
          doc.transact(() => {
            text.insert(boundaries[(r * 7 + e * 13) % boundaries.length], token)
            doc.getMap("map").set(`${e}.${r}`, r)
          })
          await sleep(5 + ((r + e) % 4) * 5)
        }
      }),
    )
    await Promise.all(editors.map((p) => p.flush()))
    const converged = (expected) => () => {
      const states = providers.map((p) => snapshotOf(p.doc))
      return states.every((s) => s.text === states[0].text && Object.keys(s.map).length === expected)
    }
    await waitFor(converged(EDITORS * rounds), 20, describe)

    // A compaction of everything so far, then a few edits after it: a late joiner needs both
    // the snapshot and the updates stream from the snapshot's offset on.
    const state = () => yjsServer.getDocumentState(SERVICE, args.doc)
    await waitFor(() => !state()?.compacting, 15, describe)
    // A failure is in `compactions` already; the late joiner is worth trying regardless.
    // Only when something was written since the last snapshot: the package's compactor run
    // twice at one offset writes the same snapshot stream again and then deletes it as the
    // old one, and the late joiner finds no snapshot (seen on the reference server and ours).
    if (state()?.updatesSizeBytes > 0) {
      await compactor.triggerCompaction(SERVICE, args.doc).catch(() => {})
    }
    for (let r = 0; r < 3; r++) {
      const token = `<after.${r}>`
      tokens.push(token)
      docs[r % EDITORS].transact(() => {
        docs[r % EDITORS].getText("text").insert(0, token)
        docs[r % EDITORS].getMap("map").set(`after.${r}`, r)
      })
      await editors[r % EDITORS].flush()
    }
    await waitFor(converged(EDITORS * rounds + 3), 20, describe)

    const discovery = await fetch(`${yjsServer.url}/v1/yjs/${SERVICE}/docs/${args.doc}?offset=snapshot`, {
      redirect: "manual",
    })
    await discovery.arrayBuffer()
    const late = connect(new Y.Doc())
    const target = snapshotOf(docs[0])
    // Whether the late joiner reaches the editors' document is the test's to judge: after
    // the wait it is reported as it stands.
    await waitFor(() => late.synced && snapshotOf(late.doc).text === target.text, 20, () => "")
      .catch(() => {})
    await waitFor(() => !state()?.compacting, 15, describe)
    return {
      editors: docs.map(snapshotOf),
      late: { synced: late.synced, ...snapshotOf(late.doc) },
      tokens,
      compactions,
      snapshotLocation: discovery.headers.get("location"),
      errors,
    }
  } finally {
    for (const provider of providers) provider.destroy()
    await yjsServer.stop()
  }
}

await run(main)
