"""The qpidd test harness: the fixtures start a genuine qpidd that answers as qpidd does."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Callable

import pytest

from .conftest import ClassicTools
from .qpidd import Qpidd, port_accepts

pytestmark = pytest.mark.qpidd

AMQP10_SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP091_HEADER = b"AMQP\x00\x00\x09\x01"
#: What qpidd sends back to an AMQP 0-9-1 header: the AMQP 0-10 header (class 1,
#: instance 1, version 0-10), then it closes.  Protocol detection relies on this.
AMQP010_HEADER = b"AMQP\x01\x01\x00\x0a"


def _exchange_header(port: int, header: bytes, want: int = 8, timeout: float = 5.0) -> bytes:
    """Send ``header`` on a fresh connection; return the first ``want`` bytes (fewer on EOF)."""
    deadline = time.monotonic() + timeout
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(header)
        got = b""
        while len(got) < want:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"qpidd sent only {got!r} within {timeout}s")
            sock.settimeout(remaining)
            chunk = sock.recv(want - len(got))
            if not chunk:
                break
            got += chunk
        return got


@pytest.fixture(params=["qpidd_v1", "qpidd_stock"])
def any_qpidd(request: pytest.FixtureRequest) -> Qpidd:
    broker: Qpidd = request.getfixturevalue(request.param)
    return broker


def test_fixture_modes(qpidd_v1: Qpidd, qpidd_stock: Qpidd) -> None:
    assert qpidd_v1.qmf1 and not qpidd_stock.qmf1
    assert qpidd_v1.port != qpidd_stock.port
    assert qpidd_v1.url == f"amqp://127.0.0.1:{qpidd_v1.port}/"
    assert qpidd_v1.address == f"127.0.0.1:{qpidd_v1.port}"
    assert qpidd_v1.is_running() and qpidd_stock.is_running()
    assert qpidd_v1.cpu_seconds() >= 0.0


def test_amqp10_sasl_header_is_answered(any_qpidd: Qpidd) -> None:
    assert _exchange_header(any_qpidd.port, AMQP10_SASL_HEADER) == AMQP10_SASL_HEADER


def test_amqp091_header_gets_an_amqp010_header(any_qpidd: Qpidd) -> None:
    got = _exchange_header(any_qpidd.port, AMQP091_HEADER)
    assert got != AMQP091_HEADER
    assert got == AMQP010_HEADER


def test_classic_tools_see_a_new_queue(any_qpidd: Qpidd, classic_tools: ClassicTools) -> None:
    name = f"harness-{uuid.uuid4().hex[:12]}"
    rc, out, err = classic_tools("qpid-stat", "-b", any_qpidd.address, "-q")
    assert rc == 0, err
    assert name not in out
    rc, out, err = classic_tools("qpid-config", "-b", any_qpidd.address, "add", "queue", name)
    assert rc == 0, err
    rc, out, err = classic_tools("qpid-config", "-b", any_qpidd.address, "queues")
    assert rc == 0, err
    assert name in out.split()
    rc, out, err = classic_tools("qpid-stat", "-b", any_qpidd.address, "-q")
    assert rc == 0, err
    assert name in [line.split()[0] for line in out.splitlines() if line.strip()]


def test_restart_keeps_port_and_comes_back(qpidd_fresh: Callable[[bool], Qpidd]) -> None:
    broker = qpidd_fresh(False)
    port, old_pid = broker.port, broker.pid
    broker.restart()
    assert broker.port == port
    assert broker.pid != old_pid
    assert broker.is_running()
    assert port_accepts(port)
    assert _exchange_header(port, AMQP10_SASL_HEADER) == AMQP10_SASL_HEADER


def test_stop_frees_port_and_ends_process(qpidd_fresh: Callable[[bool], Qpidd]) -> None:
    broker = qpidd_fresh(True)
    assert port_accepts(broker.port)
    broker.stop()
    assert not broker.is_running()
    assert broker.wait_port_closed(timeout=5.0)
    broker.stop()  # idempotent
    assert "shut-down" in broker.log_tail()
