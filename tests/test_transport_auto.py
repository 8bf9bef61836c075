"""AutoTransport: the AMQP version picked from the broker's answer (no network: the two
transports it would build are replaced by recording fakes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from qmf_async import ProtocolMismatchError, Session, TransportError, UsageError
from qmf_async.transport import (
    AMQP091_CAPABILITIES,
    AMQP10_CAPABILITIES,
    NO_CAPABILITIES,
    AiormqTransport,
    AutoTransport,
    ConnectionState,
    Delivery,
    check_protocol,
    transport_factory,
)


class FakeInner:
    """Connects, or fails with the error given for its protocol."""

    def __init__(self, protocol: str, log: list[str], errors: dict[str, BaseException]) -> None:
        self.protocol = protocol
        self.log = log
        self.errors = errors
        self.is_open = False
        self.state = ConnectionState.NEW
        self.where = f"fake {protocol}"
        self.capabilities = AMQP10_CAPABILITIES if protocol == "1.0" else AMQP091_CAPABILITIES
        self.dispatch: Callable[[Delivery], None] | None = None
        self.lost: list[Callable[[BaseException], None]] = []
        self.published: list[dict[str, Any]] = []

    async def connect(self, timeout: float = 10.0) -> None:
        self.log.append(self.protocol)
        error = self.errors.get(self.protocol)
        if error is not None:
            raise error
        self.is_open = True
        self.state = ConnectionState.OPEN

    def set_dispatcher(self, dispatch: Callable[[Delivery], None]) -> None:
        self.dispatch = dispatch

    def on_lost(self, callback: Callable[[BaseException], None]) -> None:
        self.lost.append(callback)

    async def publish(self, body: bytes, **kwargs: Any) -> None:
        self.published.append({"body": body, **kwargs})

    async def close(self, timeout: float = 5.0) -> None:
        self.is_open = False
        self.state = ConnectionState.CLOSED


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], dict[str, BaseException]]:
    log: list[str] = []
    errors: dict[str, BaseException] = {}

    def make(self: AutoTransport, protocol: str) -> Any:
        return FakeInner(protocol, log, errors)

    monkeypatch.setattr(AutoTransport, "_make", make)
    return log, errors


async def test_auto_speaks_0_9_1_first(fakes: Any) -> None:
    log, _ = fakes
    t = AutoTransport("amqp://h:5672/")
    await t.connect()
    assert log == ["0-9-1"] and t.protocol == "0-9-1" and t.is_open
    assert t.state is ConnectionState.OPEN  # the state of the transport that connected
    await t.close()
    assert t.state is ConnectionState.CLOSED


async def test_capabilities_are_the_connected_transports(fakes: Any) -> None:
    _, errors = fakes
    t = AutoTransport("amqp://h:5672/")
    assert t.capabilities == NO_CAPABILITIES and t.capabilities.protocol == ""
    await t.connect()
    assert t.capabilities == AMQP091_CAPABILITIES
    assert (t.capabilities.dead_letters, t.capabilities.server_selectors) == (True, False)
    errors["0-9-1"] = ProtocolMismatchError("answered with 0-10", b"AMQP\x01\x01\x00\x0a")
    one = AutoTransport("amqp://qpidd:5673/")
    await one.connect()
    assert one.capabilities == AMQP10_CAPABILITIES
    assert (one.capabilities.dead_letters, one.capabilities.server_selectors) == (False, True)
    # v2 maps: 0-10-encoded bytes for the core over 0-9-1, a decoded amqp-value over 1.0
    assert (t.capabilities.v2_map_bytes, one.capabilities.v2_map_bytes) == (True, False)
    assert AiormqTransport.capabilities.protocol == AiormqTransport.protocol == "0-9-1"
    from qmf_async.transport import NativeAmqp10Transport
    assert NativeAmqp10Transport.capabilities.protocol == NativeAmqp10Transport.protocol \
        == "1.0"


async def test_auto_goes_on_over_1_0_and_remembers_the_host(fakes: Any) -> None:
    log, errors = fakes
    errors["0-9-1"] = ProtocolMismatchError("answered with 0-10", b"AMQP\x01\x01\x00\x0a")
    factory = transport_factory()  # one per session, agent or role
    first = factory("amqp://qpidd:5673/")
    await first.connect()
    assert log == ["0-9-1", "1.0"] and first.protocol == "1.0"
    second = factory("amqp://qpidd:5673/")  # e.g. the session reconnecting
    await second.connect()
    assert log == ["0-9-1", "1.0", "1.0"]  # no second 0-9-1 attempt for that host:port
    other = factory("amqp://qpidd:5674/")
    await other.connect()
    assert log[-2:] == ["0-9-1", "1.0"]


async def test_what_auto_found_is_the_factory_s_not_the_process_s(fakes: Any) -> None:
    """Two sessions (two factories) each find the version for themselves: what one
    found is no process-wide state that a test, or another session of the program,
    inherits (the on-disk file of AMQP 1.0 places is the only shared hint, off here)."""
    log, errors = fakes
    errors["0-9-1"] = ProtocolMismatchError("answered with 0-10", b"AMQP\x01\x01\x00\x0a")
    await transport_factory()("amqp://qpidd:5673/").connect()
    assert log == ["0-9-1", "1.0"]
    await transport_factory()("amqp://qpidd:5673/").connect()
    assert log == ["0-9-1", "1.0", "0-9-1", "1.0"]
    shared: dict[tuple[str, int], str] = {}
    await AutoTransport("amqp://qpidd:5673/", detected=shared).connect()
    assert shared == {("qpidd", 5673): "1.0"}
    await AutoTransport("amqp://qpidd:5673/", detected=shared).connect()
    assert log[-3:] == ["0-9-1", "1.0", "1.0"]


async def test_a_forced_protocol_is_not_retried(fakes: Any) -> None:
    log, errors = fakes
    errors["0-9-1"] = ProtocolMismatchError("not 0-9-1")
    t = AutoTransport("amqp://qpidd:5673/", protocol="0-9-1")
    with pytest.raises(ProtocolMismatchError):
        await t.connect()
    assert log == ["0-9-1"] and not t.is_open


async def test_neither_version_is_a_transport_error(fakes: Any) -> None:
    _, errors = fakes
    errors["0-9-1"] = ProtocolMismatchError("not 0-9-1")
    errors["1.0"] = ProtocolMismatchError("not 1.0")
    t = AutoTransport("amqp://odd:1234/")
    assert t.state is ConnectionState.NEW
    with pytest.raises(TransportError, match=r"neither AMQP 0-9-1 nor 1\.0"):
        await t.connect()
    assert t.state is ConnectionState.CLOSED
    with pytest.raises(UsageError, match="twice"):  # a transport is never opened again
        await t.connect()


async def test_other_connect_errors_are_not_retried(fakes: Any) -> None:
    log, errors = fakes
    errors["0-9-1"] = TransportError("connection refused")
    with pytest.raises(TransportError, match="refused"):
        await AutoTransport("amqp://down:5672/").connect()
    assert log == ["0-9-1"]


async def test_dispatcher_and_loss_callbacks_reach_the_transport_that_connected(
        fakes: Any) -> None:
    _, errors = fakes
    errors["0-9-1"] = ProtocolMismatchError("not 0-9-1")
    t = AutoTransport("amqp://qpidd:5673/")
    seen: list[Delivery] = []
    t.set_dispatcher(seen.append)
    t.on_lost(lambda exc: None)
    await t.connect()
    inner = t.inner
    assert isinstance(inner, FakeInner)
    assert inner.dispatch is not None and len(inner.lost) == 1
    await t.publish(b"x", exchange="qpid.management", routing_key="broker")
    assert inner.published[0]["routing_key"] == "broker"


async def test_calls_before_connect_fail_clearly() -> None:
    from qmf_async import NotConnectedError

    t = AutoTransport("amqp://h:5672/")
    with pytest.raises(NotConnectedError):
        await t.publish(b"x", exchange="e", routing_key="k")
    await t.close()  # nothing to close: no error


def test_protocol_names() -> None:
    assert check_protocol("AUTO") == "auto"
    assert check_protocol("1.0") == check_protocol("amqp10") == "1.0"
    assert check_protocol("0-9-1") == check_protocol("0.9.1") == "0-9-1"
    with pytest.raises(UsageError, match="protocol must be one of"):
        check_protocol("0-10")
    with pytest.raises(UsageError):
        transport_factory("2.0")
    with pytest.raises(UsageError, match="protocol must be one of"):
        Session(protocol="0-10")
    made = transport_factory("1.0")("amqp://h/", name="x")
    assert isinstance(made, AutoTransport) and made.protocol is None


def test_the_agent_and_the_role_take_protocol() -> None:
    from qmf_async.agent import Agent
    from qmf_async.agent.broker import ManagementBroker

    with pytest.raises(UsageError, match="protocol must be one of"):
        Agent("amqp://h/", label="x", protocol="0-10")
    with pytest.raises(UsageError, match="protocol must be one of"):
        ManagementBroker("amqp://h/", protocol="bogus")
    agent = Agent("amqp://h/", label="x", protocol="1.0")
    assert agent._runtime._factory("amqp://h/").__class__ is AutoTransport
