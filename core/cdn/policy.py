"""The CDN's behaviour, stated once: the CloudFront distribution in `template.yaml` and the local
nginx stand-in are both checked against (nginx: generated from) these values.

Why each value is what it is, in short (docs/cdn.md has the long form):

- The cache key is the path, the read parameters the protocol uses, the signed-URL parameters,
  whether the request is a HEAD, the Authorization header and the Origin header; nothing else.
  Cookies and other headers would only split the cache. Parameter order is normalized first
  (CloudFront: the viewer-request function; nginx: the key names each parameter).
- Authorization is in the key because CloudFront forwards it on a GET only if it is, and so that
  no response is ever handed to a request with other credentials (token reads are `private`
  and never stored anyway; public readers send none and share one entry). Origin is in the key
  because a deployment that lists its CORS origins answers each with its own
  Access-Control-Allow-Origin, and CloudFront ignores `Vary`.
- Minimum TTL 0 so the origin's `no-store` is obeyed; default TTL 0 so a response without a
  Cache-Control (which our origin never sends, but AWS's own error pages may) is not cached;
  maximum TTL an hour, the longest a misconfigured origin could pin a response at the edge.
- No error is cached by the CDN on its own account: the origin marks every error `no-store`,
  and CloudFront would otherwise cache 400, 403, 404, 405, 414, 416 and 5xx for 10 s.
- The origin is given longer than the function's own timeout, so CloudFront never gives up on
  (and retries) a long-poll that the function will still answer; idle connections to the
  origin are kept for a minute, across the gaps between one long-poll cycle and the next.
- A request that finds another one for the same key in flight waits for it (collapsing) for as
  long as that one may take, the origin timeout, rather than going to the origin itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..auth.signed_urls import SIGNED_URL_PARAMETERS
from ..protocol.query import READ_PARAMETERS

# The read parameters in the cache key, a signed read URL's (each signed URL is its own entry,
# shared by every reader handed it), and the listing's prefix: listings are never stored, but
# a CDN collapses identical requests in flight, and two listings of different prefixes must
# not be one request.
KEY_QUERY_PARAMETERS: tuple[str, ...] = tuple(
    sorted((*READ_PARAMETERS, *SIGNED_URL_PARAMETERS, "prefix"))
)
# Set by the viewer-request function on HEAD requests only (and removed from others), so a HEAD
# is never answered from a cached GET: HEAD describes the tail, a GET a range.
METHOD_KEY_HEADER = "x-ds-method"
KEY_HEADERS: tuple[str, ...] = (METHOD_KEY_HEADER, "authorization", "origin")
# CloudFront caches these statuses for 10 s unless told otherwise.
CLOUDFRONT_CACHED_ERRORS: tuple[int, ...] = (400, 403, 404, 405, 414, 416, 500, 501, 502, 503, 504)


@dataclass(frozen=True)
class CdnPolicy:
    key_query_parameters: tuple[str, ...] = KEY_QUERY_PARAMETERS
    key_headers: tuple[str, ...] = KEY_HEADERS
    min_ttl: int = 0
    default_ttl: int = 0
    max_ttl: int = 3600
    error_caching_ttls: dict[int, int] = field(
        default_factory=lambda: dict.fromkeys(CLOUDFRONT_CACHED_ERRORS, 0)
    )
    compress: bool = True
    function_timeout: int = 30  # the ApiFunction's Timeout in template.yaml
    origin_keepalive_timeout: int = 60

    @property
    def origin_read_timeout(self) -> int:
        """Seconds the CDN waits for the origin: beyond the function's own timeout."""
        return self.function_timeout + 5

    @property
    def collapse_wait(self) -> int:
        """Seconds a request waits for an in-flight request with the same key."""
        return self.origin_read_timeout


DEFAULT_POLICY = CdnPolicy()
