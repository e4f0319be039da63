// A resumable chat generation through @durable-streams/aisdk-transport, with the AI SDK's mock
// language model: a small chat app (POST /api/chat writes the generation's UI message chunks
// to a durable stream with toDurableStreamResponse; GET /api/chat/:id/stream points at it)
// and the transport's client, which disconnects mid-generation and reconnects.
//
//   node aisdk.mjs --streams STREAMS_BASE_URL --chat ID [--deltas N] [--delay-ms MS]
//
// Prints {"written": chunks the app wrote, "first": what the reader had before it
// disconnected, "resumed": what the reconnected reader read, "writtenAtDisconnect",
// "finishedAtReconnect", "text": the assembled assistant message's text, "expectedText"}.

import { createServer } from "node:http"
import { createDurableChatTransport, toDurableStreamResponse } from "@durable-streams/aisdk-transport"
import { readUIMessageStream, streamText } from "ai"
import { MockLanguageModelV3, simulateReadableStream } from "ai/test"
import { options, run, within } from "./common.mjs"

const args = options({
  streams: { type: "string" },
  chat: { type: "string" },
  deltas: { type: "string", default: "60" },
  "delay-ms": { type: "string", default: "25" },
  "disconnect-after": { type: "string", default: "10" },
})
const deltas = Array.from({ length: Number(args.deltas) }, (_, i) => `word${i} `)

function mockModel() {
  return new MockLanguageModelV3({
    doStream: async () => ({
      stream: simulateReadableStream({
        chunkDelayInMs: Number(args["delay-ms"]),
        chunks: [
          { type: "stream-start", warnings: [] },
          { type: "text-start", id: "t" },
          ...deltas.map((delta) => ({ type: "text-delta", id: "t", delta })),
          { type: "text-end", id: "t" },
          {
            type: "finish",
            finishReason: { unified: "stop", raw: "stop" },
            usage: {
              inputTokens: { total: 3, noCache: 3, cacheRead: 0, cacheWrite: 0 },
              outputTokens: { total: deltas.length, text: deltas.length, reasoning: 0 },
            },
          },
        ],
      }),
    }),
  })
}

// The chat app: one generation per POST, each into a stream of its own; the chunks it hands
// to the transport are recorded on their way.
function chatApp() {
  const written = []
  const active = new Map()
  let finished = false
  let generations = 0
  async function* recorded(source) {
    for await (const chunk of source) {
      written.push(chunk)
      yield chunk
    }
    finished = true
  }
  const server = createServer(async (req, res) => {
    try {
      const url = new URL(req.url, "http://app")
      const resume = url.pathname.match(/^\/api\/chat\/([^/]+)\/stream$/)
      if (req.method === "POST" && url.pathname === "/api/chat") {
        const chunks = []
        for await (const chunk of req) chunks.push(chunk)
        const { id } = JSON.parse(Buffer.concat(chunks).toString())
        generations += 1
        const streamUrl = `${args.streams}/aisdk/${id}/${generations}`
        active.set(id, streamUrl)
        const result = streamText({ model: mockModel(), prompt: "Count for me." })
        const response = await toDurableStreamResponse({
          source: recorded(result.toUIMessageStream()),
          stream: { writeUrl: streamUrl },
        })
        res.writeHead(response.status, Object.fromEntries(response.headers))
        res.end(Buffer.from(await response.arrayBuffer()))
      } else if (req.method === "GET" && resume) {
        const streamUrl = active.get(resume[1])
        if (streamUrl === undefined) {
          res.writeHead(204).end()
        } else {
          res.writeHead(200, { "content-type": "application/json", location: streamUrl })
          res.end(JSON.stringify({ streamUrl }))
        }
      } else {
        res.writeHead(404).end()
      }
    } catch (error) {
      console.error(error)
      res.writeHead(500).end(String(error))
    }
  })
  return { server, written, finished: () => finished }
}

async function main() {
  const app = chatApp()
  await new Promise((resolve) => app.server.listen(0, "127.0.0.1", resolve))
  const api = `http://127.0.0.1:${app.server.address().port}/api/chat`
  const transport = createDurableChatTransport({ api })
  const describe = () => `${app.written.length} chunks written`
  try {
    const disconnect = new AbortController()
    const first = []
    const reading = await transport.sendMessages({
      trigger: "submit-message",
      chatId: args.chat,
      messageId: undefined,
      messages: [{ id: "u1", role: "user", parts: [{ type: "text", text: "Count for me." }] }],
      abortSignal: disconnect.signal,
    })
    const reader = reading.getReader()
    const wanted = Number(args["disconnect-after"])
    await within(
      (async () => {
        while (first.filter((c) => c.type === "text-delta").length < wanted) {
          const { done, value } = await reader.read()
          if (done) break
          first.push(value)
        }
      })(),
      20,
      describe,
    )
    // The reader goes away mid-generation, as a closed browser tab would.
    disconnect.abort()
    await reader.cancel().catch(() => {})
    const writtenAtDisconnect = app.written.length

    const resumed = []
    const resuming = await transport.reconnectToStream({ chatId: args.chat })
    const finishedAtReconnect = app.finished()
    if (resuming === null) throw new Error("the app had no generation to resume")
    const [forMessage, forChunks] = resuming.tee()
    const collect = async () => {
      for await (const chunk of forChunks) resumed.push(chunk)
    }
    const assemble = async () => {
      let message
      for await (const partial of readUIMessageStream({ stream: forMessage })) message = partial
      return message
    }
    const [, message] = await within(Promise.all([collect(), assemble()]), 30, describe)
    const text = (message?.parts ?? [])
      .filter((part) => part.type === "text")
      .map((part) => part.text)
      .join("")
    return {
      written: app.written,
      first,
      resumed,
      writtenAtDisconnect,
      finishedAtReconnect,
      text,
      expectedText: deltas.join(""),
    }
  } finally {
    app.server.closeAllConnections()
    app.server.close()
  }
}

await run(main)
