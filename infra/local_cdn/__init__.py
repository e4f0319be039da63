"""The local CDN: Debian's nginx unpacked for the user (`dsaws install-nginx`) and run on
loopback in front of the server (`dsaws serve --cdn-port`, the CDN tests and benchmarks), with
a configuration generated from the same `CdnPolicy` (`core.cdn`) as CloudFront's."""

from ._conf import NginxSite, render_nginx_conf
from ._install import InstallFailed, install_nginx, unpack_nginx_package
from ._server import INSTALL_HINT, LocalCdn, NginxNotFound, find_nginx

__all__ = [
    "INSTALL_HINT",
    "InstallFailed",
    "LocalCdn",
    "NginxNotFound",
    "NginxSite",
    "find_nginx",
    "install_nginx",
    "render_nginx_conf",
    "unpack_nginx_package",
]
