"""The object view of a console session: :class:`ObjectView`, a mixin of
:class:`~qmf_async.console._session.Session`.

Per object, the latest properties and statistics received, merged into every
update handed out.  An object first seen through only one part is held until a
query (one ``G`` per agent and class) brings the other, for at most the session's
``completion_timeout``; the view holds at most ``max_objects`` objects (least
recently updated evicted first); deleted objects and those of departed agents
leave it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from ..wire import ClassKey, RawObjectRecord, RecordLayout, make_oid
from ._broker import Broker
from ._links import SessionLink
from ._objects import Change, QmfObject, RemoteAgent

if TYPE_CHECKING:
    from ._options import SessionOptions
    from ._subscriptions import Subscription

__all__ = ["ObjectView"]

log = logging.getLogger("qmf_async.session")

#: how many deleted objects' last views a session remembers
_MAX_GONE = 4096

#: an object in the session's view: (id of its Broker, its object id's 16 bytes)
_ViewKey = tuple[int, bytes]

#: what an update of each opcode carries
_RECORD_CHANGES = {"c": Change.PROPERTIES, "i": Change.STATISTICS,
                   "g": Change.PROPERTIES | Change.STATISTICS}


class ObjectView:
    """The object view's state and updates; the :class:`Session` it is mixed into
    provides the settings, the listeners and the callbacks named below."""

    if TYPE_CHECKING:  # provided by the Session
        options: SessionOptions
        _tasks: set[asyncio.Task[Any]]
        _update_subs: list[Subscription[QmfObject]]

        @property
        def console(self) -> Any: ...

        def _notify(self, name: str, *args: Any) -> None: ...

    def __init__(self) -> None:
        # The object view: (id(broker), object id bytes) -> the latest properties and
        # statistics bytes received, merged into the proxies of c/i updates; least
        # recently updated first, at most ``max_objects`` entries, deleted objects and
        # objects of departed agents leave it.
        self._latest: dict[_ViewKey, tuple[bytes | None, bytes | None]] = {}
        # objects first seen through an i, waiting for their properties: their updates
        # in arrival order, delivered when the completion query answers (or fails)
        self._waiting: dict[_ViewKey, list[tuple[Broker, RemoteAgent, RawObjectRecord]]] = {}
        # (id(broker), brokerBank, agentBank, class) -> objects for the next completion
        # query of that agent and class (the task sending it is running)
        # (in arrival order)
        self._completions: dict[tuple[int, int, int, ClassKey], dict[_ViewKey, None]] = {}
        # the last views of recently deleted objects (at most _MAX_GONE, oldest out):
        # the rest of a deletion (agents publish its c and i) answers what was known
        self._gone: dict[_ViewKey, tuple[bytes | None, bytes | None]] = {}
        # objects whose completion failed -> when (retried after completion_timeout)
        self._failed_at: dict[_ViewKey, float] = {}
        #: completion queries sent (a ``G`` per agent and class for objects first seen
        #: through statistics), objects delivered without properties because their
        #: completion failed or timed out, and objects evicted from the view when it
        #: held ``max_objects``
        self.completion_queries = 0
        self.completion_failures = 0
        self.objects_evicted = 0

    def _forget_objects_of(self, agent: RemoteAgent) -> None:
        """An agent left: its objects leave the view (they come back, completed
        again, if it returns)."""
        if self._latest:
            bid, banks = id(agent.broker), (agent.broker_bank, agent.agent_bank)
            for key in [k for k in self._latest
                        if k[0] == bid and make_oid(k[1]).agent_key() == banks]:
                del self._latest[key]
                self._failed_at.pop(key, None)

    def _object_update(self, broker: Broker, agent: RemoteAgent | None,
                       rec: RawObjectRecord) -> None:
        """A ``c`` or ``i`` from the topic (or a QMF v2 object with both parts, a
        ``g``): deliver it merged with the object's view,
        or, for a live object whose properties (an ``i`` arrived) or statistics (a
        ``c`` arrived, and its class has statistics) were never received, hold it
        until the missing part arrives or a completion query brings it (updates of
        a held object queue behind it)."""
        if not (self.console is not None or self._update_subs):
            if self._latest or self._gone:
                self._latest.clear()  # nobody listens: the view would go stale
                self._gone.clear()
                self._failed_at.clear()
            return
        key = (id(broker), rec.object_id_bytes)
        waiting = self._waiting.get(key)
        if waiting is not None:
            waiting.append((broker, agent or waiting[0][1], rec))
            if rec.opcode != waiting[0][2].opcode:  # the missing part arrived
                self._release(key, None)
            return
        if agent is not None:
            known = self._latest.get(key)
            if known is None and rec.is_deleted():
                known = self._gone.get(key)
            if rec.opcode == "i":
                missing = known is None or known[0] is None
            elif rec.opcode == "c":
                missing = (known is None or known[1] is None) \
                    and bool(rec.codec.schema.statistics)
            else:  # a "g" (QMF v2 data with both parts) is whole
                missing = False
            if missing:
                failed = self._failed_at.get(key)
                if failed is None or time.monotonic() - failed >= self.options.completion_timeout:
                    self._await_completion(broker, agent, rec, key)
                    return
        self._deliver(broker, agent, rec, key)

    def _deliver(self, broker: Broker, agent: RemoteAgent | None, rec: RawObjectRecord,
                 key: _ViewKey) -> None:
        raw, sofs = rec.raw, rec.sofs
        latest = self._latest
        live = not RecordLayout.is_deleted(raw)
        # popped and put back: the dict stays ordered by last update (eviction order)
        known = latest.pop(key, None)
        if known is None and not live:
            known = self._gone.get(key)
        props, stats = known if known is not None else (None, None)
        if rec.opcode != "i":
            props = RecordLayout.properties(raw, sofs)
        if rec.opcode != "c":
            stats = RecordLayout.statistics(raw, sofs)
        if not live:  # deleted: leaves the view (remembered a while among the gone)
            self._failed_at.pop(key, None)
            gone = self._gone
            gone.pop(key, None)
            gone[key] = (props, stats)
            if len(gone) > _MAX_GONE:
                del gone[next(iter(gone))]
        else:
            latest[key] = (props, stats)
            if len(latest) > self.options.max_objects:
                oldest = next(iter(latest))
                del latest[oldest]
                self._failed_at.pop(oldest, None)
                self.objects_evicted += 1
        # the proxy carries the newest header, properties and statistics seen
        kind = "g" if props is not None and stats is not None else rec.opcode
        if kind != rec.opcode:
            assert props is not None and stats is not None
            raw, sofs = RecordLayout.join(raw, props, stats)
        changed = _RECORD_CHANGES[rec.opcode]
        if not live:
            changed |= Change.DELETED
        # the Session this is mixed into is the proxies' SessionLink
        obj = QmfObject.from_raw(cast(SessionLink, self), broker, agent, rec.codec, raw,
                                 kind, sofs, changed)
        if rec.opcode == "c":
            self._notify("object_props", broker, obj)
        else:
            self._notify("object_stats", broker, obj)
        for sub in self._update_subs:
            sub.deliver(obj)

    def _await_completion(self, broker: Broker, agent: RemoteAgent, rec: RawObjectRecord,
                          key: _ViewKey) -> None:
        """Hold an object whose view lacks a part and add it to the next completion
        query of its agent and class (one query for every object waiting on them)."""
        self._waiting[key] = [(broker, agent, rec)]
        class_key = rec.codec.class_key
        ckey = (id(broker), agent.broker_bank, agent.agent_bank, class_key)
        batch = self._completions.get(ckey)
        if batch is not None:
            batch[key] = None
            return
        batch = self._completions[ckey] = {key: None}
        task = asyncio.get_running_loop().create_task(
            self._complete(broker, agent, class_key, ckey, batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _complete(self, broker: Broker, agent: RemoteAgent, class_key: ClassKey,
                        ckey: tuple[int, int, int, ClassKey], batch: dict[_ViewKey, None]
                        ) -> None:
        """Fetch the missing parts of the objects in ``batch`` with one ``G`` per
        round; objects added while a query is out are answered by it when it holds
        them, else by the next round.  The first round starts after the rest of the
        current body was routed: a ``c`` and an ``i`` of a new object usually come
        together and complete each other without a query."""
        query = {"_class": class_key.name, "_package": class_key.package}
        try:
            await asyncio.sleep(0)
            while batch:
                keys: list[_ViewKey] = []
                dead: list[_ViewKey] = []
                for k in batch:
                    held = self._waiting.get(k)
                    if held is not None:  # else completed meanwhile
                        (dead if held[0][2].is_deleted() else keys).append(k)
                batch.clear()
                for k in dead:
                    # first seen deleted: a query would not find it; what its body held
                    # is all there is
                    self._release(k, None, count=False)
                if not keys:
                    break
                self.completion_queries += 1
                found: dict[bytes, tuple[bytes, bytes]] = {}
                try:
                    records: list[Any] = await broker.query(agent, query,
                                                            self.options.completion_timeout)
                except Exception as exc:  # QmfError mostly; nothing may leave objects held
                    log.info("completing %d %s object(s) of %s on %s failed: %s", len(keys),
                             class_key, agent, broker.where, exc)
                else:
                    for r in records:
                        if type(r) is RawObjectRecord and r.codec.class_key == class_key:
                            found[r.object_id_bytes] = (RecordLayout.properties(r.raw, r.sofs),
                                                   RecordLayout.statistics(r.raw, r.sofs))
                for k in [k for k in batch if k[1] in found]:
                    del batch[k]
                    keys.append(k)
                for k in keys:
                    if k in self._waiting:  # else a c completed it meanwhile
                        self._release(k, found.get(k[1]))
                self._seed_view(broker, found)
        finally:
            if self._completions.get(ckey) is batch:
                del self._completions[ckey]

    def _seed_view(self, broker: Broker, found: Mapping[bytes, tuple[bytes, bytes]]) -> None:
        """Keep in the view the other objects a completion query brought: their first
        statistics-only update then needs no query of its own (qpidd over v2 sends an
        object's properties only when they change, so without this every object of a
        large class would cost its class a query round)."""
        bid = id(broker)
        latest, waiting = self._latest, self._waiting
        room = self.options.max_objects - len(latest)
        for oid, parts in found.items():
            if room <= 0:
                break
            key = (bid, oid)
            if key not in latest and key not in waiting:
                latest[key] = parts
                room -= 1

    def _release(self, key: _ViewKey, answer: tuple[bytes, bytes] | None, *,
                 count: bool = True) -> None:
        """Deliver the held updates of an object, in order, once the part it lacked
        is known: from the first held update carrying it, else from the completion
        query's ``answer`` (properties, statistics).  With neither the completion
        failed: counted, and the updates delivered with what is known."""
        held = self._waiting.pop(key)
        need_props = held[0][2].opcode == "i"
        part: bytes | None = None
        for _, _, rec in held:
            if need_props and rec.opcode != "i":
                part = RecordLayout.properties(rec.raw, rec.sofs)
                break
            if not need_props and rec.opcode != "c":
                part = RecordLayout.statistics(rec.raw, rec.sofs)
                break
        if part is None and answer is not None:
            part = answer[0] if need_props else answer[1]
        if part is None:
            if count:
                self.completion_failures += 1
                self._failed_at[key] = time.monotonic()
        else:
            self._failed_at.pop(key, None)
            props, stats = self._latest.get(key) or (None, None)
            self._latest[key] = (part, stats) if need_props else (props, part)
        for broker, agent, rec in held:
            self._deliver(broker, agent, rec, key)
