"""Collect QMF object samples and events into a Parquet dataset (DESIGN 5).

``Collector(session, out_dir)`` is an ordinary console on the public API: it
subscribes to ``session.object_updates()`` and ``session.events()`` (bounded
buffers), batches what arrives by partition (table, UTC date, class) and writes
each batch as one Parquet file off the event loop (``asyncio.to_thread``), so the
bus keeps flowing.  Layout and columns: docs/pipeline.md, "Dataset layout"::

    DIR/samples/date=YYYY-MM-DD/class=<package>:<class>/part-<run-id>-<n>.parquet
    DIR/events/date=YYYY-MM-DD/class=<package>:<event>/part-<run-id>-<n>.parquet

A file appears only when complete: it is written as ``.part-...parquet.tmp`` in the
same directory, fsynced, then renamed.  Existing files are never rewritten; every
Collector has a new run id, so a restart appends.

``object_updates()`` yields proxies merged with the object's last known properties
and statistics; :meth:`QmfObject.get_changes` says what the update carried, which
makes the row's ``kind`` (``c`` properties, ``i`` statistics).

Needs pyarrow: ``pip install 'qmf-async[collector]'``.

    async with Session(manage_connections=True) as session:
        await session.add_broker(url)
        collector = Collector(session, "dataset")
        await collector.run(stop_event)      # until stop_event is set; flushes
        print(collector.stats)
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime
import functools
import json
import logging
import math
import operator
import os
import secrets
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import attrs

from .. import (
    Change,
    ClassKey,
    Event,
    ObjectId,
    QmfError,
    QmfObject,
    QmfType,
    RemoteAgent,
    SchemaClass,
    Subscription,
    UsageError,
)
from ..frozen import define, frozen
from ..names import is_console_queue
from ..wire import ObjectValue, Typed

if TYPE_CHECKING:
    import pyarrow as pa  # type: ignore[import-untyped]

    from .. import Session

__all__ = [
    "EVENT_COLUMNS",
    "SAMPLE_COLUMNS",
    "Collector",
    "CollectorStats",
    "event_row",
    "events_schema",
    "new_run_id",
    "sample_row",
    "samples_schema",
    "to_text",
]

log = logging.getLogger("qmf_async.tools.collector")

INSTALL_HINT = "pip install 'qmf-async[collector]'"

#: column names of the two tables, in file order (partition columns are not stored)
SAMPLE_COLUMNS = (
    "broker", "agent", "object_id", "boot_sequence", "package", "class_name", "class_hash",
    "kind", "sample_ts", "create_ts", "delete_ts", "props", "stats_int", "stats_float",
    "stats_text", "received_ts",
)
EVENT_COLUMNS = (
    "broker", "agent", "package", "event_name", "class_hash", "timestamp", "severity",
    "severity_name", "args", "received_ts",
)

SAMPLES = "samples"
EVENTS = "events"

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_DAY_NS = 86_400 * 1_000_000_000
_EPOCH = datetime.date(1970, 1, 1)


# --------------------------------------------------------------------------- pyarrow


def _pyarrow() -> Any:
    """The pyarrow module (imported on first use).

    Raises:
        ImportError: pyarrow is not installed (the message says how to install it).
    """
    try:
        import pyarrow
        import pyarrow.parquet  # type: ignore[import-untyped]  # the writer
    except ImportError as exc:
        raise ImportError(f"qmf_async.tools.collector needs pyarrow: {INSTALL_HINT}") from exc
    return pyarrow


@functools.cache
def samples_schema() -> pa.Schema:
    """The Arrow schema of the ``samples`` files.

    Raises:
        ImportError: pyarrow is not installed.
    """
    pa = _pyarrow()
    return pa.schema([
        ("broker", pa.string()),
        ("agent", pa.string()),
        ("object_id", pa.string()),
        ("boot_sequence", pa.int32()),
        ("package", pa.string()),
        ("class_name", pa.string()),
        ("class_hash", pa.string()),
        ("kind", pa.string()),
        ("sample_ts", pa.int64()),
        ("create_ts", pa.int64()),
        ("delete_ts", pa.int64()),
        ("props", pa.map_(pa.string(), pa.string())),
        ("stats_int", pa.map_(pa.string(), pa.int64())),
        ("stats_float", pa.map_(pa.string(), pa.float64())),
        ("stats_text", pa.map_(pa.string(), pa.string())),
        ("received_ts", pa.int64()),
    ])


@functools.cache
def events_schema() -> pa.Schema:
    """The Arrow schema of the ``events`` files.

    Raises:
        ImportError: pyarrow is not installed.
    """
    pa = _pyarrow()
    return pa.schema([
        ("broker", pa.string()),
        ("agent", pa.string()),
        ("package", pa.string()),
        ("event_name", pa.string()),
        ("class_hash", pa.string()),
        ("timestamp", pa.int64()),
        ("severity", pa.int32()),
        ("severity_name", pa.string()),
        ("args", pa.map_(pa.string(), pa.string())),
        ("received_ts", pa.int64()),
    ])


# --------------------------------------------------------------------------- values


def _float_text(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return repr(v)


def _jsonable(v: Any) -> Any:
    """A value made of JSON types only (for maps and lists as text)."""
    if v is None or isinstance(v, (str, bool, int, float)):
        return v
    if isinstance(v, Mapping):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).decode("utf-8", "backslashreplace")
    if isinstance(v, Typed):
        return _jsonable(v.value)
    if isinstance(v, ObjectValue):
        schema = v.schema
        props = zip(schema.properties, v.properties, strict=False)
        stats = zip(schema.statistics, v.statistics, strict=False)
        return {
            "class": f"{schema.class_key.package}:{schema.class_key.name}",
            "properties": {p.name: _jsonable(x) for p, x in props if x is not None},
            "statistics": {s.name: _jsonable(x) for s, x in stats},
        }
    return str(v)  # ObjectId, UUID and anything else: their text form


def to_text(v: Any) -> str:
    """A QMF value as the text stored in the ``props``/``args``/``stats_text`` maps.

    str as is; integers in decimal; bools ``true``/``false``; floats as the shortest
    round-tripping decimal (``NaN``, ``Infinity``, ``-Infinity``); object references
    as the object-id text ``flags-seq-bb-ab-obj``; UUIDs in their 36-character form;
    binary strings decoded as UTF-8 (invalid bytes backslash-escaped); maps, lists,
    arrays and embedded objects as compact JSON (the same rules inside, non-finite
    floats as ``NaN``/``Infinity``).
    """
    t = type(v)
    if t is str:
        return v  # type: ignore[no-any-return]
    if t is int:
        return str(v)
    if t is bool:
        return "true" if v else "false"
    if t is float:
        return _float_text(v)
    if t is ObjectId or t is uuid.UUID or isinstance(v, ObjectId):  # a session's ids too
        return str(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(int(v))
    if isinstance(v, float):
        return _float_text(float(v))
    if isinstance(v, str):
        return str(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).decode("utf-8", "backslashreplace")
    if isinstance(v, Typed):
        return to_text(v.value)
    if isinstance(v, (Mapping, list, tuple, ObjectValue)):
        return json.dumps(_jsonable(v), ensure_ascii=False, separators=(",", ":"))
    return str(v)


def _text_map(values: Mapping[str, Any]) -> dict[str, str]:
    return {k: to_text(v) for k, v in values.items() if v is not None}


def _split_stats(stats: Mapping[str, Any]
                 ) -> tuple[dict[str, int], dict[str, float], dict[str, str]]:
    """Statistics into (int64, double, text) maps: integers and bools (0/1) as int64,
    unsigned values above 2**63-1 and floats as double, everything else as text."""
    ints: dict[str, int] = {}
    floats: dict[str, float] = {}
    texts: dict[str, str] = {}
    for name, v in stats.items():
        t = type(v)
        if t is int:
            if _INT64_MIN <= v <= _INT64_MAX:
                ints[name] = v
            else:
                floats[name] = float(v)
        elif t is float:
            floats[name] = v
        elif t is str:
            texts[name] = v
        elif t is bool:
            ints[name] = 1 if v else 0
        elif v is None:
            continue
        elif isinstance(v, bool):
            ints[name] = 1 if v else 0
        elif isinstance(v, int):
            iv = int(v)
            if _INT64_MIN <= iv <= _INT64_MAX:
                ints[name] = iv
            else:
                floats[name] = float(iv)
        elif isinstance(v, float):
            floats[name] = float(v)
        else:
            texts[name] = to_text(v)
    return ints, floats, texts


#: statistic types whose values are ints that always fit int64, and those that may not
_SMALL_INTS = frozenset({QmfType.UINT8, QmfType.UINT16, QmfType.UINT32, QmfType.INT8,
                         QmfType.INT16, QmfType.INT32, QmfType.INT64})
_BIG_INTS = frozenset({QmfType.UINT64, QmfType.ABSTIME, QmfType.DELTATIME})


def _getter(names: tuple[str, ...]) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    if not names:
        return lambda d: ()
    if len(names) == 1:
        name = names[0]
        return lambda d: (d[name],)
    return operator.itemgetter(*names)


class _StatsPlan:
    """The statistics of one schema grouped by the map they go to, so that a row
    is a few C-level lookups (``get_statistics()`` values follow the schema)."""

    __slots__ = (
        "big",
        "bools",
        "float_names",
        "floats",
        "int_names",
        "ints",
        "other_names",
        "others",
        "str_names",
        "strs",
    )

    def __init__(self, schema: SchemaClass) -> None:
        groups: dict[str, list[str]] = {"i": [], "b": [], "o": [], "f": [], "s": [], "x": []}
        for st in schema.statistics:
            t = st.type
            g = ("i" if t in _SMALL_INTS else "b" if t in _BIG_INTS else
                 "o" if t == QmfType.BOOL else
                 "f" if t in (QmfType.FLOAT, QmfType.DOUBLE) else
                 "s" if t in (QmfType.SSTR, QmfType.LSTR) else "x")
            groups[g].append(st.name)
        self.int_names = tuple(groups["i"] + groups["b"] + groups["o"])
        self.ints = _getter(tuple(groups["i"]))
        self.big = _getter(tuple(groups["b"]))
        self.bools = _getter(tuple(groups["o"]))
        self.float_names = tuple(groups["f"])
        self.floats = _getter(self.float_names)
        self.str_names = tuple(groups["s"])
        self.strs = _getter(self.str_names)
        self.other_names = self.str_names + tuple(groups["x"])
        self.others = _getter(tuple(groups["x"]))

    def split(self, stats: Mapping[str, Any]) -> tuple[Any, Any, Any] | None:
        """(int64, double, text) maps as (keys, values) pairs, trusting the values to
        be of their schema types (the decoder's); None when a uint64 exceeds int64
        (the caller splits by the values' own types then)."""
        big = self.big(stats)
        try:
            if big and max(big) > _INT64_MAX:
                return None
        except TypeError:  # not all ints
            return None
        ints = self.ints(stats) + big + tuple([1 if b else 0 for b in self.bools(stats)])
        texts = self.strs(stats) + tuple([to_text(v) for v in self.others(stats)])
        return ((self.int_names, ints), (self.float_names, self.floats(stats)),
                (self.other_names, texts))


_PLANS: dict[ClassKey, _StatsPlan] = {}


def _stats_plan(schema: SchemaClass) -> _StatsPlan:
    plan = _PLANS.get(schema.class_key)
    if plan is None:
        if len(_PLANS) > 4096:
            _PLANS.clear()
        plan = _PLANS[schema.class_key] = _StatsPlan(schema)
    return plan


@functools.lru_cache(maxsize=1024)
def _class_parts(key: ClassKey) -> tuple[str, str, str, str]:
    """(partition value ``package:class``, package, class, hash hex) of a class key."""
    return f"{key.package}:{key.name}", key.package, key.name, key.hash.hex()


@functools.lru_cache(maxsize=256)
def _day_text(day: int) -> str:
    return (_EPOCH + datetime.timedelta(days=day)).isoformat()


def _date(ts: int, fallback: int) -> str:
    """UTC date ``YYYY-MM-DD`` of a ns timestamp (of ``fallback`` when out of range)."""
    for value in (ts, fallback):
        try:
            return _day_text(value // _DAY_NS)
        except (OverflowError, ValueError, TypeError):
            continue
    return _day_text(0)


def _i64(v: int) -> int:
    """A timestamp clamped to int64 (garbage from an agent must not sink a batch)."""
    return v if _INT64_MIN <= v <= _INT64_MAX else (_INT64_MAX if v > 0 else _INT64_MIN)


def _agent_text(agent: Any, oid: ObjectId | None = None) -> str:
    if agent is not None:
        return f"{agent.broker_bank}.{agent.agent_bank}"
    if oid is not None:
        return f"{oid.broker_bank}.{oid.agent_bank}"
    return ""


def _broker_text(obj: QmfObject) -> str:
    broker = obj.get_broker()
    if broker is not None:
        return str(broker.where)
    agent = obj.get_agent()
    return agent.broker_url if agent is not None else ""


def _sample_values(obj: QmfObject, kind: str, received_ts: int, fast: bool = True
                   ) -> tuple[Any, ...]:
    """One ``samples`` row as a tuple in SAMPLE_COLUMNS order: maps as dicts, or as
    (keys, values) pairs of tuples (``fast``: statistics split by a per-schema plan,
    the keys tuples shared by every row of the schema)."""
    _, package, name, hash_hex = _class_parts(obj.get_class_key())
    oid = obj.get_object_id()
    sample_ts, create_ts, delete_ts = (_i64(t) for t in obj.get_timestamps())
    if kind == "c":
        props = _text_map(obj.get_properties())
        ints: dict[str, int] = {}
        floats: dict[str, float] = {}
        texts: dict[str, str] = {}
    else:
        props = {}
        stats = obj.get_statistics()
        split = _stats_plan(obj.get_schema()).split(stats) if fast else None
        if split is None:
            ints, floats, texts = _split_stats(stats)
        else:
            ints, floats, texts = split
    return (_broker_text(obj), _agent_text(obj.get_agent(), oid), str(oid), oid.sequence,
            package, name, hash_hex, kind, sample_ts, create_ts, delete_ts, props, ints,
            floats, texts, received_ts)


def _event_values(event: Event, received_ts: int) -> tuple[Any, ...]:
    """One ``events`` row as a tuple in EVENT_COLUMNS order (the map as a dict)."""
    _, package, name, hash_hex = _class_parts(event.class_key)
    agent = event.agent
    return (agent.broker_url if agent is not None else "", _agent_text(agent), package, name,
            hash_hex, _i64(event.timestamp), event.severity, event.severity_name,
            _text_map(event.arguments), received_ts)


def sample_row(obj: QmfObject, kind: str, received_ts: int = 0) -> dict[str, Any]:
    """The ``samples`` row the collector writes for an object update.

    ``kind`` is ``"c"`` (the update carried properties: ``props`` filled, the
    statistics maps empty) or ``"i"`` (statistics: ``props`` empty).
    """
    values = _sample_values(obj, kind, received_ts)
    return {name: (dict(zip(*v, strict=True)) if isinstance(v, tuple) else v)
            for name, v in zip(SAMPLE_COLUMNS, values, strict=True)}


def event_row(event: Event, received_ts: int = 0) -> dict[str, Any]:
    """The ``events`` row the collector writes for an event."""
    return dict(zip(EVENT_COLUMNS, _event_values(event, received_ts), strict=True))


def _map_array(pa: Any, maps: list[Any], map_type: Any) -> Any:
    """A MapArray of dicts or (keys, values) pairs; when every row has the same keys
    tuple (one schema), the keys column is that tuple repeated, built in C."""
    offsets = [0]
    values: list[Any] = []
    keys: list[str] = []
    shared: tuple[str, ...] | None = None
    same = True
    n = 0
    for m in maps:
        if type(m) is tuple:
            row_keys, row_values = m
            if shared is None:
                shared = row_keys
            elif row_keys is not shared:
                same = False
            if same:
                values.extend(row_values)
            else:
                keys.extend(row_keys)
                values.extend(row_values)
            n += len(row_values)
        elif m:
            if same:
                same = False
            keys.extend(m)
            values.extend(m.values())
            n += len(m)
        offsets.append(n)
    if same and shared:
        key_array = pa.concat_arrays([pa.array(shared, map_type.key_type)]
                                     * sum(1 for m in maps if type(m) is tuple))
    elif shared is not None and not same:
        # keys collected only after the first difference: rebuild them all
        keys = [k for m in maps for k in (m[0] if type(m) is tuple else m)]
        key_array = pa.array(keys, map_type.key_type)
    else:
        key_array = pa.array(keys, map_type.key_type)
    return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), key_array,
                                   pa.array(values, map_type.item_type), type=map_type)


def _table(rows: list[tuple[Any, ...]], schema: pa.Schema) -> pa.Table:
    """An Arrow table of row tuples (columns in schema order)."""
    pa = _pyarrow()
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in schema]
    arrays = []
    for field, column in zip(schema, columns, strict=True):
        if pa.types.is_map(field.type):
            arrays.append(_map_array(pa, list(column), field.type))
        else:
            arrays.append(pa.array(column, field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


# --------------------------------------------------------------------------- files


def new_run_id() -> str:
    """A new collector run id: UTC start time and 8 random hex digits
    (``20250102T030405-1a2b3c4d``); file names of different runs never collide."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + secrets.token_hex(4)


def _partition_value(text: str) -> str:
    """A Hive partition value as a path segment: ``%XX`` escapes for every character
    but letters, digits, ``_.-~`` and ``:`` (Spark and pyarrow unescape them)."""
    return quote(text, safe=":")


def partition_dir(root: str | os.PathLike[str], table: str, date: str, cls: str) -> Path:
    """``root/table/date=<date>/class=<cls>``."""
    return Path(root) / table / f"date={date}" / f"class={_partition_value(cls)}"


def _write_parquet(table: pa.Table, path: str) -> None:
    import pyarrow.parquet as pq
    pq.write_table(table, path, compression="snappy")


def _fsync_dir(path: str) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _makedirs(directory: Path) -> None:
    """Create ``directory`` and fsync the parents of what was created."""
    missing = []
    d = directory
    while not d.exists():
        missing.append(d)
        if d.parent == d:
            break
        d = d.parent
    directory.mkdir(parents=True, exist_ok=True)
    for created in reversed(missing):
        _fsync_dir(str(created.parent))


def commit_table(table: pa.Table, directory: Path, name: str) -> Path:
    """Write ``table`` as ``directory/name`` atomically: to ``.<name>.tmp`` first,
    fsync, rename.  On any failure the temporary file is removed and no file named
    ``name`` appears.

    Raises:
        FileExistsError: ``name`` exists already (files are never rewritten).
        OSError, pyarrow.ArrowException: the write failed.
    """
    _makedirs(directory)
    final = directory / name
    tmp = directory / f".{name}.tmp"
    if os.path.lexists(final):
        raise FileExistsError(f"{final} exists; collector files are never rewritten")
    try:
        _write_parquet(table, str(tmp))
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(str(directory))
    return final


# --------------------------------------------------------------------------- collector


@frozen
class CollectorStats:
    """Counters of a :class:`Collector`.

    ``received`` items were taken from the subscriptions (or passed to
    ``add_sample``/``add_event``); each is eventually ``written`` (a row in a
    committed file), ``lost`` or still ``pending``.  ``dropped`` is
    ``subscription_dropped`` (the bounded subscriptions dropped them because the
    collector was behind; never received) plus ``lost`` (received but not written:
    buffer overflow, an unconvertible item, a failed file write).
    """

    received: int
    written: int
    dropped: int
    files: int = 0
    pending: int = 0
    subscription_dropped: int = 0
    lost: int = 0
    write_errors: int = 0


@define
class _AgentProps:
    """The last ``c`` properties of one agent's objects (by object id text): ``live``
    since the agent last arrived, ``before`` those it had when it last left (looked up,
    and moved to ``live``, when an object is seen again: a reconnect gives the same
    ids), ``gone_since`` the monotonic time it left (None while it is present)."""

    live: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    before: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    gone_since: float | None = None

    def __len__(self) -> int:
        return len(self.live) + len(self.before)


@define
class _Batch:
    table: str
    date: str
    cls: str
    entries: list[tuple[Any, ...]]
    since: float  # time.monotonic() of the first entry


class Collector:
    """Write a session's object updates and events to a Parquet dataset.

    ``batch_rows``: a partition's batch is written when it holds this many rows;
    ``batch_seconds``: ... or when its oldest row has waited this long.
    ``max_buffer``: rows held in memory at most (buffered plus being written); when
    the writer falls behind, the collector stops reading its subscriptions, whose
    bounded buffers then drop the oldest items (counted in ``dropped``).
    ``_class``/``_package``: collect only this class name (object class or event
    name) / package.  ``forget_after``: seconds the last properties of the objects of
    an agent that left are kept for its return (a reconnect gives the same object ids:
    no new ``c`` rows), then released.  ``console_queues``: also the updates of the
    consoles' own reply and topic queues (:func:`qmf_async.names.is_console_queue`;
    left out by default, as ``qmf stat -q`` leaves them out: they are neither received
    nor written).

    ``await run(stop)`` collects until ``stop`` is set (or the session closes),
    then writes what it holds.  ``add_sample``/``add_event`` feed it directly.

    Raises:
        ImportError: pyarrow is not installed (``pip install 'qmf-async[collector]'``).
        UsageError: a non-positive batch size, time or buffer, a negative
            ``forget_after``.
    """

    def __init__(self, session: Session, out_dir: str | os.PathLike[str], *,
                 batch_rows: int = 10_000, batch_seconds: float = 5.0,
                 max_buffer: int = 100_000, _class: str | None = None,
                 _package: str | None = None, console_queues: bool = False,
                 forget_after: float = 300.0) -> None:
        _pyarrow()
        if batch_rows < 1:
            raise UsageError("batch_rows must be at least 1")
        if not batch_seconds > 0:
            raise UsageError("batch_seconds must be positive")
        if max_buffer < 1:
            raise UsageError("max_buffer must be at least 1")
        if not forget_after >= 0:
            raise UsageError("forget_after must be 0 or more")
        self.forget_after = float(forget_after)
        self.session = session
        self.out_dir = Path(out_dir)
        self.batch_rows = batch_rows
        self.batch_seconds = float(batch_seconds)
        self.max_buffer = max_buffer
        self.class_name = _class
        self.package = _package
        self.console_queues = console_queues
        #: this collector's run id, part of every file name it writes
        self.run_id = new_run_id()
        # as large as the buffer: a QMF v2 session releases the data it held for a
        # schema fetch at once (10,000 queues of qpidd at its first publication)
        self._subscription_size = max_buffer
        self._buffers: dict[tuple[str, str, str], _Batch] = {}
        self._queue: collections.deque[_Batch] = collections.deque()
        self._queued_rows = 0
        self._pending = 0  # rows buffered or queued or being written
        self._file_seq = 0
        self._received = 0
        self._written = 0
        self._lost = 0
        self._files = 0
        self._write_errors = 0
        self._closed_sub_drops = 0
        self._subs: list[Subscription[Any]] = []
        self._lock = asyncio.Lock()
        self._work = asyncio.Event()
        self._space = asyncio.Event()
        self._running = False
        self._first_sample = True
        #: (broker, agent) -> the properties of the last c rows of its objects made from
        #: updates that carried properties and statistics together (QMF v2); released
        #: ``forget_after`` seconds after the agent left (agent_changes)
        self._last_props: dict[tuple[str, str], _AgentProps] = {}
        #: classes ("package:class") updates arrived for, and those not yet snapshotted
        self._classes: set[str] = set()
        self._new_classes: collections.deque[tuple[str, str]] = collections.deque()
        self._class_seen = asyncio.Event()
        #: ``c`` rows written by :meth:`snapshot`
        self.snapshot_rows = 0
        self._closing = False

    # ------------------------------------------------------------------ counters

    @property
    def received(self) -> int:
        """Items taken from the subscriptions (or added directly)."""
        return self._received

    @property
    def written(self) -> int:
        """Rows in committed files."""
        return self._written

    @property
    def dropped(self) -> int:
        """Subscription drops plus rows lost (overflow, unconvertible, failed writes)."""
        return self._lost + self._subscription_dropped()

    @property
    def pending(self) -> int:
        """Rows received and not yet written or lost."""
        return self._pending

    def _subscription_dropped(self) -> int:
        return self._closed_sub_drops + sum(s.dropped for s in self._subs)

    @property
    def stats(self) -> CollectorStats:
        """A snapshot of the counters."""
        sub = self._subscription_dropped()
        return CollectorStats(received=self._received, written=self._written,
                              dropped=sub + self._lost, files=self._files,
                              pending=self._pending, subscription_dropped=sub,
                              lost=self._lost, write_errors=self._write_errors)

    # ------------------------------------------------------------------ feeding

    def _wanted(self, key: ClassKey) -> bool:
        return ((self.class_name is None or key.name == self.class_name)
                and (self.package is None or key.package == self.package))

    def _hidden(self, obj: QmfObject) -> bool:
        """A console's own queue, left out unless ``console_queues``."""
        if self.console_queues or obj.get_class_key().name != "queue":
            return False
        try:  # the properties, as merged with the object's last known ones
            name = obj.get_properties().get("name")
        except Exception:
            return False
        return isinstance(name, str) and is_console_queue(name)

    @staticmethod
    def _kind_of(obj: QmfObject) -> str:
        """``c`` when the update carried properties only, ``i`` when it carried
        statistics only; for a proxy that carried both (a query answer), ``i`` when
        it has statistics."""
        changes = obj.get_changes()
        props, stats = Change.PROPERTIES in changes, Change.STATISTICS in changes
        if props != stats:
            return "c" if props else "i"
        return "i" if obj.get_statistics() else "c"

    def add_sample(self, obj: QmfObject, kind: str | None = None, *,
                   received_ts: int | None = None) -> bool:
        """Buffer an object update; False when it was dropped (buffer full) or left
        out (a console's own queue, unless ``console_queues``: not counted).

        ``kind`` is ``"c"`` (properties) or ``"i"`` (statistics); by default what
        the update carried (:meth:`QmfObject.get_changes`), and for a proxy that
        carried both, ``"i"`` when it has statistics.  By default an update that
        carried both (every QMF v2 data indication) is also written as a ``c`` row when
        its properties differ from the object's last such row: the ``c`` rows name the
        objects.  ``received`` counts rows, so such an update counts twice.

        Raises:
            UsageError: ``kind`` is not ``"c"`` or ``"i"``.
        """
        if self._hidden(obj):
            return False
        both = False
        if kind is None:
            kind = self._kind_of(obj)
            both = kind == "i" and Change.PROPERTIES in obj.get_changes()
        elif kind not in ("c", "i"):
            raise UsageError(f"kind must be 'c' or 'i', not {kind!r}")
        rts = time.time_ns() if received_ts is None else received_ts
        if both and not self._props_row_due(obj):
            both = False
        if both and not self._add_sample(obj, "c", rts):
            return False
        return self._add_sample(obj, kind, rts)

    def _props_row_due(self, obj: QmfObject) -> bool:
        """For an update that carried properties and statistics together (every QMF v2
        data indication, a query answer): True when its properties differ from the
        last ``c`` row written for the object (or none was), so that the dataset has
        the ``c`` rows that name the objects, as v1 agents send them."""
        try:
            oid = obj.get_object_id()
            agent = (_broker_text(obj), _agent_text(obj.get_agent(), oid))
            key = str(oid)
            props = obj.get_properties()
            deleted = obj.get_timestamps()[2] != 0
        except Exception:
            return False
        known = self._last_props.get(agent)
        if deleted:
            if known is not None:
                known.live.pop(key, None)
                known.before.pop(key, None)
            return True
        if known is None:
            known = self._last_props[agent] = _AgentProps()
        last = known.live.get(key)
        if last is None and known.before:
            last = known.before.pop(key, None)
            if last is not None:
                known.live[key] = last
        if last == props:
            return False
        known.live[key] = props
        return True

    def agent_changed(self, change: str, agent: RemoteAgent) -> None:
        """An agent arrived (``"added"``) or left (``"removed"``), as
        ``Session.agent_changes()`` says (:meth:`run` follows it).  When it leaves, the
        last properties of its objects are kept ``forget_after`` seconds for its
        return (a reconnect: same object ids, no new ``c`` rows), then released (an
        agent restart over QMF v1 gives its objects new ids: nothing would ever ask
        for the old ones again)."""
        key = (str(getattr(agent.broker, "where", "") or agent.broker_url),
               f"{agent.broker_bank}.{agent.agent_bank}")
        known = self._last_props.get(key)
        if known is None:
            if change != "removed":
                return
            # updates of it still queued behind this news are released with it
            known = self._last_props[key] = _AgentProps()
        if change == "removed":
            if known.gone_since is None:  # what it had before it last left goes now
                known.before = known.live
                known.live = {}
            known.gone_since = time.monotonic()
            if self.forget_after == 0:
                del self._last_props[key]
        elif change == "added":
            known.gone_since = None

    def _forget_gone(self, now: float) -> None:
        """Release what is kept of agents that left ``forget_after`` seconds ago."""
        limit = now - self.forget_after
        for key, known in list(self._last_props.items()):
            if known.gone_since is not None and known.gone_since <= limit:
                del self._last_props[key]

    @property
    def remembered(self) -> int:
        """Objects whose last properties are kept (to write a ``c`` row only when they
        change): those of the present agents, and of the agents that left less than
        ``forget_after`` seconds ago."""
        return sum(len(k) for k in self._last_props.values())

    def _add_sample(self, obj: QmfObject, kind: str, rts: int) -> bool:
        self._received += 1
        if self._pending >= self.max_buffer:
            self._lost += 1
            return False
        try:
            cls = _class_parts(obj.get_class_key())[0]
            date = _date(obj.get_timestamps()[0], rts)
        except Exception:
            log.exception("collector: object update %r dropped", obj)
            self._lost += 1
            return False
        if self._first_sample:
            self._first_sample = False
            log.info("collector %s: first object update received (%s)", self.run_id, cls)
        if cls not in self._classes:
            self._classes.add(cls)
            key = obj.get_class_key()
            self._new_classes.append((key.package, key.name))
            self._class_seen.set()
        self._append((SAMPLES, date, cls), (obj, kind, rts))
        return True

    def add_event(self, event: Event, *, received_ts: int | None = None) -> bool:
        """Buffer an event; False when it was dropped (buffer full)."""
        rts = time.time_ns() if received_ts is None else received_ts
        self._received += 1
        if self._pending >= self.max_buffer:
            self._lost += 1
            return False
        try:
            cls = _class_parts(event.class_key)[0]
            date = _date(event.timestamp, rts)
        except Exception:
            log.exception("collector: event %r dropped", event)
            self._lost += 1
            return False
        self._append((EVENTS, date, cls), (event, rts))
        return True

    def _append(self, key: tuple[str, str, str], entry: tuple[Any, ...]) -> None:
        batch = self._buffers.get(key)
        if batch is None:
            batch = self._buffers[key] = _Batch(key[0], key[1], key[2], [], time.monotonic())
        batch.entries.append(entry)
        self._pending += 1
        if len(batch.entries) >= self.batch_rows:
            self._handoff(key)

    def _handoff(self, key: tuple[str, str, str]) -> None:
        batch = self._buffers.pop(key)
        self._queue.append(batch)
        self._queued_rows += len(batch.entries)
        self._work.set()

    def _handoff_all(self) -> None:
        for key in list(self._buffers):
            self._handoff(key)

    def _handoff_due(self, now: float) -> None:
        for key, batch in list(self._buffers.items()):
            if now - batch.since >= self.batch_seconds:
                self._handoff(key)

    # ------------------------------------------------------------------ writing

    async def snapshot(self, *, timeout: float = 30.0) -> None:
        """Name the objects that existed before the collector started: for each class
        the collector receives updates of, once, query the agents for the objects of
        that class and write a ``c`` row (the properties) for each.  Agents send
        properties only when they change (a stock qpidd, QMF v2, sends statistics
        alone after an object's first publication), so without it such objects would
        have no name in the dataset.  Later updates with the same properties add no
        ``c`` row.  Runs until cancelled or until the collector stops (it adds nothing
        once the final flush has begun); ``snapshot_rows`` counts the rows added.

        A class is asked for only after its first update arrived: over QMF v2 the
        session holds the data of a class until its schema arrives, and qpidd answers
        one request at a time, so queries sent at once would delay every schema (and
        so every row) by the whole snapshot.

        Raises:
            Nothing: a query that fails (a timeout, an error) is logged and left out.
        """
        session = self.session
        while True:
            while not self._new_classes:
                if self._stopping():
                    return
                self._class_seen.clear()
                await self._class_seen.wait()
            if self._stopping():
                return
            package, name = self._new_classes.popleft()
            try:
                objects = await session.get_objects(_class=name, _package=package,
                                                    _timeout=timeout)
            except QmfError as exc:
                log.info("collector %s: no snapshot of %s:%s (%s)", self.run_id, package,
                         name, exc)
                continue
            if self._stopping():  # the final flush has begun: add nothing more
                return
            rts = time.time_ns()
            for obj in objects:
                if self._wanted(obj.get_class_key()) and not self._hidden(obj) \
                        and self._props_row_due(obj) \
                        and self._add_sample(obj, "c", rts):
                    self.snapshot_rows += 1

    def _stopping(self) -> bool:
        """True once the final flush has begun (a method: it changes across awaits)."""
        return self._closing

    async def flush(self) -> None:
        """Write every buffered row now (one file per partition) and wait until
        all of them are committed or counted as lost."""
        self._handoff_all()
        await self._write_queued()

    async def _write_queued(self) -> None:
        async with self._lock:
            while self._queue:
                batch = self._queue.popleft()
                self._file_seq += 1
                n = len(batch.entries)
                try:
                    written, lost = await asyncio.to_thread(self._write_batch, batch,
                                                            self._file_seq)
                except Exception as exc:
                    written, lost = 0, n
                    self._write_errors += 1
                    log.error("collector: writing %d %s rows of %s on %s failed: %s", n,
                              batch.table, batch.cls, batch.date, exc,
                              exc_info=not isinstance(exc, OSError))
                self._queued_rows -= n
                self._pending -= n
                self._written += written
                self._lost += lost
                if written:
                    self._files += 1
                self._space.set()

    def _write_batch(self, batch: _Batch, seq: int) -> tuple[int, int]:
        """Convert and commit one batch (in a worker thread): (written, lost)."""
        if batch.table == SAMPLES:
            schema = samples_schema()
            rows, lost = self._rows(batch, fast=True)
        else:
            schema = events_schema()
            rows, lost = self._rows(batch)
        if not rows:
            return 0, lost
        try:
            table = _table(rows, schema)
        except Exception:
            # a value that is not of its schema type (the fast path trusts the schema):
            # convert again by the values' own types, then keep the rows Arrow takes
            if batch.table == SAMPLES:
                rows, lost = self._rows(batch, fast=False)
            good = []
            for row in rows:
                try:
                    _table([row], schema)
                except Exception:
                    lost += 1
                    log.exception("collector: row %r does not fit the schema", row[:4])
                else:
                    good.append(row)
            if not good:
                return 0, lost
            rows = good
            table = _table(rows, schema)
        directory = partition_dir(self.out_dir, batch.table, batch.date, batch.cls)
        commit_table(table, directory, f"part-{self.run_id}-{seq:06d}.parquet")
        return len(rows), lost

    @staticmethod
    def _rows(batch: _Batch, fast: bool = False) -> tuple[list[tuple[Any, ...]], int]:
        rows: list[tuple[Any, ...]] = []
        lost = 0
        for entry in batch.entries:
            try:
                if batch.table == SAMPLES:
                    obj, kind, rts = entry
                    rows.append(_sample_values(obj, kind, rts, fast))
                else:
                    event, rts = entry
                    rows.append(_event_values(event, rts))
            except Exception:
                lost += 1
                log.exception("collector: cannot convert %r", entry[0])
        return rows, lost

    # ------------------------------------------------------------------ running

    async def _wait_space(self) -> None:
        while self._pending >= self.max_buffer:
            if self._queued_rows == 0 and self._buffers:
                # everything sits in partitions below batch_rows: write the largest
                largest = max(self._buffers, key=lambda k: len(self._buffers[k].entries))
                self._handoff(largest)
            self._space.clear()
            await self._space.wait()

    async def _pump(self, sub: Subscription[Any], add: Callable[[Any], bool]) -> None:
        try:
            async for item in sub:
                if self._pending >= self.max_buffer:
                    await self._wait_space()
                add(item)
        except Exception as exc:  # the subscription failed (the session closed on error)
            log.warning("collector: subscription ended: %s", exc)

    async def _ticker(self) -> None:
        tick = min(max(self.batch_seconds / 4, 0.01), 1.0)
        while True:
            await asyncio.sleep(tick)
            now = time.monotonic()
            self._handoff_due(now)
            self._forget_gone(now)

    async def _follow_agents(self, changes: Subscription[tuple[str, RemoteAgent]]) -> None:
        try:
            async for change, agent in changes:
                self.agent_changed(change, agent)
        except Exception as exc:  # the session closed on error: nothing more to follow
            log.info("collector: agent changes ended: %s", exc)
        finally:
            changes.close()

    async def _writer(self) -> None:
        while True:
            await self._work.wait()
            self._work.clear()
            await self._write_queued()

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Collect until ``stop`` is set or the session closes, then write what is
        buffered.  Cancelling it also writes what is buffered before the
        cancellation propagates.

        Raises:
            UsageError: this collector is already running.
        """
        if self._running:
            raise UsageError("this collector is already running")
        self._running = True
        self._closing = False
        session = self.session
        updates: Subscription[QmfObject] = session.object_updates(
            _class=self.class_name, _package=self.package, maxsize=self._subscription_size)
        events: Subscription[Event] = session.events(
            _class=self.class_name, _package=self.package, maxsize=self._subscription_size)
        agents: Subscription[tuple[str, RemoteAgent]] = session.agent_changes()
        self._subs = [updates, events]
        # fresh primitives: a collector may be run again, in another event loop
        self._lock, self._work, self._space = asyncio.Lock(), asyncio.Event(), asyncio.Event()
        pumps = [asyncio.ensure_future(self._pump(updates, self.add_sample)),
                 asyncio.ensure_future(self._pump(events, self.add_event))]
        helpers = [asyncio.ensure_future(self._ticker()), asyncio.ensure_future(self._writer()),
                   asyncio.ensure_future(self._follow_agents(agents))]
        waits: list[asyncio.Future[Any]] = [asyncio.ensure_future(asyncio.gather(*pumps))]
        if stop is not None:
            waits.append(asyncio.ensure_future(stop.wait()))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits[1:]:
                w.cancel()
            done = asyncio.ensure_future(self._shutdown(pumps, helpers))
            try:
                await asyncio.shield(done)
            except asyncio.CancelledError:
                with contextlib.suppress(BaseException):
                    await done
                raise

    async def _shutdown(self, pumps: Sequence[asyncio.Future[None]],
                        helpers: Sequence[asyncio.Future[None]]) -> None:
        self._closing = True
        self._class_seen.set()  # a snapshot waiting for a class ends
        try:
            helpers[0].cancel()  # the ticker: from now on everything is flushed below
            for sub in self._subs:
                sub.close()  # the pumps take what is left in them, then end
            await asyncio.gather(*pumps, return_exceptions=True)
            await self.flush()
        finally:
            for h in helpers:
                h.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            self._closed_sub_drops += sum(s.dropped for s in self._subs)
            self._subs = []
            self._running = False

    def __repr__(self) -> str:
        s = self.stats
        return (f"<Collector {self.out_dir} run {self.run_id}: received {s.received}, "
                f"written {s.written}, dropped {s.dropped}, pending {s.pending}>")
