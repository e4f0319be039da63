"""The Spark pipeline: the `durable_streams` PySpark data source (install with the `spark`
extra so that Spark's Python workers can import it)."""

from ._plan import DataLoss, OptionError, Origin, ReadOptions, StreamSlice, StreamState, plan_slices
from ._session import local_session
from .source import DurableStreamsDataSource

__all__ = [
    "DataLoss",
    "DurableStreamsDataSource",
    "OptionError",
    "Origin",
    "ReadOptions",
    "StreamSlice",
    "StreamState",
    "local_session",
    "plan_slices",
    "register",
]


def register(spark: object) -> None:
    """Make `spark.read.format("durable_streams")` available in this session."""
    spark.dataSource.register(DurableStreamsDataSource)  # type: ignore[attr-defined]
