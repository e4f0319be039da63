"""Reading the vitest JSON report of the official conformance suite."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Summary:
    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: int = 0

    @property
    def active(self) -> int:
        return len(self.passed) + len(self.failed)


def needs_sse_or_forks(groups: list[str], title: str) -> bool:
    """The tests outside the core issue's scope: SSE and forks."""
    return (
        groups[0] == "SSE Mode"
        or groups[0].startswith("Fork - ")
        or (len(groups) > 1 and groups[1] == "SSE with Stream Closure")
        or "SSE" in title
    )


def summarize(report: Path, *, core_only: bool = False) -> Summary:
    summary = Summary()
    for test_file in json.loads(report.read_text())["testResults"]:
        for test in test_file["assertionResults"]:
            groups, title = test["ancestorTitles"], test["title"]
            if core_only and needs_sse_or_forks(groups, title):
                continue
            name = " > ".join([*groups, title])
            if test["status"] == "passed":
                summary.passed.append(name)
            elif test["status"] == "failed":
                message = (test.get("failureMessages") or [""])[0].splitlines()[0:1]
                summary.failed.append(f"{name}: {' '.join(message)[:300]}")
            else:
                summary.skipped += 1
    return summary
