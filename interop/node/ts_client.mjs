// A small command line over the upstream TypeScript client (@durable-streams/client), so that
// Python tests and benchmarks can drive it against our server. Every command prints one JSON
// object on standard output; failures go to standard error with a non-zero exit.
//
//   write URL CONTENT_TYPE PAYLOADS [--close]   create the stream, append each payload in turn
//        PAYLOADS: a JSON array of {"text": s} | {"base64": s} | {"json": v}
//   produce URL PRODUCER_ID COUNT SIZE [--json] [--close] [--epoch N]
//        append COUNT messages of about SIZE bytes through an IdempotentProducer, flush (or
//        close); prints the time taken. Message i is `message(i, SIZE)` below.
//   read URL LIVE                               read from the start; LIVE is false, long-poll
//        or sse. Live reads go on until the stream is closed. Prints {"json": [...]} for JSON
//        streams, {"base64": s} otherwise, and {"closed": bool}; writes "ready" on standard
//        error once the first answer has come (for a test to start writing after that).

import { DurableStream, IdempotentProducer, stream } from "@durable-streams/client"

const [command, ...args] = process.argv.slice(2)

function option(name, fallback) {
  const at = args.indexOf(name)
  return at === -1 ? fallback : args[at + 1]
}

// Message i of a produced run: its number, then padding up to `size` bytes. JSON messages are
// objects {"n": i, "pad": "..."} of about that size.
function message(i, size, json) {
  if (json) {
    return JSON.stringify({ n: i, pad: "x".repeat(Math.max(0, size - 20)) })
  }
  const head = `${i}:`
  return head + "x".repeat(Math.max(0, size - head.length))
}

function payloadBody(payload, contentType) {
  if ("json" in payload) return JSON.stringify(payload.json)
  if ("base64" in payload) return new Uint8Array(Buffer.from(payload.base64, "base64"))
  return payload.text
}

async function write(url, contentType, payloads) {
  const handle = await DurableStream.create({ url, contentType })
  for (const payload of JSON.parse(payloads)) {
    await handle.append(payloadBody(payload, contentType))
  }
  if (args.includes("--close")) await handle.close()
  return { appended: JSON.parse(payloads).length }
}

async function produce(url, producerId, count, size) {
  const json = args.includes("--json")
  const handle = await DurableStream.connect({ url })
  const errors = []
  const producer = new IdempotentProducer(handle, producerId, {
    epoch: Number(option("--epoch", "0")),
    onError: (error) => errors.push(String(error)),
  })
  const started = performance.now()
  let bytes = 0
  for (let i = 0; i < count; i++) {
    const body = message(i, size, json)
    bytes += Buffer.byteLength(body)
    producer.append(body)
  }
  let offset = null
  if (args.includes("--close")) {
    offset = (await producer.close()).finalOffset
  } else {
    await producer.flush()
  }
  const seconds = (performance.now() - started) / 1000
  return { messages: count, bytes, seconds, errors, offset }
}

async function read(url, live) {
  const mode = live === "false" ? false : live
  const response = await stream({ url, offset: "-1", live: mode })
  process.stderr.write("ready\n")
  const json = (response.contentType ?? "").split(";")[0].trim() === "application/json"
  if (json) {
    const items = []
    for await (const item of response.jsonStream()) items.push(item)
    return { json: items, closed: response.streamClosed }
  }
  const chunks = []
  for await (const chunk of response.bodyStream()) chunks.push(Buffer.from(chunk))
  return { base64: Buffer.concat(chunks).toString("base64"), closed: response.streamClosed }
}

const commands = {
  write: () => write(args[0], args[1], args[2]),
  produce: () => produce(args[0], args[1], Number(args[2]), Number(args[3])),
  read: () => read(args[0], args[1]),
}

try {
  if (!(command in commands)) throw new Error(`unknown command ${command}`)
  const result = await commands[command]()
  process.stdout.write(JSON.stringify(result) + "\n")
} catch (error) {
  process.stderr.write(`${error?.stack ?? error}\n`)
  process.exit(1)
}
