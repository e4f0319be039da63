// Adds the headers in CONFORMANCE_HEADERS (a JSON object) to every request the suite makes to
// the server under test: how it runs against a server that requires a token (or the CDN's
// origin header). Requests to other hosts are left alone.
const configured = JSON.parse(process.env.CONFORMANCE_HEADERS || "{}");
const target = process.env.CONFORMANCE_TEST_URL;

if (Object.keys(configured).length > 0 && target) {
  const original = globalThis.fetch;
  globalThis.fetch = (input, init = {}) => {
    const url = typeof input === "string" || input instanceof URL ? String(input) : input.url;
    if (!url.startsWith(target)) return original(input, init);
    const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
    for (const [name, value] of Object.entries(configured)) {
      if (!headers.has(name)) headers.set(name, value);
    }
    return original(input, { ...init, headers });
  };
}
