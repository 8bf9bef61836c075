"""The classic layer's text rule and ``qmf.client``'s pieces that need no broker: the
reconnect delays, its errors and the event-loop guard (the reconnects through a fake
AMQP 1.0 server run in tests/test_peer_suite.py, the upstream qmf_client suite)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid

import pytest

from qmf_async import UsageError
from qmf_async.classic._values import classic_text
from qmf_async.wire import WireList, WireMap

from .conftest import need_proton


def test_received_strings_are_text_at_every_depth_and_bytes_only_when_not_utf8() -> None:
    inner = WireMap({"group_id": b"A", "consumer": b"", "msg_count": 3})
    value = WireMap({"results": {"qpid.message_group_queue": {
        "group_header_key": b"THE-GROUP", "group_state": WireList([inner])}}})
    out = classic_text(value)
    groups = out["results"]["qpid.message_group_queue"]
    assert groups["group_header_key"] == "THE-GROUP"
    assert groups["group_state"] == [{"group_id": "A", "consumer": "", "msg_count": 3}]
    assert type(groups["group_state"]) is list and type(out) is dict
    assert classic_text({b"k": [b"\xff\xfe", (b"x", 1.5, None, True)]}) == {
        "k": [b"\xff\xfe", ("x", 1.5, None, True)]}
    uid = uuid.uuid4()
    assert classic_text(uid) is uid and classic_text("é") == "é"


def test_reconnect_delays_double_up_to_the_longest() -> None:
    from qmf.client import ReconnectDelays
    assert list(ReconnectDelays(1, 7, 3)) == [0, 1, 2, 4, 7, 7, 7, 7]
    assert list(ReconnectDelays(0.2, 1, 0)) == [0, 0.2, 0.4, 0.8, 1.0]
    forever = iter(ReconnectDelays(5, 5))
    assert [next(forever) for _ in range(50)] == [0] + [5] * 49
    for bad in ((0, 1), (1, -1), (2, 1), (1, 2, -1)):
        with pytest.raises(ValueError):
            ReconnectDelays(*bad)


def test_connection_errors_are_ours() -> None:
    from qmf.client import ConnectionException
    from qmf_async import TransportError
    from qmf_async.transport import Amqp10ConnectionError
    assert ConnectionException is Amqp10ConnectionError
    assert issubclass(ConnectionException, TransportError)


def test_a_refused_connection_raises_connection_exception() -> None:
    from qmf.client import BrokerAgent, ConnectionException
    with pytest.raises(ConnectionException):
        BrokerAgent.connect("127.0.0.1:1", timeout=2)


def test_a_blocking_call_from_a_running_loop_is_refused() -> None:
    from qmf.client import BrokerAgent

    async def inside() -> None:
        with pytest.raises(UsageError, match="asyncio"):
            BrokerAgent.connect("127.0.0.1:1", timeout=2)

    asyncio.run(inside())


def test_statistic_pairs_key_dicts_across_schema_reloads() -> None:
    from qmf_async.classic import SchemaStatistic
    from qmf_async.wire import QmfType
    from qmf_async.wire import SchemaStatistic as WireStatistic
    first = SchemaStatistic(WireStatistic("msgDepth", QmfType.UINT64))
    again = SchemaStatistic(WireStatistic("msgDepth", QmfType.UINT64))
    other = SchemaStatistic(WireStatistic("msgTotalEnqueues", QmfType.UINT64))
    stats = dict([(first, 5), (other, 7)])
    assert stats[again] == 5 and len({first, again, other}) == 2


_NATIVE_WITH_PROTON_LOADED = """
import proton
from qmf.client import BrokerAgent, ConnectionException
from qmf_async import TransportError
try:
    BrokerAgent.connect("127.0.0.1:1", timeout=2)
except proton.ConnectionException as exc:
    print(type(exc).__name__, isinstance(exc, ConnectionException), isinstance(exc, TransportError))
"""


@pytest.mark.proton_peer
def test_a_program_that_loaded_proton_catches_proton_s_class() -> None:
    """Code written for proton's blocking client catches ``proton.ConnectionException``:
    once the program has imported proton itself, the error is that class too (and
    still ours); the upstream qmf_client reconnect test relies on it."""
    need_proton()
    done = subprocess.run([sys.executable, "-c", _NATIVE_WITH_PROTON_LOADED],
                          capture_output=True, text=True, timeout=60, check=False,
                          env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["Amqp10ConnectionError", "True", "True"], done.stdout
