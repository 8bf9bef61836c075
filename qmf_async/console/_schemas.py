"""Schema fetches of a broker connection: :class:`SchemaFetches`, a part that
:class:`~qmf_async.console._broker.Broker` builds and holds.  A v1 ``S`` is sent to the agent of the
class and to the management broker at once and the first right answer wins; bodies
the core holds for an unknown schema are released when it arrives, dropped (and
counted) when it cannot be had.  The management broker's own agent (1.0) is asked
through the management broker alone: they are one peer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Final, Protocol

from .. import names
from ..errors import CommandError, ProtocolError, QmfError
from ..protocol import V2_DIRECT_EXCHANGE as V2_DIRECT
from ..protocol import ClassSeen, ConsoleProtocol, PackageSeen, SchemaNeeded
from ..wire import (
    ClassIndication,
    ClassKey,
    ClassQuery,
    Message,
    PackageIndication,
    PackageQuery,
    SchemaClass,
    SchemaRequest,
    SchemaResponse,
)
from ._options import SessionOptions
from ._v1route import QPIDD_AGENT
from ._values import RemoteAgent

__all__ = ["SchemaFetches", "gathered"]

log = logging.getLogger("qmf_async.session")

MANAGEMENT: Final = names.MANAGEMENT_EXCHANGE
#: the banks of the management broker's own agent over v1
MANAGEMENT_AGENT: Final = (1, 0)


class SchemaSession(Protocol):
    """What the schema fetches read of the session (a part of ``SessionSettings``)."""

    options: SessionOptions


class RequestPrimitive(Protocol):
    """The request primitive of the broker (``Broker.request``)."""

    def __call__(self, agent: RemoteAgent | None, msg_factory: Callable[[int], Message],
                 routing_key: str, *, query: bool, expect: str, timeout: float,
                 exchange: str = ...) -> Awaitable[Any]: ...


class SchemaFetches:
    """Schema requests of one broker connection (``S``, and the ``P``/``Q`` that list
    packages and classes), a part the :class:`Broker` builds and holds: it asks
    through the broker's request primitive (``request``), reads and releases the
    bodies its protocol core (``core``) holds, acts on the core's events (and on what
    its own answers announce) through ``handle``, and tells the session of a schema
    fetched (``schema_seen``): data goes up as return values and events, it never
    asks the session for anything.
    ``agents`` is the broker's live directory (read, never written); ``tasks`` the
    broker's set of background tasks (a fetch runs as one, closed with the broker)."""

    __slots__ = (
        "_agents",
        "_core",
        "_handle",
        "_management_known",
        "_request",
        "_schema_seen",
        "_session",
        "_tasks",
    )

    def __init__(self, *, session: SchemaSession, core: ConsoleProtocol,
                 agents: Mapping[tuple[int, int], RemoteAgent],
                 tasks: set[asyncio.Task[Any]], request: RequestPrimitive,
                 management_known: Callable[[], Awaitable[None]],
                 handle: Callable[[list[Any]], None],
                 schema_seen: Callable[[SchemaClass], None]) -> None:
        self._session = session
        self._core = core
        self._agents = agents
        self._tasks = tasks
        self._request = request
        self._management_known = management_known
        self._handle = handle
        self._schema_seen = schema_seen

    async def fetch_v1_schema(self, key: ClassKey, timeout: float,
                              agent: RemoteAgent | None = None) -> SchemaClass | None:
        """The schema of ``key`` with a v1 ``S``: asked of the v2 ``agent`` on its v2
        address (as the classic console does; v2 agents answer it there) unless it is
        qpidd's, and of the management broker (qpidd answers it whichever QMF version
        it publishes), both at once; None when neither can be asked.

        Raises:
            ProtocolError: answered with the schema of another class.
            QmfTimeout, CommandError, TransportError: every request failed.
        """
        targets: list[tuple[RemoteAgent | None, str, str]] = []
        if agent is not None and agent.name and _answers_own_schema(agent):
            targets.append((agent, agent.name, V2_DIRECT))
        if self._core.has_management:
            targets.append((None, "broker", MANAGEMENT))
        return await self.ask_schema(key, targets, timeout)

    async def ask_catalog(self, make: Callable[[int], Message], expect: str,
                          timeout: float) -> list[Message]:
        """A ``P`` or ``Q`` (``make`` builds it; ``expect``: ``p`` or ``q``) to the
        management broker of this connection, or to each of its agents at once without
        one; the indications answered.

        Raises:
            NotConnectedError, TransportError, QmfTimeout, CommandError: every request
                failed (the first error).
        """
        if self._core.has_management:
            asked = [self._request(None, make, "broker", query=True, expect=expect,
                                   timeout=timeout)]
        else:
            asked = [self._request(a, make, a.key, query=True, expect=expect, timeout=timeout)
                     for a in list(self._agents.values())]
        return await gathered(asked)

    async def classes_named(self, name: str, package: str | None,
                            timeout: float) -> list[ClassKey]:
        """The keys (every hash) of the classes called ``name`` (in ``package``; None:
        in any package) that this connection lists: a ``P`` (unless ``package`` is
        given), then a ``Q`` per package (at once), each within ``timeout``.  What the
        answers list goes up as the core's ``PackageSeen``/``ClassSeen`` events
        (through ``handle``: the session learns of them as from ``get_packages`` and
        ``get_classes``).

        Raises:
            NotConnectedError, TransportError, QmfTimeout, CommandError: as
                :meth:`ask_catalog`.
        """
        if package:
            packages = [package]
        else:
            listed = await self.ask_catalog(PackageQuery, "p", timeout)
            packages = list(dict.fromkeys(m.package for m in listed
                                          if isinstance(m, PackageIndication)))
            self._handle([PackageSeen(p) for p in packages])

        def class_query(package: str) -> Callable[[int], Message]:
            return lambda seq: ClassQuery(seq, package)

        answers = await asyncio.gather(*(self.ask_catalog(class_query(p), "q", timeout)
                                         for p in packages), return_exceptions=True)
        keys: list[ClassKey] = []
        seen: list[Any] = []
        error: BaseException | None = None
        for answer in answers:
            if isinstance(answer, BaseException):
                error = error or answer
                continue
            for msg in answer:
                if isinstance(msg, ClassIndication):
                    seen.append(ClassSeen(int(msg.kind), msg.class_key))
                    if msg.class_key.name == name and msg.class_key not in keys:
                        keys.append(msg.class_key)
        self._handle(seen)
        if error is not None:
            raise error
        return keys

    async def ask_schema(self, key: ClassKey,
                         targets: list[tuple[RemoteAgent | None, str, str]],
                         timeout: float) -> SchemaClass | None:
        """Send a v1 ``S`` for ``key`` to every target (agent, routing key, exchange) at
        once and return the first schema of ``key`` answered; the other requests are
        then withdrawn.  All at once, not one after the other: an agent that does not
        know the class may stay silent, and a console that waited for it first would
        wait out ``timeout`` before asking the management broker.  None when there is
        no target to ask.

        Raises:
            ProtocolError: a target answered with another class's schema (or another
                answer) and no other target answered right.
            QmfTimeout, CommandError, TransportError: every request failed.
        """
        async def ask(who: RemoteAgent | None, routing: str, exchange: str) -> SchemaClass:
            reply = await self._request(who, lambda seq: SchemaRequest(seq, key), routing,
                                       query=False, expect="s", timeout=timeout,
                                       exchange=exchange)
            if not isinstance(reply, SchemaResponse):
                raise ProtocolError(f"{routing} answered the schema request for {key} "
                                    f"with {type(reply).__name__}")
            if not _schema_of(reply, key, routing):
                raise ProtocolError(f"{routing} answered the schema request for {key} "
                                    f"with the schema of {reply.schema.class_key}")
            return reply.schema

        if not targets:
            return None
        tasks = [asyncio.ensure_future(ask(*target)) for target in targets]
        error: BaseException | None = None
        try:
            for next_done in asyncio.as_completed(tasks):
                try:
                    return await next_done
                except (QmfError, CommandError) as exc:
                    # a wrong answer says more than a timeout or a refusal elsewhere
                    if not isinstance(error, ProtocolError):
                        error = exc
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        assert error is not None  # every target failed
        raise error

    def on_schema_needed(self, ev: SchemaNeeded) -> None:
        """The core holds bodies of a class whose schema it lacks: fetch it (in a task
        of the broker's)."""
        agent = self._agents.get(ev.agent) if ev.agent is not None else None
        task = asyncio.get_running_loop().create_task(self._fetch_schema(ev.class_key, agent))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _fetch_schema(self, key: ClassKey, agent: RemoteAgent | None) -> None:
        """Fetch the schema bodies are held for (of their agent and of the management
        broker, at once); the bodies are dropped when it cannot be had."""
        why: str
        try:
            # a body may arrive on the topic before ``b`` does: whether the management
            # broker can be asked is known only then
            await self._management_known()
            targets: list[tuple[RemoteAgent | None, str, str]] = []
            management = self._core.has_management
            # the management broker's own agent (1.0) is the management broker:
            # asking both would have it answer (and this console decode) it twice
            if agent is not None and _answers_own_schema(agent) \
                    and not (management and _is_management_agent(agent)):
                targets.append((agent, agent.key, MANAGEMENT))
            if management:
                targets.append((None, "broker", MANAGEMENT))
            try:
                schema = await self.ask_schema(key, targets, self._session.options.schema_timeout)
            except (QmfError, CommandError) as exc:
                why = str(exc)
            else:
                if schema is not None:
                    self._schema_seen(schema)
                    self.release_held(key)  # the core routed them already (SchemaSeen)
                    return
                why = "no agent to ask"
            self._handle(self._core.drop_held(f"schema {key} could not be fetched: {why}",
                                              key))
        finally:
            self._core.fetch_finished(key)

    def release_held(self, key: ClassKey) -> None:
        """The schema of ``key`` arrived: route the bodies held for it."""
        if key in self._core.held:
            self._handle(self._core.schema_known(key, time.monotonic()))


