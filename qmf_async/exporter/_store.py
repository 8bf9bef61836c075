"""The live view the exporter serves: the latest values of every exported object,
and the text exposition written from it.

Pure code (no asyncio, no I/O, no prometheus_client): :meth:`LiveStore.update` takes an
object proxy (anything with :class:`QmfObject`'s reading methods) and the broker it came
from; :meth:`LiveStore.render` writes the Prometheus text format (version 0.0.4).  The
label string of an object is built once per properties update, so a scrape of 10,000
queues is string joins, not a label escape per sample.
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any, Final, Protocol

from .. import Change, ClassKey, ObjectId, RemoteAgent, SchemaClass, UsageError
from ..frozen import frozen
from ..names import CONSOLE_QUEUES, is_console_queue
from ._metrics import INFO, QPIDD_CLASSES, ClassMap, MetricSpec, generic_class_map

__all__ = [
    "CONSOLE_QUEUES",
    "is_console_queue",
    "Filters",
    "LiveStore",
    "ObjectLike",
    "escape_label",
    "format_value",
]

class ObjectLike(Protocol):
    """What the store reads of an object (a :class:`~qmf_async.QmfObject` has it all)."""

    def get_class_key(self) -> ClassKey: ...
    def get_object_id(self) -> ObjectId: ...
    def get_schema(self) -> SchemaClass: ...
    def get(self, name: str, default: Any = None) -> Any: ...
    def get_changes(self) -> Change: ...
    def get_index(self) -> str: ...
    def get_agent(self) -> RemoteAgent | None: ...
    def get_timestamps(self) -> tuple[int, int, int]: ...
    def is_deleted(self) -> bool: ...


@frozen(slots=True)
class Filters:
    """Include and exclude glob patterns (``fnmatch``) for queue and connection names.

    An object passes when it matches an include pattern (or there are none) and no
    exclude pattern.  ``queue_exclude`` defaults to the consoles' own queues.
    """

    queue_include: tuple[str, ...] = ()
    queue_exclude: tuple[str, ...] = CONSOLE_QUEUES
    connection_include: tuple[str, ...] = ()
    connection_exclude: tuple[str, ...] = ()

    def passes(self, kind: str, name: str) -> bool:
        include, exclude = ((self.queue_include, self.queue_exclude) if kind == "queue"
                            else (self.connection_include, self.connection_exclude))
        if include and not any(fnmatch.fnmatchcase(name, p) for p in include):
            return False
        return not any(fnmatch.fnmatchcase(name, p) for p in exclude)


_ESCAPES = re.compile(r'[\\"\n]')


def escape_label(value: str) -> str:
    """A label value as the text format writes it (backslash, quote, newline escaped)."""
    if not _ESCAPES.search(value):
        return value
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def format_value(value: float) -> str:
    """A sample value in the text format (integers without a fraction)."""
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def _number(value: Any, scale: float) -> float | None:
    if value is None or isinstance(value, (str, bytes, dict, list)):
        return None
    if isinstance(value, bool):
        return int(value)
    if not isinstance(value, (int, float)):
        return None
    return value if scale == 1.0 else value * scale


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


class _Family:
    """One family of a class: its header and the (value index, extra labels) members."""

    __slots__ = ("header", "kind", "members", "name")

    def __init__(self, spec: MetricSpec) -> None:
        kind = "gauge" if spec.kind == INFO else spec.kind
        help_text = spec.help.replace("\\", "\\\\").replace("\n", "\\n")
        self.name = spec.name
        self.kind = spec.kind
        self.header = f"# HELP {spec.name} {help_text}\n# TYPE {spec.name} {kind}\n"
        self.members: list[tuple[int, str]] = []


class _Entry:
    """One object: its label strings and, per family of its class, its sample lines
    (written when it is updated, so a scrape only joins them) and how many."""

    __slots__ = ("agent", "counts", "info", "labels", "sampled", "texts", "total", "updated",
                 "values")

    def __init__(self, agent: tuple[str, str]) -> None:
        self.agent = agent
        self.labels = ""
        self.info = ""
        self.texts: list[str] = []
        self.counts: list[int] = []
        self.values: list[float | None] = []
        self.total = 0       #: samples in texts
        self.updated = 0.0   #: when the store took the values (monotonic seconds)
        self.sampled = 0     #: the agent's time of the values (ns since the epoch)


class _ClassState:
    """A class map with its families and its live objects."""

    __slots__ = ("chunks", "cmap", "entries", "families", "readers", "value_specs")

    def __init__(self, cmap: ClassMap) -> None:
        self.cmap = cmap
        self.value_specs = [m for m in cmap.metrics if m.kind != INFO]
        #: (element, state meaning 1 or "", scale) of each value
        self.readers = [(*m.element.partition(":")[::2], m.scale) for m in self.value_specs]
        families: dict[str, _Family] = {}
        for m in cmap.metrics:
            fam = families.setdefault(m.name, _Family(m))
            if m.kind == INFO:
                continue
            extra = "".join(f',{k}="{escape_label(v)}"' for k, v in m.extra)
            fam.members.append((self.value_specs.index(m), extra))
        self.families = list(families.values())
        #: (broker, object id) -> entry
        self.entries: dict[tuple[str, ObjectId], _Entry] = {}
        #: per family, the joined lines of every entry as the last scrape wrote them
        #: (None: an entry's lines changed since, or entries came or went)
        self.chunks: list[str | None] = [None] * len(self.families)

    def invalidate(self) -> None:
        """Entries came or went: every family's text is joined again."""
        self.chunks = [None] * len(self.families)

    def read(self, obj: ObjectLike) -> list[float | None]:
        """The values of ``obj``, in ``value_specs`` order (None: not there)."""
        get = obj.get
        out: list[float | None] = []
        for element, state, scale in self.readers:
            value = get(element)
            kind = type(value)
            if (kind is int or kind is float) and not state:
                out.append(value if scale == 1.0 else value * scale)
            elif state:  # a state compared with the value that means 1
                out.append(None if value is None else int(_text(value) == state))
            else:
                out.append(_number(value, scale))
        return out

    def write(self, entry: _Entry, values: list[float | None], relabelled: bool) -> None:
        """Write ``entry``'s sample lines of the families whose values changed (of all
        of them when ``relabelled``)."""
        labels, old = entry.labels, entry.values
        if relabelled or len(old) != len(values):
            entry.texts = [""] * len(self.families)
            entry.counts = [0] * len(self.families)
            changed = None
            self.invalidate()
        else:
            changed = old
        texts, counts = entry.texts, entry.counts
        for fi, fam in enumerate(self.families):
            name = fam.name
            if fam.kind == INFO:
                if changed is None:
                    texts[fi] = (f"{name}{{{labels},{entry.info}}} 1\n" if entry.info
                                 else f"{name}{{{labels}}} 1\n")
                    counts[fi] = 1
                continue
            if changed is not None and all(changed[i] == values[i] for i, _ in fam.members):
                continue
            lines = [f"{name}{{{labels}{extra}}} {format_value(v)}\n"
                     for i, extra in fam.members if (v := values[i]) is not None]
            self.chunks[fi] = None
            texts[fi] = "".join(lines)
            counts[fi] = len(lines)
        entry.values = values
        entry.total = sum(counts)


