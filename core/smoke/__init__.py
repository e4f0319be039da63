"""`dsaws smoke`: checks a deployment end to end as a user would."""

from ._run import Check, SmokeOptions, format_report, run_smoke, stream_root
from ._verdicts import Outcome

__all__ = ["Check", "Outcome", "SmokeOptions", "format_report", "run_smoke", "stream_root"]
