"""A local Spark session with this source registered: for `dsaws export` on one machine, the
benchmark and the tests."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any


def local_session(
    app_name: str, master: str = "local[*]", conf: Mapping[str, str] | None = None
) -> Any:
    # Spark's Python workers must run this interpreter (where the project is installed), and
    # bind to loopback rather than whatever the host name resolves to.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from .source import DurableStreamsDataSource

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(DurableStreamsDataSource)
    return session
