"""qpidd's fast path: queries to its own agent over QMF v1 on a connection that speaks v2.

A stock qpidd publishes QMF v2 only, yet answers v1 queries whatever its
``--mgmt-qmf1``, and it builds a v1 answer 20 to 40 times cheaper than a v2 one
(docs/qmf-versions.md).  On a connection that speaks v2 (the default for qpidd),
:class:`V1Route` sends a query to qpidd's agent as a v1 ``G`` and hands out its records
with the identities v2 gives the same objects: each object id and each reference
becomes the id the v2 side makes from qpidd's v2 object name
(:func:`~qmf_async.protocol.qpidd_object_name`), so an object from ``get_objects``, its
updates from ``object_updates()``, events and method calls agree.

Names of referenced objects come from the records translated so far on this
connection; those still unknown are asked for over v1 (by class, or by id).  When a
query's records cannot all be named (a referenced object deleted meanwhile, a class
whose names do not follow the rule), the query is sent over v2 instead, as before, and
that class keeps the v2 path on this connection: nothing is lost or given two ids.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

from ..errors import CommandError, NotConnectedError, QmfTimeout
from ..names import QPIDD_AGENT_PREFIX
from ..protocol import qpidd_object_name
from ..wire import (
    ClassKey,
    ObjectId,
    QmfType,
    RawObjectRecord,
    RecordLayout,
    SchemaMethod,
)

if TYPE_CHECKING:
    from ._v2 import V2Link
    from ._values import RemoteAgent
    from ._waits import Wait, Waits

__all__ = ["RouteHost", "V1Route"]

log = logging.getLogger("qmf_async.console")

#: qpidd's agent over v2 (``vendor:product:instance``) and its banks over v1
QPIDD_AGENT: Final = QPIDD_AGENT_PREFIX
_QPIDD_BANKS: Final = (1, 0)
#: names remembered per connection (v1 id -> v2 name), oldest forgotten first
_MAX_NAMES: Final = 2_000_000
#: at most this many unknown references are asked for one by one; more are asked
#: for by the class their property names (``queueRef`` -> ``queue``)
_MAX_BY_ID: Final = 32
#: rounds of asking for referenced objects (a binding's queue, a queue's vhost, the
#: vhost's broker ...)
_MAX_ROUNDS: Final = 4
_ZERO: Final = bytes(16)
#: reference properties whose class is not their name without ``Ref``
_REF_CLASSES: Final = {"altExchange": "exchange", "registeredTo": "broker"}


class RouteHost(Protocol):
    """What :class:`V1Route` needs of its broker connection."""

    where: str

    @property
    def v2(self) -> V2Link | None: ...

    @property
    def session(self) -> Any: ...

    @property
    def has_management(self) -> bool: ...

    @property
    def waits(self) -> Waits: ...

    async def send_v1_query(self, banks: tuple[int, int], query: Mapping[str, Any],
                            sink: Callable[[Any], None]) -> Wait: ...


def _ref_class(prop: str) -> str | None:
    """The class a reference property points to, by qpidd's naming (None: unknown)."""
    if prop in _REF_CLASSES:
        return _REF_CLASSES[prop]
    return prop[:-3] if prop.endswith("Ref") and len(prop) > 3 else None


