"""CPU seconds used by the processes of a run, grouped by what they are (Linux `/proc`): a
benchmark takes a reading before and after a run and reports where its time went.

A process's reading counts its own time and that of the children it has reaped, so a worker
that exits between the readings still counts (in its parent's); one that starts and exits
between them counts in its parent's too. Living children are read on their own."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: str) -> tuple[int, float] | None:
    """The parent pid and the CPU seconds (own and reaped children's) of one process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after the command, which may hold spaces
    utime, stime, cutime, cstime = (int(value) for value in fields[11:15])
    return int(fields[1]), (utime + stime + cutime + cstime) / _TICKS


def _command(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def cpu_by_role(role_of: Callable[[str], str | None]) -> Counter[str]:
    """CPU seconds so far of every process `role_of` names a role for (given its command
    line), and of their descendants (in their ancestor's role unless they have one)."""
    stats = {pid: _stat(pid) for pid in os.listdir("/proc") if pid.isdigit()}
    known = {pid: stat for pid, stat in stats.items() if stat is not None}
    roles: dict[str, str | None] = {}

    def role(pid: str) -> str | None:
        if pid not in roles:
            roles[pid] = None  # a cycle or a vanished parent ends the walk
            own = role_of(_command(pid))
            parent = str(known[pid][0]) if pid in known else None
            roles[pid] = own or (role(parent) if parent in known else None)
        return roles[pid]

    used: Counter[str] = Counter()
    for pid, (_, seconds) in known.items():
        name = role(pid)
        if name is not None:
            used[name] += seconds
    return used


def spent(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """CPU seconds by role between two readings."""
    return {role: max(after[role] - before.get(role, 0.0), 0.0) for role in after}
