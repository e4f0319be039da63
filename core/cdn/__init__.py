"""The CDN in front of the server: one policy for CloudFront and the local nginx stand-in."""

from .._lazy import lazy_exports
from .policy import DEFAULT_POLICY, KEY_QUERY_PARAMETERS, METHOD_KEY_HEADER, CdnPolicy

# The local CDN (nginx) is loaded on first use: the server itself needs only the policy, and the
# API function imports it on every cold start.
_LAZY = {
    "InstallFailed": "install",
    "install_nginx": "install",
    "unpack_nginx_package": "install",
    "INSTALL_HINT": "local",
    "LocalCdn": "local",
    "NginxNotFound": "local",
    "find_nginx": "local",
    "NginxSite": "nginx",
    "render_nginx_conf": "nginx",
}
__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "DEFAULT_POLICY",
    "INSTALL_HINT",
    "KEY_QUERY_PARAMETERS",
    "METHOD_KEY_HEADER",
    "CdnPolicy",
    "InstallFailed",
    "LocalCdn",
    "NginxNotFound",
    "NginxSite",
    "find_nginx",
    "install_nginx",
    "render_nginx_conf",
    "unpack_nginx_package",
]