class V1Route:
    """The fast path of one broker connection (made anew for each connection)."""

    def __init__(self, broker: RouteHost) -> None:
        self.broker = broker
        #: qpidd's v1 object id -> its v2 object name (this connection)
        self.names: dict[bytes, str] = {}
        #: the id handed out -> qpidd's v1 id (method calls and ``_objectId`` queries)
        self.v1_ids: dict[bytes, bytes] = {}
        #: classes whose answers could not all be named: they keep the v2 path
        self.v2_only: set[str] = set()
        #: queries answered over v1, those sent over v2 instead, method calls over v1
        self.queries = 0
        self.fallbacks = 0
        self.calls = 0
        self._refs: dict[ClassKey, tuple[tuple[int, str], ...]] = {}

    # ------------------------------------------------------------------ routing

    def takes(self, agent: RemoteAgent, query: Mapping[str, Any]) -> bool:
        """Whether ``query`` to ``agent`` goes over v1: qpidd's own agent, a
        management broker answering v1, a class query (or an id this path handed out),
        a class not left to v2."""
        broker = self.broker
        if not (agent.name and agent.name.startswith(QPIDD_AGENT) and broker.has_management
                and broker.session.options.qmf_version is None):
            return False
        if "_objectid" in query:
            return self._v1_query(query) is not None
        name = query.get("_class")
        return isinstance(name, str) and name not in self.v2_only

    def _v1_query(self, query: Mapping[str, Any]) -> dict[str, Any] | None:
        """``query`` as sent over v1 (an ``_objectid`` becomes qpidd's v1 id)."""
        if "_objectid" not in query:
            return dict(query)
        try:
            raw = ObjectId.parse(str(query["_objectid"])).raw
        except ValueError:
            return None
        v1 = self.v1_ids.get(raw)
        return None if v1 is None else {"_objectid": str(ObjectId(v1))}

    def start(self, agent: RemoteAgent, query: Mapping[str, Any],
              sink: Callable[[RawObjectRecord], None], where: list[Any] | None) -> Wait:
        """Start the query; its records go to ``sink`` once all are named.  The wait
        (under no key: a task of its own computes the answer, its requests go
        through the broker's) completes once all were handed out; closing it stops
        the task."""
        wait = self.broker.waits.open(None)
        task = asyncio.get_running_loop().create_task(
            self._run(agent, dict(query), sink, where, wait))

        def stop() -> None:
            if not task.done() and task is not asyncio.current_task():
                task.cancel()
        wait.on_close = stop
        return wait

    async def _run(self, agent: RemoteAgent, query: dict[str, Any],
                   sink: Callable[[RawObjectRecord], None], where: list[Any] | None,
                   wait: Wait) -> None:
        try:
            records = await self._answer(query)
            out = None if records is None else await self._translate_all(records, agent)
            if out is None:
                await self._over_v2(agent, query, sink, where, wait)
                return
            self.queries += 1
            self._sweep(query, out)
            for rec in out:
                if wait.future.done():
                    return
                sink(rec)
            if not wait.future.done():
                wait.future.set_result(None)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            if not wait.future.done():
                wait.future.set_exception(exc)

    async def _answer(self, query: Mapping[str, Any]) -> list[RawObjectRecord] | None:
        """The v1 answer's records (None: qpidd refused the v1 query).

        Raises:
            NotConnectedError, TransportError, ConnectionLostError: as a request.
        """
        v1 = self._v1_query(query)
        if v1 is None:
            return None
        try:
            # bounded by the caller, as every wait of a streamed query (it closes the
            # route's wait at its deadline, which cancels this task)
            return await self._records(v1, None)
        except CommandError as exc:
            log.info("qpidd on %s refused a v1 query (%s): asked over v2", self.broker.where,
                     exc)
            return None

    async def _records(self, query: Mapping[str, Any], timeout: float | None
                       ) -> list[RawObjectRecord]:
        """The records of one v1 query to qpidd's agent (``timeout`` None: the caller
        bounds it).

        Raises:
            QmfTimeout: no complete answer within ``timeout``.
            CommandError, NotConnectedError, TransportError: as a request.
        """
        found: list[RawObjectRecord] = []

        def take(msg: Any) -> None:
            if type(msg) is RawObjectRecord:
                found.append(msg)
        broker = self.broker
        wait = await broker.send_v1_query(_QPIDD_BANKS, query, take)
        await wait.result(timeout, lambda: QmfTimeout(
            f"no complete v1 answer from qpidd on {broker.where} within {timeout}s"))
        return found

    async def _over_v2(self, agent: RemoteAgent, query: Mapping[str, Any],
                       sink: Callable[[RawObjectRecord], None], where: list[Any] | None,
                       wait: Wait) -> None:
        """The query over v2, as without this path."""
        self.fallbacks += 1
        name = query.get("_class")
        if isinstance(name, str):
            self.v2_only.add(name)
        link = self.broker.v2
        if link is None:  # the connection is gone: as the v2 path would fail
            raise NotConnectedError(f"not connected to {self.broker.where}")
        inner = await link.send_query(agent, query, sink, where=where)
        await inner.result(None)
        if not wait.future.done():
            wait.future.set_result(None)

    def _sweep(self, query: Mapping[str, Any], out: list[RawObjectRecord]) -> None:
        """After the whole answer of a class query: the objects of that class this
        path handed out before and not in ``out`` are gone; their ids are released
        ``forget_deleted_after`` seconds from now (a poller that never sees the
        deletions keeps nothing of them)."""
        cls = query.get("_class")
        link = self.broker.v2
        if "_objectid" in query or not isinstance(cls, str) or link is None or not self.v1_ids:
            return
        package = query.get("_package") or None
        answered = {r.object_id_bytes for r in out}
        names = self.names
        stale: list[bytes] = []
        for oid, v1 in self.v1_ids.items():
            if oid in answered:
                continue
            name = names.get(v1)
            if name is None:
                continue
            pkg, _, rest = name.partition(":")
            if rest.partition(":")[0] == cls and (package is None or pkg == package):
                stale.append(oid)
        unknown = link.retire(stale, answered)
        if unknown:
            self.forget(unknown)

    def forget(self, released: Iterable[bytes]) -> None:
        """The objects this path handed out as ``released`` were deleted a while ago
        (:meth:`V2Link.age <qmf_async.console._v2.V2Link.age>`): their qpidd ids and
        names are forgotten."""
        v1_ids, names = self.v1_ids, self.names
        for raw in released:
            v1 = v1_ids.pop(raw, None)
            if v1 is not None:
                names.pop(v1, None)

    # ------------------------------------------------------------------ methods

    def method_target(self, raw_oid: bytes, method: SchemaMethod, args: Mapping[str, Any]
                      ) -> tuple[bytes, dict[str, Any]] | None:
        """qpidd's v1 id of the object this path handed out as ``raw_oid``, and
        ``args`` with each reference as qpidd's v1 id: a call to send over v1 (None:
        not an object of this path, or a reference it cannot translate; call over
        v2)."""
        broker = self.broker
        v1 = self.v1_ids.get(raw_oid)
        if (v1 is None or not broker.has_management
                or broker.session.options.qmf_version is not None):
            return None
        out = dict(args)
        for arg in method.in_args:
            value = out.get(arg.name)
            if arg.type == QmfType.REF and isinstance(value, ObjectId) \
                    and value.raw != _ZERO:
                ref = self.v1_ids.get(value.raw)
                if ref is None:
                    return None
                out[arg.name] = ObjectId(ref)
        self.calls += 1
        return v1, out

    def out_args(self, method: SchemaMethod, args: Mapping[str, Any],
                 banks: tuple[int, int]) -> dict[str, Any]:
        """A v1 answer's output arguments with each reference as the id v2 gives the
        object (left as qpidd's v1 id when its name is not known)."""
        link = self.broker.v2
        out = dict(args)
        for arg in method.out_args:
            value = out.get(arg.name)
            if link is not None and arg.type == QmfType.REF and isinstance(value, ObjectId):
                name = self.names.get(value.raw)
                if name is not None:
                    out[arg.name] = ObjectId(link.name_id(banks, name, _epoch(value.raw)))
        return out

    # ------------------------------------------------------------------ naming

    def _ref_props(self, rec: RawObjectRecord) -> tuple[tuple[int, str], ...]:
        key = rec.codec.class_key
        found = self._refs.get(key)
        if found is None:
            found = self._refs[key] = tuple(
                (i, p.name) for i, p in enumerate(rec.codec.schema.properties)
                if p.type == QmfType.REF)
        return found

    def _remember(self, raw: bytes, name: str) -> None:
        names = self.names
        if raw not in names and len(names) >= _MAX_NAMES:
            del names[next(iter(names))]
        names[raw] = name

    async def _name_all(self, records: Iterable[RawObjectRecord], rounds: int) -> bool:
        """Name every record (asking for referenced objects as needed); False when
        some could not be named."""
        names = self.names
        pending = [(r, r.properties or ()) for r in records
                   if r.opcode != "i" and r.object_id_bytes not in names]
        return await self._name_decoded(pending, rounds)

    async def _name_decoded(self, pending: list[tuple[RawObjectRecord, tuple[Any, ...]]],
                            rounds: int) -> bool:
        names = self.names
        for round_ in range(_MAX_ROUNDS + 1):
            unknown: dict[bytes, str] = {}
            rest = []
            for rec, props in pending:
                name = qpidd_object_name(rec.codec.schema, props, names.get)
                if name is not None:
                    self._remember(rec.object_id_bytes, name)
                    continue
                rest.append((rec, props))
                schema_props = rec.codec.schema.properties
                for i, prop in self._ref_props(rec):
                    value = props[i]
                    if (value is not None and value.raw != _ZERO and value.raw not in names
                            and schema_props[i].index):
                        unknown[value.raw] = prop
            if not rest:
                return True
            if not unknown or round_ == _MAX_ROUNDS or rounds >= _MAX_ROUNDS:
                return False
            await self._resolve(unknown, rounds + 1)
            pending = rest
        return False

    async def _resolve(self, unknown: Mapping[bytes, str], rounds: int) -> None:
        """Ask qpidd over v1 for the objects of these ids (``id -> the property that
        references it``) and name them."""
        queries: list[dict[str, Any]] = []
        if len(unknown) > _MAX_BY_ID:
            classes = {_ref_class(prop) for prop in unknown.values()}
            queries = [{"_class": c} for c in sorted(c for c in classes if c)]
        else:
            queries = [{"_objectid": str(ObjectId(raw))} for raw in unknown]
        timeout = self.broker.session.options.timeout
        answers = await asyncio.gather(*(self._records(q, timeout) for q in queries),
                                       return_exceptions=True)
        found: list[RawObjectRecord] = []
        for answer in answers:
            if isinstance(answer, BaseException):
                if isinstance(answer, asyncio.CancelledError):
                    raise answer
                log.debug("v1 lookup on %s failed: %s", self.broker.where, answer)
                continue
            found.extend(answer)
        await self._name_all(found, rounds)

    # ------------------------------------------------------------------ translation

    async def _translate_all(self, records: list[RawObjectRecord], agent: RemoteAgent
                             ) -> list[RawObjectRecord] | None:
        """Every record with v2 identities (None: some could not be named)."""
        names = self.names
        unnamed = [(r, r.properties or ()) for r in records
                   if r.opcode != "i" and r.object_id_bytes not in names]
        if unnamed and not await self._name_decoded(unnamed, 0):
            return None
        # where each record's references are (found without decoding its values)
        refs = [self._ref_slots(r) for r in records]
        # references outside the index (a queue's alternate exchange ...)
        unknown: dict[bytes, str] = {}
        for found in refs:
            for _, prop, value in found:
                if value not in names:
                    unknown[value] = prop
        if unknown:
            await self._resolve(unknown, 1)
        link = self.broker.v2
        if link is None:
            return None
        ids = _Ids(link.name_id, (agent.broker_bank, agent.agent_bank), names, self.v1_ids)
        out = []
        translate = self._translate
        for rec, found in zip(records, refs, strict=True):
            new = translate(rec, found, ids)
            if new is None:
                return None
            out.append(new)
        return out

    def _ref_slots(self, rec: RawObjectRecord) -> list[tuple[int, str, bytes]]:
        """Each reference ``rec`` carries to an object (not a null one): (where it is,
        the property, qpidd's v1 id).  Where: its offset in the record's bytes, or,
        for a class the codec cannot scan (an ``object`` value), ``-1 - index`` of the
        property, the properties then decoded."""
        props = self._ref_props(rec)
        if not props or rec.opcode == "i":
            return []
        raw = rec.raw
        offsets = rec.codec.ref_offsets(raw)
        found: list[tuple[int, str, bytes]] = []
        if offsets is None:
            values = rec.properties or ()
            for i, prop in props:
                value = values[i]
                if value is not None and value.raw != _ZERO:
                    found.append((-1 - i, prop, value.raw))
            return found
        for (_, prop), off in zip(props, offsets, strict=True):
            if off is not None:
                value = raw[off:off + 16]
                if value != _ZERO:
                    found.append((off, prop, value))
        return found

    def _translate(self, rec: RawObjectRecord, refs: list[tuple[int, str, bytes]],
                   ids: _Ids) -> RawObjectRecord | None:
        """``rec`` with the ids v2 gives its object and the objects it references
        (``refs``, from :meth:`_ref_slots`); None: one of them has no known name.  A
        reference is 16 bytes either way: it is written over in place."""
        oid = ids.of(rec.object_id_bytes)
        if oid is None:
            return None
        raw, sofs = rec.raw, rec.sofs
        header = _header(*_times(raw), oid)
        if not refs:
            return RawObjectRecord(rec.opcode, rec.seq, rec.codec,
                                   header + raw[_HEADER_SIZE:], sofs)
        if refs[0][0] < 0:  # not scanned: the properties decoded, changed, encoded
            values = list(rec.properties or ())
            for where, _, value in refs:
                ref = ids.ref(value)
                if ref is None:
                    return None
                values[-1 - where] = ref
            out = bytearray(header)
            rec.codec.properties[1](out, values)
            new_sofs = len(out)
            out += raw[sofs:]
            return RawObjectRecord(rec.opcode, rec.seq, rec.codec, bytes(out), new_sofs)
        out = bytearray(raw)
        out[:_HEADER_SIZE] = header
        for where, _, value in refs:
            ref = ids.ref(value)
            if ref is None:
                return None
            out[where:where + 16] = ref.raw
        return RawObjectRecord(rec.opcode, rec.seq, rec.codec, bytes(out), sofs)


