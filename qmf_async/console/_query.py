"""The object queries of a console session: :class:`ObjectQueries`, a component a
:class:`~qmf_async.console._session.Session` builds and holds (its collaborators given
to it, not shared through ``self``), behind its ``get_objects`` and ``iter_objects``:
one ``G`` to every agent asked, the answers filtered and gathered within the timeout,
and the errors of the agents that failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import (
    AgentGoneError,
    DecodeError,
    NotConnectedError,
    PartialResultError,
    ProtocolError,
    QmfError,
    QmfTimeout,
    QueryTimeout,
    TransportError,
    UnknownClassError,
    UsageError,
)
from ..protocol import Selector, compile_selector
from ..wire import ClassKey, Message, ObjectId, RawObjectRecord
from ._broker import Broker
from ._links import SessionLink
from ._objects import QmfObject
from ._values import BrokerObjectId, RemoteAgent
from ._waits import Expired, Wait, within

if TYPE_CHECKING:
    from .. import wire as codec
    from ._options import SessionOptions

__all__ = ["ObjectQueries"]

log = logging.getLogger("qmf_async.session")


def _where_predicate(selector: Selector | None,
                     equals: Mapping[str, Any]) -> list[Any] | None:
    """The v2 ``_where`` implied by a query's selector and ``name=value`` filters
    (strings and booleans only; None when nothing translates)."""
    parts: list[Any] = [["eq", name, ["quote", value]] for name, value in equals.items()
                        if isinstance(value, (str, bool))]
    if selector is not None:
        found = selector.qmf_where()
        if found is not None:
            parts.append(found)
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else ["and", *parts]


class ObjectQueries:
    """Object queries fanned out to agents.

    Collaborators, given by the session: ``link`` (the proxies' session),
    ``brokers`` and ``options`` (read at each use: the session replaces them),
    ``connected`` (the connected brokers, of one broker or all; raises
    NotConnectedError), the schema cache ``schemas`` and the packages and classes the
    bus announced (``packages``, ``classes``: the session's own, kept current by it),
    ``get_packages`` and ``get_classes`` (asking the bus, with a timeout) and
    ``malformed`` (counts a body that failed to decode).
    """

    def __init__(self, link: SessionLink, brokers: Callable[[], list[Broker]],
                 options: Callable[[], SessionOptions],
                 connected: Callable[[Broker | None], list[Broker]],
                 schemas: codec.SchemaRegistry, packages: set[str],
                 classes: Mapping[ClassKey, int],
                 get_packages: Callable[[float], Awaitable[list[str]]],
                 get_classes: Callable[[str, float], Awaitable[list[ClassKey]]],
                 malformed: Callable[[], None]) -> None:
        self._link = link
        self._brokers = brokers
        self._options = options
        self._connected = connected
        self._schemas = schemas
        self._packages = packages
        self._classes = classes
        self._get_packages = get_packages
        self._get_classes = get_classes
        self._malformed = malformed

    @staticmethod
    async def _handshakes_done(brokers: list[Broker], timeout: float) -> None:
        """Wait (at most ``timeout``) for the handshakes of brokers still in one."""
        waiting = [b.handshake_done() for b in brokers if b.in_handshake]
        if waiting:
            with contextlib.suppress(TimeoutError):
                await within(asyncio.gather(*waiting), timeout)

    def _targets(self, brokers: list[Broker], _agent: RemoteAgent | None,
                 _objectId: ObjectId | None) -> list[tuple[Broker, RemoteAgent]]:
        if _agent is not None:
            broker = _agent.broker
            if broker not in brokers:
                if broker in self._brokers() and not broker.connected:
                    raise NotConnectedError(f"not connected to {broker.where}")
                raise UsageError(f"{_agent} does not belong to the selected broker(s)")
            if broker.known_agent((_agent.broker_bank, _agent.agent_bank)) is None:
                # aged out or deleted: nobody would answer, fail now instead of timing out
                raise AgentGoneError(f"{_agent} on {broker.where} is gone")
            return [(broker, _agent)]
        targets = []
        for b in brokers:
            if _objectId is not None:
                banks = _objectId.agent_key()
                agent = b.known_agent(banks) or b.see_agent(*banks)
                targets.append((b, agent))
            else:
                targets.extend((b, a) for a in b.agents())
        return targets

    def _prepare_query(self, _class: str | None, _package: str | None, _key: ClassKey | str | None,
                       _objectId: ObjectId | str | None) -> tuple[dict[str, Any], ClassKey | None,
                                                                  ObjectId | None]:
        if isinstance(_key, str):
            _key = ClassKey.parse(_key)
        if isinstance(_objectId, str):
            _objectId = ObjectId.parse(_objectId)
        query: dict[str, Any] = {}
        if _key is not None:
            query["_class"], query["_package"] = _key.name, _key.package
        if _class is not None:
            query["_class"] = _class
        if _package is not None:
            query["_package"] = _package
        if _objectId is not None:
            query = {"_objectid": str(_objectId)}
        if not query or ("_package" in query and "_class" not in query):
            raise UsageError("get_objects needs _class, _key or _objectId")
        return query, _key, _objectId

    async def collect(self, emit: Callable[[QmfObject], None], _class: str | None,
                       _package: str | None, _key: ClassKey | str | None,
                       _objectId: ObjectId | str | None, _agent: RemoteAgent | None,
                       _broker: Broker | None, _timeout: float | None,
                       where: str | Selector | None, property_equals: Mapping[str, Any]) -> None:
        """Query the agents asked and ``emit`` each object that passes the filters;
        raises what ``Session.get_objects`` documents."""
        unknown = sorted(k for k in property_equals if k.startswith("_"))
        if unknown:
            raise UsageError(f"get_objects has no option {', '.join(unknown)} (property "
                             f"filters never start with '_')")
        query, key, oid = self._prepare_query(_class, _package, _key, _objectId)
        selector = compile_selector(where)
        if isinstance(oid, BrokerObjectId):  # an id a session handed out: its broker
            if _broker is not None and oid.broker is not _broker:
                raise UsageError(f"object id {oid} is of {oid.broker.where}, not of "
                                 f"{_broker.where}")
            if _broker is None and oid.broker in self._brokers():
                _broker = oid.broker
        brokers = self._connected(_broker)
        options = self._options()
        timeout = options.timeout if _timeout is None else _timeout
        if _agent is None:
            # a broker that has just (re)connected learns its agents in its handshake
            await self._handshakes_done(brokers, timeout)
        targets = self._targets(brokers, _agent, oid)
        fan_out = _agent is None and oid is None
        delivered: list[QmfObject] = []
        seen = [False]  # a record of the asked class arrived (before the filters)
        from_raw = QmfObject.from_raw
        link = self._link
        limit = options.max_query_items
        over: list[ProtocolError] = []  # the answer grew past ``limit``

        def on_item(broker: Broker, agent: RemoteAgent
                    ) -> Callable[[Message | RawObjectRecord], None]:
            filtered = bool(property_equals) or selector is not None

            def take(msg: Message | RawObjectRecord) -> None:
                if type(msg) is not RawObjectRecord or over:
                    return
                codec = msg.codec
                if key is not None and codec.class_key != key:
                    return
                if oid is not None and msg.object_id_bytes != oid.raw:
                    return
                seen[0] = True
                obj = from_raw(link, broker, agent, codec, msg.raw,
                               msg.opcode, msg.sofs, None, msg.absent)
                if filtered:
                    try:
                        for name, want in property_equals.items():
                            if obj.get(name) != want:
                                return
                        if selector is not None and not selector(obj.values()):
                            return
                    except DecodeError as exc:
                        self._malformed()
                        log.warning("object with malformed values from %s dropped by the "
                                    "filter: %s", broker.where, exc)
                        return
                if len(delivered) >= limit:
                    # an answer this large is dropped, not kept: fail the query now
                    error = ProtocolError(f"the answer exceeds max_query_items={limit} "
                                          f"(the rest of it is dropped)")
                    over.append(error)
                    for _b, _a, e in entries:
                        if not e.future.done():
                            e.future.set_exception(error)
                    return
                delivered.append(obj)
                emit(obj)
            return take

        entries: list[tuple[Broker, RemoteAgent, Wait]] = []
        # what v2 agents that honour _where may drop themselves (checked here anyway)
        predicate = _where_predicate(selector, property_equals)
        try:
            for broker, agent in targets:
                entry = await broker.send_query(agent, query, on_item(broker, agent),
                                                predicate)
                entries.append((broker, agent, entry))
            if not entries:
                where = ", ".join(b.where for b in brokers)
                raise PartialResultError(f"no agent is known on {where} (no management broker "
                                         f"answered and no heartbeat arrived yet; see "
                                         f"wait_for_agents)", [], [])
            # one deadline, from when every request is out (a first query of a class
            # over v2 fetches its schemas before it is sent), for every answer's wait
            deadline = asyncio.get_running_loop().time() + timeout
            for _b, _a, entry in entries:
                entry.table.expire_at(entry, deadline)
            # each wait ends by the deadline (answered, failed, or Expired)
            await asyncio.gather(*(e.future for _, _, e in entries), return_exceptions=True)
            errors: list[BaseException] = []
            for broker, agent, entry in entries:
                if not entry.future.cancelled() and isinstance(entry.future.exception(),
                                                               Expired):
                    errors.append(QmfTimeout(f"{agent} on {broker.where} did not finish "
                                             f"within {timeout}s"))
                elif entry.future.cancelled():
                    errors.append(QmfError(f"query to {agent} was cancelled"))
                elif entry.future.exception() is not None:
                    exc = entry.future.exception()
                    if isinstance(exc, AgentGoneError) and fan_out and len(entries) > 1:
                        # an agent that left the bus during a query to every agent has no
                        # objects any more: the answer is what the remaining agents hold
                        log.debug("%s left during a query; its answer is not needed", agent)
                        continue
                    errors.append(exc)  # type: ignore[arg-type]
            if over and not errors:  # every answer had ended when the limit was passed
                errors.append(over[0])
            if errors:
                if not delivered and len(errors) == len(entries) and all(
                        isinstance(e, TransportError) for e in errors):
                    # nothing arrived because the connection (or every asked agent)
                    # went away: that is the error, not a partial result
                    raise errors[0]
                cls = QueryTimeout if all(isinstance(e, QmfTimeout) for e in errors) \
                    else PartialResultError
                failed = ", ".join(str(e) for e in errors[:3])
                raise cls(f"{len(errors)} of {len(entries)} agent(s) failed: {failed}",
                          list(delivered), errors) from errors[0]
            if not seen[0] and _class is not None and oid is None:
                await self._check_class_name(_class, _package,
                                             min(timeout, self._options().broker_timeout))
        finally:
            for _broker, _agent2, entry in entries:
                entry.close()

    def _class_known(self, name: str, package: str | None) -> bool:
        """A schema in the cache, or a class announced on the bus, has this name."""
        keys = [s.class_key for s in self._schemas]
        keys.extend(self._classes)
        return any(k.name == name and (package is None or k.package == package) for k in keys)

    async def _check_class_name(self, name: str, package: str | None, timeout: float) -> None:
        """After a query by class that no agent answered with an object: raise
        UnknownClassError when no known class has ``name`` (in ``package``).

        Known classes are the schemas in the cache and the classes the bus
        announced; when they do not have the name, the management broker (or every
        agent, without one) is asked for its packages and classes (``P``, ``Q``)
        first.  When that asking fails, nothing is raised: the session cannot tell.

        Raises:
            UnknownClassError: no known schema has the class or package.
        """
        if self._class_known(name, package):
            return
        try:
            packages = await self._get_packages(timeout)
            asked = [package] if package is not None else packages
            if package is None or package in packages:
                await asyncio.gather(*(self._get_classes(p, timeout) for p in asked))
        except QmfError as exc:
            log.debug("cannot tell whether class %r is known: %s", name, exc)
            return
        if self._class_known(name, package):
            return
        import difflib  # for the hints of an error only (start-up: docs/benchmarks.md)

        known_packages = sorted(self._packages | {s.class_key.package for s in self._schemas})
        if package is not None and package not in known_packages:
            close = difflib.get_close_matches(package, known_packages, n=3, cutoff=0.6)
            hint = f"; close: {', '.join(close)}" if close else ""
            raise UnknownClassError(f"no known schema has package {package!r}{hint} "
                                    f"(known: {', '.join(known_packages) or 'none'})")
        keys = {s.class_key for s in self._schemas} | set(self._classes)
        names = sorted({k.name for k in keys
                        if self._classes.get(k, 1) == 1
                        and (package is None or k.package == package)})
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
        where = f" in package {package!r}" if package is not None else ""
        hint = f"; close: {', '.join(close)}" if close else ""
        raise UnknownClassError(f"no known schema has class {name!r}{where}{hint}")
