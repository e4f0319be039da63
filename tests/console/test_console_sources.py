"""The console's sources as shipped (no build step): no construct that parses HTML from a string
or evaluates code, no inline script or style in the page, nothing fetched from elsewhere. The
browser tests show the page runs under its CSP; this says why nothing in it could go around
textContent."""

from __future__ import annotations

import re

from support import ROOT

STATIC = ROOT / "core" / "console" / "static"
SCRIPTS = sorted((STATIC / "assets").glob("*.js"))
# Sinks that parse a string as HTML or run it as code, and style attributes (refused by the
# CSP's style-src 'self'; CSSOM properties would be allowed, but the page uses classes).
_FORBIDDEN = re.compile(
    r"\.innerHTML|\.outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function\b"
    r"|setTimeout\(\s*['\"`]|setInterval\(\s*['\"`]|createContextualFragment|DOMParser"
    r"|setAttribute\(\s*['\"]style|setAttribute\(\s*['\"]on|\.style\.|javascript:"
    r"|\bEventSource\b|localStorage|https?://"
)


def _code(text: str) -> str:
    """The script without its comments (which name the things it does not do)."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(re.sub(r"(^|\s)//.*$", "", line) for line in text.splitlines())


def test_the_scripts_use_no_html_sink_eval_or_style_attribute() -> None:
    assert {path.name for path in SCRIPTS} == {
        "api.js",
        "console.js",
        "dom.js",
        "plots.js",
        "tail.js",
    }
    for path in SCRIPTS:
        code = _code(path.read_text())
        found = [match.group(0) for match in _FORBIDDEN.finditer(code)]
        # The one namespace URI createElementNS needs is not a fetch.
        found = [f for f in found if f != "http://"] if "www.w3.org/2000/svg" in code else found
        assert found == [], f"{path.name}: {found}"


def test_the_page_has_no_inline_script_or_style_and_loads_only_its_assets() -> None:
    page = (STATIC / "index.html").read_text()
    assert "<style" not in page and " style=" not in page
    assert not re.search(r"\son[a-z]+=", page)
    scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", page, flags=re.S)
    assert scripts and all(body.strip() == "" for _, body in scripts)
    sources = re.findall(r'(?:src|href)="([^"#]+)"', page)
    assert all(s.startswith("assets/") or s == "data:," for s in sources), sources
    named = {s.removeprefix("assets/") for s in sources if s.startswith("assets/")}
    assert named == {path.name for path in SCRIPTS} | {"console.css"}