def _epoch(v1: bytes) -> int | None:
    """The agent epoch qpidd gives the object of v1 id ``v1`` over v2: the id's boot
    sequence (none for a persistent object, whose sequence is 0)."""
    return ((v1[0] << 8 | v1[1]) & 0xFFF) or None


_HEADER_SIZE: Final = RecordLayout.HEADER_SIZE
_header = RecordLayout.header
_times = RecordLayout.timestamps


class _Ids:
    """qpidd's v1 ids to the ids v2 gives the same objects, for one translation
    (references repeat: each is made once)."""

    __slots__ = ("banks", "make", "names", "refs", "v1_ids")

    def __init__(self, make: Callable[[tuple[int, int], str, int | None], bytes],
                 banks: tuple[int, int],
                 names: Mapping[bytes, str], v1_ids: dict[bytes, bytes]) -> None:
        self.make = make
        self.banks = banks
        self.names = names
        self.v1_ids = v1_ids
        self.refs: dict[bytes, ObjectId] = {}

    def of(self, v1: bytes) -> bytes | None:
        """The id of the object whose v1 id is ``v1`` (remembered for calls)."""
        name = self.names.get(v1)
        if name is None:
            return None
        oid = self.make(self.banks, name, _epoch(v1))
        v1_ids = self.v1_ids
        if oid not in v1_ids and len(v1_ids) >= _MAX_NAMES:
            del v1_ids[next(iter(v1_ids))]
        v1_ids[oid] = v1
        return oid

    def ref(self, v1: bytes) -> ObjectId | None:
        """A reference to the object whose v1 id is ``v1``."""
        found = self.refs.get(v1)
        if found is None:
            name = self.names.get(v1)
            if name is None:
                return None
            found = self.refs[v1] = ObjectId(self.make(self.banks, name, _epoch(v1)))
        return found
