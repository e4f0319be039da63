"""One local Spark session for every Spark test in the run (its JVM takes seconds to start),
and a `dsaws serve` for them to read. The environment is set when this file is imported, before
any session exists: Spark's Python workers must run this interpreter and import this tree."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from spark_support import Served
from support import ROOT, ServerProcess

from durable_streams_aws.core.runtime import use_emulator_credentials
from durable_streams_aws.infra.emulator import Emulator

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
use_emulator_credentials()  # for the executors that read the store directly


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from durable_streams_aws.pipeline import local_session

    work: Path = tmp_path_factory.mktemp("spark")
    conf = {
        "spark.driver.memory": "1g",
        "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.warehouse.dir": str(work / "warehouse"),
        "spark.local.dir": str(work / "local"),
        "spark.sql.session.timeZone": "UTC",
    }
    session = local_session("durable-streams-aws tests", "local[2]", conf)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def served(emulator: Emulator) -> Iterator[Served]:
    suffix = uuid.uuid4().hex[:12]
    table, bucket = f"t-{suffix}", f"b-{suffix}"
    env = {
        "AWS_ENDPOINT_URL": emulator.endpoint,
        "DS_TABLE": table,
        "DS_BUCKET": bucket,
        "DS_LISTING": "true",  # the prefix option over HTTP
    }
    with ServerProcess("--aws", "--long-poll-timeout", "1", env=env) as server:
        yield Served(f"{server.base_url}/v1/stream", table, bucket, emulator.endpoint)


@pytest.fixture(scope="module")
def streams_url(served: Served) -> str:
    return served.url