class LiveStore:
    """The latest values of every exported object, by broker.

    ``generic`` exports the classes of packages other than qpidd's from their schemas
    (``packages`` narrows that to the listed packages; empty means every package).
    ``max_series`` caps the samples a scrape writes; what is left out is counted in
    ``series_cut`` (the last scrape) and ``series_cut_total``.

    Raises:
        UsageError: ``max_series`` is below 1.
    """

    def __init__(self, *, filters: Filters | None = None, max_series: int = 1_000_000,
                 generic: bool = False, packages: Sequence[str] = ()) -> None:
        if max_series < 1:
            raise UsageError("max_series must be at least 1")
        self.filters = filters or Filters()
        self.max_series = max_series
        self.generic = generic
        self.packages = tuple(packages)
        self._classes: dict[tuple[str, str], _ClassState] = {
            (c.package, c.name): _ClassState(c) for c in QPIDD_CLASSES}
        self._generic: dict[tuple[str, str], _ClassState] = {}
        #: (broker, object id) -> the object's name (references resolve through it)
        self._names: dict[tuple[str, ObjectId], str] = {}
        #: objects the filters left out (their later updates are not looked at)
        self._skipped: set[tuple[str, ObjectId]] = set()
        #: (broker, agent) -> last update (monotonic seconds)
        self.agents: dict[tuple[str, str], float] = {}
        #: (broker, agent) -> when it left (monotonic seconds)
        self._gone: dict[tuple[str, str], float] = {}
        #: (broker, metric) -> count: connections opened/closed, queues declared/deleted
        self.lifecycle: dict[tuple[str, str], int] = {}
        #: broker -> objects created before this time (ns) are not counted as new
        self.since_ns: dict[str, int] = {}
        self.updates = 0
        #: updates older than the values held (left out)
        self.stale_updates = 0
        self.filtered = 0
        self.series = 0
        self.series_cut = 0
        self.series_cut_total = 0

    # ------------------------------------------------------------------ updates

    def exports(self, key: ClassKey) -> bool:
        """Whether objects of ``key``'s class are exported."""
        if (key.package, key.name) in self._classes:
            return True
        return self.wants_generic(key.package)

    def wants_generic(self, package: str) -> bool:
        """Whether the classes of ``package`` are exported from their schemas."""
        if not self.generic or package == QPIDD_CLASSES[0].package:
            return False
        return not self.packages or package in self.packages

    def _state(self, obj: ObjectLike) -> _ClassState | None:
        key = obj.get_class_key()
        state = self._classes.get((key.package, key.name))
        if state is not None or not self.wants_generic(key.package):
            return state
        gkey = (key.package, key.name)  # one family set per class, whatever its versions
        state = self._generic.get(gkey)
        if state is None:
            state = self._generic[gkey] = _ClassState(generic_class_map(obj.get_schema()))
        return state

    def update(self, broker: str, obj: ObjectLike, now: float, *,
               snapshot: bool = False) -> None:
        """Take the latest values of ``obj`` (from ``broker``; ``now`` in monotonic
        seconds); a deleted object leaves.  ``snapshot`` marks an answer to a query
        (not counted as a new connection or queue).

        Raises:
            DecodeError: a value the store reads is malformed.
        """
        self.updates += 1
        state = self._state(obj)
        if state is None:
            return
        cmap = state.cmap
        agent = obj.get_agent()
        agent_name = (agent.name or agent.label) if agent is not None else ""
        akey = (broker, agent_name)
        self.agents[akey] = now
        self._gone.pop(akey, None)
        key = (broker, obj.get_object_id())
        entries = state.entries
        skipped = key in self._skipped
        if obj.is_deleted():
            self._names.pop(key, None)
            self._skipped.discard(key)
            known = entries.pop(key, None) is not None
            if known:
                state.invalidate()
            known = known or skipped
            # created and deleted between two publications: seen once, deleted
            new = not known and not snapshot and self._is_new(broker, obj)
            if new:
                self._count(broker, cmap.name, "created")
            if known or new:
                self._count(broker, cmap.name, "deleted")
            return
        if skipped:
            return
        entry = entries.get(key)
        sampled = obj.get_timestamps()[0]
        if entry is not None and sampled < entry.sampled:
            # older than what the store has (a query answer overtaken by an update):
            # a counter must not go back, Prometheus would take it for a reset
            self.stale_updates += 1
            return
        changes = obj.get_changes()
        if entry is None:
            entry = _Entry(akey)
            changes |= Change.PROPERTIES
            if not snapshot and self._is_new(broker, obj):
                self._count(broker, cmap.name, "created")
        elif Change.PROPERTIES in changes:
            entry.agent = akey
        relabelled = Change.PROPERTIES in changes or not entry.labels
        if relabelled:
            name = obj.get("name", obj.get("address"))
            if isinstance(name, str):
                self._names[key] = name
            labels = self._labels(broker, obj, cmap)
            if labels is None:
                if entries.pop(key, None) is not None:
                    state.invalidate()
                self._skipped.add(key)
                self.filtered += 1
                return
            entry.labels = labels
            entry.info = ",".join(f'{n}="{escape_label(self._element(broker, obj, e))}"'
                                  for n, e in cmap.info)
        state.write(entry, state.read(obj), relabelled)
        entry.updated = now
        entry.sampled = sampled
        entries[key] = entry

    def _is_new(self, broker: str, obj: ObjectLike) -> bool:
        return obj.get_timestamps()[1] >= self.since_ns.get(broker, 0)

    def _count(self, broker: str, class_name: str, what: str) -> None:
        if class_name in ("connection", "queue"):
            k = (broker, f"{class_name}_{what}")
            self.lifecycle[k] = self.lifecycle.get(k, 0) + 1

    def _element(self, broker: str, obj: ObjectLike, element: str) -> str:
        if element == "@agent":
            agent = obj.get_agent()
            return (agent.name or agent.label) if agent is not None else ""
        if element == "@index":
            return obj.get_index()
        name, _, key = element.partition(":")
        value = obj.get(name)
        if key:
            return _text(value.get(key)) if isinstance(value, dict) else ""
        if isinstance(value, ObjectId):
            return self._names.get((broker, value), "")
        return _text(value)

    def _labels(self, broker: str, obj: ObjectLike, cmap: ClassMap) -> str | None:
        """The object's label string, None when the filters leave it out."""
        parts = [f'broker="{escape_label(broker)}"']
        for label, element in cmap.labels:
            value = self._element(broker, obj, element)
            if cmap.filter is not None and cmap.filter[1] == label \
                    and not self.filters.passes(cmap.filter[0], value):
                return None
            parts.append(f'{label}="{escape_label(value)}"')
        return ",".join(parts)

    # ------------------------------------------------------------------ lifecycle

    def agent_left(self, broker: str, agent: str, now: float) -> None:
        """The agent left (or its broker's connection is down) at ``now``."""
        self._gone.setdefault((broker, agent), now)

    def broker_down(self, broker: str, now: float) -> None:
        """Every agent of ``broker`` counts as gone from ``now``."""
        for b, agent in list(self.agents):
            if b == broker:
                self.agent_left(b, agent, now)

    def sweep(self, broker: str, before: float) -> int:
        """Drop ``broker``'s objects not updated since ``before`` (after a new snapshot:
        what the broker no longer has); returns how many."""
        dropped = 0
        for state in self._states():
            stale = [k for k, e in state.entries.items() if k[0] == broker and e.updated < before]
            if stale:
                state.invalidate()
            for k in stale:
                del state.entries[k]
                self._names.pop(k, None)
            dropped += len(stale)
        self._skipped = {k for k in self._skipped if k[0] != broker}
        return dropped

    def expire(self, now: float, stale_after: float) -> int:
        """Drop the objects of agents gone for more than ``stale_after`` seconds, and
        those agents; returns how many objects left."""
        old = {a for a, t in self._gone.items() if now - t > stale_after}
        if not old:
            return 0
        dropped = 0
        for state in self._states():
            keys = [k for k, e in state.entries.items() if e.agent in old]
            if keys:
                state.invalidate()
            for k in keys:
                del state.entries[k]
                self._names.pop(k, None)
            dropped += len(keys)
        for a in old:
            self._gone.pop(a, None)
            self.agents.pop(a, None)
        return dropped

    def _states(self) -> Iterable[_ClassState]:
        yield from self._classes.values()
        yield from self._generic.values()

    def objects(self) -> int:
        """How many objects the store holds."""
        return sum(len(s.entries) for s in self._states())

    # ------------------------------------------------------------------ exposition

    def render(self) -> str:
        """The text exposition of every object (the families with samples only).

        Two objects with the same labels (a broker restarted: the old agent's object
        and the new one) give one series: the most recently updated.
        """
        out: list[str] = []
        budget = self.max_series
        cut = 0
        written = 0
        lifecycle = sorted(self.lifecycle.items())
        for metric, help_text, what in _LIFECYCLE:
            counts = [f'{metric}{{broker="{escape_label(b)}"}} {n}\n'
                      for (b, w), n in lifecycle if w == what]
            if counts:
                out.append(f"# HELP {metric} {help_text}\n# TYPE {metric} counter\n")
                out.extend(counts)
        for state in self._states():
            if not state.entries:
                continue
            live: dict[str, _Entry] = {}
            for e in state.entries.values():
                seen = live.get(e.labels)
                if seen is None or e.updated >= seen.updated:
                    live[e.labels] = e
            entries = list(live.values())
            in_class = sum(e.total for e in entries)
            if in_class <= budget:  # the common case: every sample, no counting
                # families no entry changed since the last scrape are reused as joined
                cache = len(entries) == len(state.entries)
                chunks = state.chunks
                for fi, fam in enumerate(state.families):
                    chunk = chunks[fi] if cache else None
                    if chunk is None:
                        chunk = "".join([e.texts[fi] for e in entries])
                        if cache:
                            chunks[fi] = chunk
                    if chunk:
                        out.append(fam.header)
                        out.append(chunk)
                budget -= in_class
                written += in_class
                continue
            for fi, fam in enumerate(state.families):
                parts, taken = [], 0
                for e in entries:  # whole objects, while the budget lasts
                    n = e.counts[fi]
                    if n and taken + n <= budget:
                        parts.append(e.texts[fi])
                        taken += n
                cut += sum(e.counts[fi] for e in entries) - taken
                budget -= taken
                written += taken
                if taken:
                    out.append(fam.header)
                    out.extend(parts)
        self.series = written
        self.series_cut = cut
        self.series_cut_total += cut
        return "".join(out)


_LIFECYCLE: Final = (
    ("qpidd_connections_opened_total", "Connections the exporter saw opened", "connection_created"),
    ("qpidd_connections_closed_total", "Connections the exporter saw closed", "connection_deleted"),
    ("qpidd_queues_declared_total", "Queues the exporter saw declared", "queue_created"),
    ("qpidd_queues_deleted_total", "Queues the exporter saw deleted", "queue_deleted"),
)
