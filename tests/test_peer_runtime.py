"""PeerRuntime options the console uses, on the in-memory bus (tests/memory_bus.py):
a named reply endpoint, a first connection retried in the background, failed attempts
reported, and a "no reconnect" mode that leaves a lost connection lost."""

from __future__ import annotations

import asyncio

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
