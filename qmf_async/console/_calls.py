"""Method calls of a broker connection: :class:`MethodCalls`, a part that
:class:`~qmf_async.console._broker.Broker` builds and holds.  A call on an object
received over QMF v2 goes over v2; one on an object read over qpidd's fast path, or
received over v1, is a v1 ``M`` to the object's agent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import AgentGoneError, MethodError, QmfTimeout
from ..protocol import ConsoleProtocol
from ..transport import TransportProtocol
from ..wire import CommandComplete, MethodResponse, SchemaMethod
from ._links import SessionSettings
from ._objects import QmfObject
from ._v1route import V1Route
from ._values import MethodResult
from ._waits import Expired, Waits

if TYPE_CHECKING:  # console._v2 loads where QMF v2 is spoken only
    from ._v2 import V2Link

__all__ = ["MethodCalls", "method_result"]

#: method routes a broker connection keeps at most (cleared when full: a few entries
#: per agent boot)
_MAX_METHOD_ROUTES = 1024


def method_result(msg: MethodResponse) -> MethodResult:
    """A v1 method response as the :class:`MethodResult` a call returns."""
    return MethodResult(msg.status, msg.text, msg.arguments or {})


class MethodCalls:
    """Schema method calls of one broker connection, a part the :class:`Broker` builds
    and holds: a v1 ``M`` is built by the broker's protocol core (``core``) and awaited
    through its request primitive (``waits``); ``check`` is the broker's (the transport,
    or NotConnectedError); ``where`` says the broker's address (it changes once
    connected over AMQP 1.0).  The broker sets the QMF v2 side and qpidd's fast path of
    its current connection with :meth:`use`."""

    __slots__ = (
        "_check",
        "_core",
        "_method_routes",
        "_route",
        "_session",
        "_v2",
        "_waits",
        "_where",
    )

    def __init__(self, *, session: SessionSettings, core: ConsoleProtocol, waits: Waits,
                 check: Callable[[], TransportProtocol], where: Callable[[], str]) -> None:
        self._session = session
        self._core = core
        self._waits = waits
        self._check = check
        self._where = where
        self._v2: V2Link | None = None
        self._route: V1Route | None = None
        #: first half of an object id -> ((broker bank, agent bank), routing key of
        #: its agent): this connection's own
        self._method_routes: dict[bytes, tuple[tuple[int, int], str]] = {}

    def use(self, v2: V2Link | None, route: V1Route | None) -> None:
        """Call over ``v2`` (the v2 side of the connection, None over v1) and through
        ``route`` (qpidd's fast path over v2, None over v1) from now on."""
        self._v2 = v2
        self._route = route

    async def call_method(self, obj: QmfObject, method: SchemaMethod,
                          in_args: dict[str, Any], timeout: float | None) -> MethodResult:
        """Call ``method`` of ``obj`` (a proxy received on this connection) with bound
        ``in_args``; ``timeout`` None is the session's ``timeout``.

        Raises:
            MethodError: the agent returned a non-zero status or an exception.
            AgentGoneError: the object's agent left, before the call (raised at once,
                nothing is sent) or while waiting for the response.
            ObjectGoneError: over v2, the object's v2 id is not known here (or no
                longer: it was deleted ``forget_deleted_after`` seconds ago).
            QmfTimeout: no response in time.
            NotConnectedError, TransportError: not sent, or the connection was lost.
        """
        self._check()
        wait = timeout if timeout is not None else self._session.options.timeout
        raw_oid = obj.get_object_id().raw
        v2 = self._v2
        fast = self._route
        target = fast.method_target(raw_oid, method, in_args) if fast is not None else None
        if target is not None:  # an object read over qpidd's fast path: called over v1
            raw_oid, in_args = target
        elif v2 is not None and (raw_oid in v2.oids or _over_v2(obj)):
            # an object received over QMF v2 (one deleted a while ago is not known)
            return await v2.call(raw_oid, obj.get_agent(), obj.get_schema(), method, in_args,
                                 wait)
        head = raw_oid[:8]  # flags, boot sequence, broker and agent bank
        routes = self._method_routes
        route = routes.get(head)
        if route is None:
            if len(routes) >= _MAX_METHOD_ROUTES:
                routes.clear()
            bb, ab = obj.get_object_id().agent_key()
            route = routes[head] = ((bb, ab), f"agent.{bb}.{ab}")
        banks, routing_key = route
        core = self._core
        if banks not in core.agents and banks in core.departed:
            raise AgentGoneError(f"agent {banks[0]}.{banks[1]} of {obj!r} on {self._where()} "
                                 f"left: {core.departed[banks]}")
        schema = obj.get_schema()
        # the core builds the M (the method's cached writer) and opens its entry
        out = core.send_method(banks, routing_key, schema, method, raw_oid, in_args)
        try:
            reply = await self._waits.request(out.seq, out, wait)
        except Expired:  # its error built here: no closure per call
            raise QmfTimeout(f"{schema.class_key.name}.{method.name} on "
                             f"{obj.get_object_id()}: no response within {wait}s") from None
        if isinstance(reply, CommandComplete):
            raise MethodError(reply.code, reply.text)
        assert isinstance(reply, MethodResponse)
        if reply.status != 0:
            raise MethodError(reply.status, reply.text)
        if target is not None and fast is not None:
            result = method_result(reply)
            return MethodResult(result.status, result.text,
                                fast.out_args(method, result.out_args, banks))
        return method_result(reply)


def _over_v2(obj: QmfObject) -> bool:
    """Whether ``obj`` came from an agent spoken to over QMF v2."""
    agent = obj.get_agent()
    return agent is not None and agent.qmf_version == 2
