"""The SparkSession of the pipeline and the lazy import of pyspark."""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import re
import sys
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["INSTALL_HINT", "build_spark", "parse_time", "require_pyspark"]

INSTALL_HINT = "pip install 'qmf-async[pipeline]'"

_LOCAL_MASTER = re.compile(r"^local(?:\[(\*|\d+)(?:,\s*\d+)?\])?$")


def require_pyspark() -> None:
    """Raise a clear ImportError when pyspark (the ``pipeline`` extra) is missing."""
    try:
        import pyspark  # noqa: F401  (only whether it imports)
    except ImportError as exc:
        raise ImportError(
            f"qmf_async.tools.pipeline needs pyspark (and pyarrow, matplotlib): {INSTALL_HINT}"
        ) from exc


def _local_cores(master: str) -> int | None:
    """Cores of a ``local``/``local[N]``/``local[*]`` master; None for a cluster."""
    match = _LOCAL_MASTER.match(master.strip())
    if match is None:
        return None
    cores = match.group(1)
    if cores is None:
        return 1
    if cores == "*":
        return os.cpu_count() or 1
    return max(1, int(cores))


@contextlib.contextmanager
def _launch_env(values: Mapping[str, str]) -> Iterator[None]:
    """Environment variables seen by the JVM that pyspark launches, then restored."""
    saved = {key: os.environ.get(key) for key in values}
    for key, value in values.items():
        if key not in os.environ:
            os.environ[key] = value
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)


#: lets adaptive execution coalesce the shuffles of persisted (cached) plans too
_CACHED_AQE = "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning"


def build_spark(master: str = "local[*]", app_name: str = "qmf-async-pipeline",
                bind_host: str = "127.0.0.1", *, shuffle_partitions: int | None = None,
                driver_memory: str | None = None,
                config: Mapping[str, str] | None = None,
                remote: str | None = None) -> SparkSession:
    """Create (or get) the SparkSession of the pipeline.

    With ``remote`` (``sc://HOST:PORT``) it is a Spark Connect session to that server
    (the client needs ``pip install 'qmf-async[connect]'``); ``master``, ``bind_host``
    and ``driver_memory`` are the server's business then, and the session settings
    below (UTC, shuffle partitions, ``config``) are sent to it.

    * the driver binds to ``bind_host`` (``spark.driver.bindAddress`` and
      ``spark.driver.host``; 127.0.0.1 by default: give the address the executors reach
      when ``master`` is a cluster, ``spark://HOST:PORT``);
    * nothing is downloaded at run time (no ``spark.jars.packages``): the jars of the
      pyspark package are all it uses;
    * in local mode the shuffles are small (``spark.sql.shuffle.partitions`` = 2 x
      cores unless ``shuffle_partitions`` says otherwise); the web UI is off;
    * timestamps and time windows are in UTC (``spark.sql.session.timeZone``);
    * adaptive execution may also re-partition the tables the pipeline persists
      (``spark.sql.optimizer.canChangeCachedPlanOutputPartitioning``): without it a
      cluster's or a Spark Connect server's 200 shuffle partitions stay in every job
      downstream of them (5,000 tasks for a small dataset instead of about 100; the
      rate benchmark's small dataset on a Connect server took 95 s instead of 44 s).

    ``driver_memory`` (e.g. ``"4g"``) only takes effect when this call starts the JVM;
    ``config`` adds or overrides Spark settings.
    """
    require_pyspark()
    from pyspark.sql import SparkSession

    if remote is not None:
        return _connect(remote, shuffle_partitions, config)
    cores = _local_cores(master)
    builder = (
        SparkSession.builder.master(master).appName(app_name)
        .config("spark.driver.bindAddress", bind_host)
        .config("spark.driver.host", bind_host)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.adaptive.enabled", "true")
        .config(_CACHED_AQE, "true")
    )
    if shuffle_partitions is None and cores is not None:
        shuffle_partitions = max(2, 2 * cores)
    if shuffle_partitions is not None:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    if driver_memory:
        builder = builder.config("spark.driver.memory", driver_memory)
    for key, value in (config or {}).items():
        builder = builder.config(key, value)
    env = {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    if cores is not None:
        # local mode: every Spark service of this process on the loopback/bind address
        env["SPARK_LOCAL_IP"] = bind_host
    with _launch_env(env):
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _connect(remote: str, shuffle_partitions: int | None,
             config: Mapping[str, str] | None) -> SparkSession:
    """A Spark Connect session (see :func:`build_spark`).

    Raises:
        ImportError: the Spark Connect client's packages are missing (the message says
            what to install).
        ValueError: ``remote`` is not an ``sc://`` address.
    """
    from pyspark.sql import SparkSession

    if not remote.startswith("sc://"):
        raise ValueError(f"a Spark Connect address starts with sc://, not {remote!r}")
    try:
        from pyspark.sql.connect.utils import check_dependencies

        check_dependencies()
    except ImportError as exc:
        raise ImportError(f"Spark Connect needs its client packages: pip install "
                          f"'qmf-async[connect]' ({exc})") from exc
    builder = (SparkSession.builder.remote(remote)
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.adaptive.enabled", "true")
               .config(_CACHED_AQE, "true"))
    if shuffle_partitions is not None:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    for key, value in (config or {}).items():
        builder = builder.config(key, value)
    spark: SparkSession = builder.getOrCreate()
    return spark


def parse_time(value: Any) -> int:
    """A point in time as integer nanoseconds since the epoch (UTC).

    Accepts an int (ns), a string of digits (ns), an ISO 8601 string (a time without an
    offset is UTC; ``Z`` is accepted) or a :class:`datetime.datetime`.

    Raises:
        ValueError: the value is not understood.
    """
    if isinstance(value, bool):
        raise ValueError(f"not a time: {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, _dt.datetime):
        moment = value
    elif isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"-?\d+", text):
            return int(text)
        try:
            moment = _dt.datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(
                f"not a time: {value!r} (ISO 8601, e.g. 2024-05-01T12:00:00Z, "
                "or integer nanoseconds)") from None
    else:
        raise ValueError(f"not a time: {value!r}")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.UTC)
    delta = moment - _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000
