"""The CDN in front of the server: one policy for CloudFront and the local nginx stand-in."""

from .install import InstallFailed, install_nginx, unpack_nginx_package
from .local import INSTALL_HINT, LocalCdn, NginxNotFound, find_nginx
from .nginx import NginxSite, render_nginx_conf
from .policy import DEFAULT_POLICY, KEY_QUERY_PARAMETERS, METHOD_KEY_HEADER, CdnPolicy

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
