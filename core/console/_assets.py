"""The console's static files: read once from the package, each asset named by a fingerprint
of its content so that a cache may keep it for a year, and the page that names them kept by
nobody (a new version is seen on the next load).

    {console}/                       index.html, `Cache-Control: no-cache`
    {console}/assets/app.<hash>.js   an asset, `Cache-Control: public, max-age=31536000, immutable`

Every answer carries the console's own Content-Security-Policy: styles from this origin, requests
to this origin only, and no page may frame it. Scripts run only where the page's own tags name
them, by a nonce drawn for each load of the page: `'self'` would also admit a stream of the same
origin that a writer gave a JavaScript content type (`<script src="/v1/stream/x.js">`). Other
answers run no script at all.
"""

from __future__ import annotations

import hashlib
import mimetypes
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import PurePosixPath

_POLICY = (
    "default-src 'none'; script-src {scripts}; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
CSP = _POLICY.format(scripts="'none'")  # every answer but the page


def page_csp(nonce: str) -> str:
    """The page's policy: the scripts its tags name with `nonce`, and no other."""
    return _POLICY.format(scripts=f"'nonce-{nonce}'")


SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Resource-Policy": "same-origin",
}
# The origin marks a response a browser would render as a download unless it says how it is
# to be shown (stream content is anyone's): the console's own files are shown.
SHOWN = {"Content-Disposition": "inline"}
PAGE_CACHE = "no-cache"
ASSET_CACHE = "public, max-age=31536000, immutable"
_REFERENCE = re.compile(r'(?<=["/])assets/([A-Za-z0-9_-]+)\.(js|css|svg|png)(?=")')
_FINGERPRINT = 12


@dataclass(frozen=True)
class Asset:
    body: bytes
    media_type: str


class ConsoleAssets:
    """The page and its assets, fingerprinted (read from the package once, at start)."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self._assets: dict[str, Asset] = {}
        names: dict[str, str] = {}
        for name, body in files.items():
            if name == "index.html":
                continue
            stem, dot, extension = name.rpartition(".")
            digest = hashlib.sha256(body).hexdigest()[:_FINGERPRINT]
            fingerprinted = f"{stem}.{digest}{dot}{extension}"
            names[name] = fingerprinted
            media_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
            if media_type.startswith("text/") or media_type.endswith("javascript"):
                media_type += "; charset=utf-8"
            self._assets[fingerprinted] = Asset(body, media_type)
        page = files["index.html"].decode()

        def fingerprint(match: re.Match[str]) -> str:
            name = f"{match.group(1)}.{match.group(2)}"
            if name not in names:
                raise ValueError(f"index.html names assets/{name}, which is not shipped")
            return "assets/" + names[name]

        self.page = _REFERENCE.sub(fingerprint, page).encode()
        if self.page.count(b"<script ") != self.page.count(b"<script defer src="):
            raise ValueError("index.html's scripts are each `<script defer src=...>`")

    def page_with(self, nonce: str) -> bytes:
        """The page, each of its script tags carrying `nonce` (see `page_csp`)."""
        return self.page.replace(b"<script ", f'<script nonce="{nonce}" '.encode())

    @classmethod
    def packaged(cls) -> ConsoleAssets:
        root = resources.files(__package__).joinpath("static")
        files = {"index.html": root.joinpath("index.html").read_bytes()}
        for entry in root.joinpath("assets").iterdir():
            if entry.is_file() and not entry.name.startswith("."):
                files[entry.name] = entry.read_bytes()
        return cls(files)

    def asset(self, name: str) -> Asset | None:
        """The asset of that fingerprinted name (None: no such file, or another version's)."""
        if PurePosixPath(name).name != name:
            return None
        return self._assets.get(name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._assets))
