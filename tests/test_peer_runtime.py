"""PeerRuntime options the console uses, on the in-memory bus (tests/memory_bus.py):
a named reply endpoint, a first connection retried in the background, failed attempts
reported, a "no reconnect" mode that leaves a lost connection lost, and the management
exchange declared while the reply endpoint opens (its refusal still the error)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from qmf_async.errors import TransportError
from qmf_async.runtime import PeerRuntime
from qmf_async.transport import REPLY_EXCHANGE, TransportProtocol

from ._util import wait_until
from .memory_bus import MemoryBus

URL = "amqp://guest:guest@memory:5672/test"


async def _no_setup(transport: TransportProtocol, endpoint: str) -> None:
    return None


async def test_endpoint_prefix_names_the_reply_endpoint() -> None:
    bus = MemoryBus(URL)
    rt = PeerRuntime(URL, dispatch=lambda d: None, setup=_no_setup, name="rt",
                     transport_factory=bus.as_factory(), endpoint_prefix="qmf-reply-")
    await rt.connect()
    try:
        assert rt.endpoint is not None and rt.endpoint.startswith("qmf-reply-")
        assert len(rt.endpoint) == len("qmf-reply-") + 16
        assert (REPLY_EXCHANGE, rt.endpoint) in bus.queues[rt.endpoint].bindings
    finally:
        await rt.stop()


async def test_first_connect_retried_in_background_reporting_failures() -> None:
    bus = MemoryBus(URL)
    bus.refuse_connects = 3
    failures: list[tuple[BaseException, float]] = []
    connected = asyncio.Event()
    rt = PeerRuntime(URL, dispatch=lambda d: None, setup=_no_setup, name="rt",
                     transport_factory=bus.as_factory(), reconnect=False, min_delay=0.01,
                     max_delay=0.02, on_connect_failed=lambda e, d: failures.append((e, d)),
                     on_reconnected=connected.set)
    try:
        await rt.connect()
    except Exception as exc:
        failures.append((exc, 0.0))
    assert not rt.is_open and len(failures) == 1
    # reconnect=False: still, a first connection that failed is retried
    rt.run(connected=False)
    await asyncio.wait_for(connected.wait(), 5.0)
    assert rt.is_open and bus.connects == 4 and len(failures) == 3
    assert [d for _, d in failures[1:]] == [0.01, 0.02]
    await rt.stop()


async def test_without_reconnect_a_lost_connection_stays_lost() -> None:
    bus = MemoryBus(URL)
    lost: list[BaseException] = []
    rt = PeerRuntime(URL, dispatch=lambda d: None, setup=_no_setup, name="rt",
                     transport_factory=bus.as_factory(), reconnect=False, min_delay=0.01,
                     on_lost=lost.append)
    await rt.connect()
    rt.run()
    supervisor = rt._supervisor
    assert supervisor is not None
    assert bus.lose("rt") == 1
    await wait_until(lambda: bool(lost), message="loss noticed")
    await asyncio.wait_for(asyncio.shield(supervisor), 2.0)  # it ended, did not retry
    assert bus.connects == 1 and not rt.is_open
    await rt.stop()


class _SlowDeclare:
    """A MemoryBus factory whose transports declare the management exchange only once
    ``release`` is set, then fail with ``error`` when one is given."""

    def __init__(self, bus: MemoryBus, error: Exception | None = None) -> None:
        self.bus, self.error = bus, error
        self.release = asyncio.Event()
        self.transports: list[Any] = []

    def __call__(self, url: str, **options: Any) -> Any:
        transport = self.bus.factory(url, **options)
        declare = transport.declare_management_exchange

        async def slow() -> None:
            await self.release.wait()
            if self.error is not None:
                raise self.error
            await declare()

        transport.declare_management_exchange = slow  # type: ignore[method-assign]
        self.transports.append(transport)
        return transport


async def test_the_exchange_is_declared_while_the_endpoint_opens() -> None:
    """Start-up: the management exchange's declaration and the reply endpoint go out
    together (over AMQP 1.0, two attaches in one round trip), not one after the other."""
    bus = MemoryBus(URL)
    factory = _SlowDeclare(bus)
    rt = PeerRuntime(URL, dispatch=lambda d: None, setup=_no_setup, name="rt",
                     transport_factory=factory, endpoint_prefix="qmf-reply-")
    connecting = asyncio.ensure_future(rt.connect())
    # the endpoint is bound while the declaration still waits
    await wait_until(lambda: any(q.bindings for q in bus.queues.values()), 2.0,
                     message="the reply endpoint bound before the declaration ended")
    assert not connecting.done()
    factory.release.set()
    await asyncio.wait_for(connecting, 2.0)
    assert rt.is_open
    await rt.stop()


async def test_a_refused_declaration_is_the_error_raised() -> None:
    bus = MemoryBus(URL)
    factory = _SlowDeclare(bus, TransportError("no exchange qpid.management"))
    factory.release.set()
    rt = PeerRuntime(URL, dispatch=lambda d: None, setup=_no_setup, name="rt",
                     transport_factory=factory, reconnect=False)
    with pytest.raises(TransportError, match=r"no exchange qpid\.management"):
        await rt.connect()
    assert not rt.is_open and not factory.transports[0].is_open
