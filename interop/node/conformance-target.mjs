// Points the upstream client conformance runner at a server of our choosing.
//
// The runner always starts its own reference server (`DurableStreamTestServer` from
// `@durable-streams/server`). Loaded with `node --import`, this hook answers that import with
// a stand-in whose `url` is DS_CONFORMANCE_URL (our server, or the fault proxy in front of
// it) and whose start and stop do nothing. Without DS_CONFORMANCE_URL nothing is changed.
import { register } from "node:module"

if (process.env.DS_CONFORMANCE_URL) {
  const standIn = `data:text/javascript,${encodeURIComponent(`
    export class DurableStreamTestServer {
      constructor() {}
      get url() { return ${JSON.stringify(process.env.DS_CONFORMANCE_URL)} }
      async start() { return this.url }
      async stop() {}
    }
  `)}`
  const hooks = `
    export async function resolve(specifier, context, next) {
      if (specifier === "@durable-streams/server") {
        return { url: ${JSON.stringify(standIn)}, shortCircuit: true }
      }
      return next(specifier, context)
    }
  `
  register(`data:text/javascript,${encodeURIComponent(hooks)}`)
}