def _answers_own_schema(agent: RemoteAgent) -> bool:
    """Whether a v1 ``S`` for a class of ``agent`` is asked of the agent itself: not of
    qpidd's agent (banks 1.0, named ``apache.org:qpidd:...`` over v2), which answers no
    ``S`` of its own: the management broker does."""
    return not (agent.name and agent.name.startswith(QPIDD_AGENT))


def _is_management_agent(agent: RemoteAgent) -> bool:
    """Whether ``agent`` is the management broker's own agent (banks 1.0 over v1),
    whose ``S`` the management broker answers on ``broker`` as well."""
    return not agent.name and (agent.broker_bank, agent.agent_bank) == MANAGEMENT_AGENT


def _schema_of(reply: SchemaResponse, key: ClassKey, who: str) -> bool:
    """Whether a schema answer is for the class asked for; a schema of another class
    or hash (an agent that lies, or is confused) is logged and not used."""
    if reply.schema.class_key == key:
        return True
    log.warning("%s answered the schema request for %s with the schema of %s: not used",
                who, key, reply.schema.class_key)
    return False


async def gathered(asked: Iterable[Awaitable[list[Message]]]) -> list[Message]:
    """The answers of requests sent at once, together: what every one that succeeded
    returned, in order.

    Raises:
        BaseException: the first request's error, when none succeeded.
    """
    results: list[Message] = []
    errors: list[BaseException] = []
    for outcome in await asyncio.gather(*asked, return_exceptions=True):
        if isinstance(outcome, BaseException):
            errors.append(outcome)
        else:
            results.extend(outcome)
    if errors and not results:
        raise errors[0]
    return results
