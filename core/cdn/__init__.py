"""The CDN in front of the server: one policy for CloudFront and the local nginx stand-in
(which `infra.local_cdn` installs and runs)."""

from .policy import DEFAULT_POLICY, KEY_QUERY_PARAMETERS, METHOD_KEY_HEADER, CdnPolicy

__all__ = ["DEFAULT_POLICY", "KEY_QUERY_PARAMETERS", "METHOD_KEY_HEADER", "CdnPolicy"]
