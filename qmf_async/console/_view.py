"""The object view of a console session, as a pure core: :class:`ObjectView`.

Per object, the latest properties and statistics received, merged into every update
handed out.  An object first seen through only one part is held until a query (one
``G`` per agent and class) brings the other, for at most ``completion_timeout``; the
view holds at most ``max_objects`` objects (least recently updated evicted first);
deleted objects and those of departed agents leave it.

No I/O and no event loop here: records and the time go in, merged updates come out
through the ``deliver`` callback, and when objects must be completed the view returns
a :class:`Completion` for its owner to run (``start_round``, the query,
``answered``, ``done``).  The Session's object updates
(:mod:`~qmf_async.console._updates`) drive it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from ..wire import ClassKey, RawObjectRecord, RecordLayout, make_oid
from ._values import Change

__all__ = ["Completion", "Deliver", "ObjectView", "ViewLimits", "ViewOwner"]

#: how many deleted objects' last views are remembered at most
_MAX_GONE = 4096

#: an object in the view: (id of its broker connection, its object id's 16 bytes)
ViewKey = tuple[int, bytes]
#: (id of the broker connection, broker bank, agent bank, class): one completion batch
CompletionKey = tuple[int, int, int, ClassKey]

#: what an update of each opcode carries
_RECORD_CHANGES = {"c": Change.PROPERTIES, "i": Change.STATISTICS,
                   "g": Change.PROPERTIES | Change.STATISTICS}


class ViewLimits(Protocol):
    """The settings the view reads (a Session's options)."""

    @property
    def max_objects(self) -> int: ...

    @property
    def completion_timeout(self) -> float: ...


class ViewOwner(Protocol):
    """What holds the view's settings (a Session): read at each use, so a changed
    setting applies at once."""

    @property
    def options(self) -> ViewLimits: ...


#: ``deliver(broker, agent, record, raw, sofs, kind, changed)``: one merged update to
#: hand out (``raw``/``sofs``/``kind`` are the merged record's, ``record`` the one
#: received)
Deliver = Callable[[Any, Any, RawObjectRecord, bytes, int, str, Change], None]


class Completion:
    """The objects of one agent and class that wait for a completion query; made by
    :meth:`ObjectView.update`, run by the view's owner (``broker`` and ``agent`` are
    opaque to the view)."""

    __slots__ = ("agent", "batch", "broker", "class_key", "key")

    def __init__(self, broker: Any, agent: Any, class_key: ClassKey, key: CompletionKey,
                 first: ViewKey) -> None:
        self.broker = broker
        self.agent = agent
        self.class_key = class_key
        self.key = key
        #: objects for the next round, in arrival order
        self.batch: dict[ViewKey, None] = {first: None}

    @property
    def query(self) -> dict[str, str]:
        """The ``G`` of a round: every object of the class at the agent."""
        return {"_class": self.class_key.name, "_package": self.class_key.package}


class ObjectView:
    """The view's state and its rules (see the module's docstring).

    ``owner.options`` gives ``max_objects`` and ``completion_timeout``; ``deliver`` is
    called for every update handed out, in order.  Raises nothing of its own.
    """

    def __init__(self, owner: ViewOwner, deliver: Deliver) -> None:
        self._owner = owner
        self._deliver_to = deliver
        #: (id(broker), object id) -> the latest properties and statistics bytes,
        #: least recently updated first
        self.latest: dict[ViewKey, tuple[bytes | None, bytes | None]] = {}
        #: objects held for a missing part -> their updates in arrival order
        self.waiting: dict[ViewKey, list[tuple[Any, Any, RawObjectRecord]]] = {}
        #: the completion batches open now
        self.completions: dict[CompletionKey, Completion] = {}
        #: the last views of objects whose deletion came in a part (a ``c`` or an
        #: ``i``; agents publish both), with when: the other part is answered with
        #: what was known.  Kept ``completion_timeout`` seconds, at most _MAX_GONE
        #: objects (oldest out); a deletion in a ``g`` (whole) is not kept
        self.gone: dict[ViewKey, tuple[bytes | None, bytes | None, float]] = {}
        #: objects in ``latest`` whose properties no update handed out yet (they came
        #: from a completion query): their next statistics update announces them
        self.unannounced: set[ViewKey] = set()
        #: objects whose completion failed -> when (retried after completion_timeout)
        self.failed_at: dict[ViewKey, float] = {}
        #: completion queries sent, objects handed out without the part their
        #: completion did not bring, objects evicted at ``max_objects``
        self.completion_queries = 0
        self.completion_failures = 0
        self.objects_evicted = 0

    # ------------------------------------------------------------------ input

    def unwatched(self) -> None:
        """Nobody listens to updates: the view is dropped (it would go stale)."""
        self.latest.clear()
        self.gone.clear()
        self.failed_at.clear()
        self.unannounced.clear()

    def forget_agent(self, broker: Any, banks: tuple[int, int]) -> None:
        """The agent of ``banks`` on ``broker`` left: its objects leave the view."""
        if self.latest:
            bid = id(broker)
            for key in [k for k in self.latest
                        if k[0] == bid and make_oid(k[1]).agent_key() == banks]:
                del self.latest[key]
                self.failed_at.pop(key, None)
                self.unannounced.discard(key)

    def update(self, broker: Any, agent: Any, rec: RawObjectRecord,
               now: float) -> Completion | None:
        """A ``c`` or ``i`` from the topic (or a v2 object with both parts, a ``g``):
        delivered merged with the object's view, or, for a live object of a known
        agent whose properties (an ``i`` arrived) or statistics (a ``c`` arrived, and
        its class has statistics) were never received, held until the missing part
        arrives or a completion query brings it (updates of a held object queue
        behind it).  Returns a new :class:`Completion` for the owner to run, or None
        (nothing to ask, or the object joined a batch already open)."""
        key = (id(broker), rec.object_id_bytes)
        waiting = self.waiting.get(key)
        if waiting is not None:
            waiting.append((broker, agent or waiting[0][1], rec))
            if rec.opcode != waiting[0][2].opcode:  # the missing part arrived
                self._release(key, None, now)
            return None
        if agent is not None:
            known: tuple[bytes | None, bytes | None] | None = self.latest.get(key)
            if known is None and rec.is_deleted():
                was = self.gone.get(key)
                known = was[:2] if was is not None else None
            if rec.opcode == "i":
                missing = known is None or known[0] is None
            elif rec.opcode == "c":
                missing = (known is None or known[1] is None) \
                    and bool(rec.codec.schema.statistics)
            else:  # a "g" (QMF v2 data with both parts) is whole
                missing = False
            if missing:
                failed = self.failed_at.get(key)
                if failed is None or now - failed >= self._owner.options.completion_timeout:
                    return self._hold(broker, agent, rec, key)
        self._deliver(broker, agent, rec, key, now)
        return None

    # ------------------------------------------------------------------ completion

    def start_round(self, completion: Completion, now: float) -> list[ViewKey]:
        """The objects the next completion query is for (empty: none left, the
        completion is over).  Objects first seen deleted are handed out as they are:
        a query would not find them."""
        keys: list[ViewKey] = []
        dead: list[ViewKey] = []
        for k in completion.batch:
            held = self.waiting.get(k)
            if held is not None:  # else completed meanwhile
                (dead if held[0][2].is_deleted() else keys).append(k)
        completion.batch.clear()
        for k in dead:
            self._release(k, None, now, count=False)
        if keys:
            self.completion_queries += 1
        return keys

    def answered(self, completion: Completion, keys: Sequence[ViewKey],
                 records: Sequence[Any] | None, now: float) -> None:
        """The query of a round answered ``records`` (None: it failed): the objects
        of ``keys``, and those added to the batch since that it answers, are handed
        out; the others of the answer are kept in the view."""
        found: dict[bytes, tuple[bytes, bytes]] = {}
        class_key = completion.class_key
        for r in records or ():
            if type(r) is RawObjectRecord and r.codec.class_key == class_key:
                found[r.object_id_bytes] = (RecordLayout.properties(r.raw, r.sofs),
                                            RecordLayout.statistics(r.raw, r.sofs))
        batch = completion.batch
        done = list(keys)
        for k in [k for k in batch if k[1] in found]:
            del batch[k]
            done.append(k)
        for k in done:
            if k in self.waiting:  # else a c completed it meanwhile
                self._release(k, found.get(k[1]), now)
        self._seed(completion.broker, found)

    def done(self, completion: Completion) -> None:
        """The owner stopped running ``completion`` (finished, or cancelled)."""
        if self.completions.get(completion.key) is completion:
            del self.completions[completion.key]

    # ------------------------------------------------------------------ internals

    def _hold(self, broker: Any, agent: Any, rec: RawObjectRecord,
              key: ViewKey) -> Completion | None:
        self.waiting[key] = [(broker, agent, rec)]
        class_key = rec.codec.class_key
        ckey = (id(broker), agent.broker_bank, agent.agent_bank, class_key)
        open_ = self.completions.get(ckey)
        if open_ is not None:
            open_.batch[key] = None
            return None
        made = self.completions[ckey] = Completion(broker, agent, class_key, ckey, key)
        return made

    def _deliver(self, broker: Any, agent: Any, rec: RawObjectRecord, key: ViewKey,
                 now: float) -> None:
        raw, sofs = rec.raw, rec.sofs
        latest = self.latest
        live = not RecordLayout.is_deleted(raw)
        # popped and put back: the dict stays ordered by last update (eviction order)
        known = latest.pop(key, None)
        was = None
        if not live:
            was = self.gone.pop(key, None)
            if known is None and was is not None:
                known = was[:2]
        props, stats = known if known is not None else (None, None)
        if rec.opcode != "i":
            props = RecordLayout.properties(raw, sofs)
        if rec.opcode != "c":
            stats = RecordLayout.statistics(raw, sofs)
        changed = _RECORD_CHANGES[rec.opcode]
        if rec.opcode != "i":
            self.unannounced.discard(key)
        elif key in self.unannounced:
            # properties known from a completion query and never handed out: this
            # first update of the object carries them (object_props comes first)
            self.unannounced.discard(key)
            if props is not None:
                changed |= Change.PROPERTIES
        if not live:  # deleted: leaves the view
            self.failed_at.pop(key, None)
            self.unannounced.discard(key)
            if rec.opcode == "i" or (rec.opcode == "c" and rec.codec.schema.statistics):
                # a part of a deletion: the other may follow
                self._remember_gone(key, props, stats, now)
        else:
            latest[key] = (props, stats)
            if len(latest) > self._owner.options.max_objects:
                oldest = next(iter(latest))
                del latest[oldest]
                self.failed_at.pop(oldest, None)
                self.unannounced.discard(oldest)
                self.objects_evicted += 1
        # the update carries the newest header, properties and statistics seen
        kind = "g" if props is not None and stats is not None else rec.opcode
        if kind != rec.opcode:
            assert props is not None and stats is not None
            raw, sofs = RecordLayout.join(raw, props, stats)
        if not live:
            changed |= Change.DELETED
        self._deliver_to(broker, agent, rec, raw, sofs, kind, changed)

    def _remember_gone(self, key: ViewKey, props: bytes | None, stats: bytes | None,
                       now: float) -> None:
        """Remember the last view of an object whose deletion came in a part; those
        remembered longer than ``completion_timeout`` (or past _MAX_GONE) leave."""
        gone = self.gone
        horizon = now - self._owner.options.completion_timeout
        while gone:
            first = next(iter(gone))
            if len(gone) < _MAX_GONE and gone[first][2] >= horizon:
                break
            del gone[first]
        gone[key] = (props, stats, now)

    def _seed(self, broker: Any, found: Mapping[bytes, tuple[bytes, bytes]]) -> None:
        """Keep in the view the other objects a completion query brought: their first
        statistics-only update then needs no query of its own (qpidd over v2 sends an
        object's properties only when they change, so without this every object of a
        large class would cost its class a query round)."""
        bid = id(broker)
        latest, waiting = self.latest, self.waiting
        room = self._owner.options.max_objects - len(latest)
        for oid, parts in found.items():
            if room <= 0:
                break
            key = (bid, oid)
            if key not in latest and key not in waiting:
                latest[key] = parts
                self.unannounced.add(key)
                room -= 1

    def _release(self, key: ViewKey, answer: tuple[bytes, bytes] | None, now: float, *,
                 count: bool = True) -> None:
        """Hand out the held updates of an object, in order, once the part it lacked
        is known: from the first held update carrying it, else from the completion
        query's ``answer`` (properties, statistics).  With neither the completion
        failed: counted, and the updates handed out with what is known."""
        held = self.waiting.pop(key)
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
                self.failed_at[key] = now
        else:
            self.failed_at.pop(key, None)
            props, stats = self.latest.get(key) or (None, None)
            self.latest[key] = (part, stats) if need_props else (props, part)
            if need_props:
                self.unannounced.add(key)
        for broker, agent, rec in held:
            self._deliver(broker, agent, rec, key, now)
