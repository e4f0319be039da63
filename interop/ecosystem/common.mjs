// What the ecosystem drivers share: their command lines, their one JSON answer, and bounds on
// every wait, so that a server that never answers fails a test rather than hanging it.

import { parseArgs } from "node:util"

// Standard output carries the one JSON answer only; the packages log progress with console.log
// (YjsServer's compactor does), which would corrupt it.
console.log = (...parts) => console.error(...parts)
console.info = console.log

export function options(spec) {
  return parseArgs({ options: spec, allowPositionals: false, strict: true }).values
}

export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

export class TimedOut extends Error {}

// Resolves once `check()` is true, polling; rejects with TimedOut (and `describe()`'s account
// of where things stand) after `seconds`.
export async function waitFor(check, seconds, describe) {
  const end = performance.now() + seconds * 1000
  while (!(await check())) {
    if (performance.now() > end) throw new TimedOut(`timed out after ${seconds} s: ${describe()}`)
    await sleep(20)
  }
}

export async function within(promise, seconds, describe) {
  // Losing the race must not leave the promise's later rejection unhandled (Node would exit).
  promise.catch(() => {})
  let timer
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(
      () => reject(new TimedOut(`timed out after ${seconds} s: ${describe()}`)),
      seconds * 1000,
    )
  })
  try {
    return await Promise.race([promise, timeout])
  } finally {
    clearTimeout(timer)
  }
}

// Runs the driver's `main`, prints its answer and exits: open live reads and keep-alive sockets
// would otherwise keep Node running after the work is done.
export async function run(main) {
  try {
    const answer = await main()
    // Exiting before a large answer has drained into a pipe would cut it short.
    process.stdout.write(JSON.stringify(answer) + "\n", () => process.exit(0))
  } catch (error) {
    process.stderr.write(`${error?.stack ?? error}\n`)
    process.exit(1)
  }
}
