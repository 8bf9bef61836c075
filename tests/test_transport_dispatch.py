"""The transport's consumer callback and reader, without a broker.

The consumer callback is driven directly with aiormq-shaped messages, as aiormq would
(one call per delivery, in arrival order); the reader task is started by hand.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from types import SimpleNamespace
from typing import Any

import pytest
from pamqp import commands as spec

from qmf_async.transport._aiormq import Delivery, Transport

from ._util import wait_until

Consumer = Callable[[Any], Coroutine[Any, Any, None]]


def message(body: bytes, *, routing_key: str = "rk", tag: int = 0,
            headers: dict[str, Any] | None = None) -> Any:
    """An object shaped like aiormq's DeliveredMessage (the fields the transport reads)."""
    props = spec.Basic.Properties(content_type="x-application/qmf", headers=headers,
                                  reply_to="reply-key", user_id="guest")
    return SimpleNamespace(
        body=body,
        delivery=SimpleNamespace(exchange="amq.direct", routing_key=routing_key,
                                 delivery_tag=tag),
        header=SimpleNamespace(properties=props),
    )


class Recorder:
    def __init__(self, fail_on: bytes | None = None) -> None:
        self.deliveries: list[Delivery] = []
        self.fail_on = fail_on

    def __call__(self, delivery: Delivery) -> None:
        if delivery.body == self.fail_on:
            raise RuntimeError("dispatcher bug")
        self.deliveries.append(delivery)

    def bodies(self) -> list[bytes]:
        return [d.body for d in self.deliveries]


@pytest.fixture
async def transport() -> AsyncIterator[Transport]:
    """A transport in the "open" state without a connection; no reader task yet."""
    t = Transport("amqp://guest:guest@localhost:5672/")
    t._state = "open"
    yield t
    await stop_reader(t)


def start_reader(t: Transport) -> None:
    t._reader = asyncio.get_running_loop().create_task(t._read_loop())


async def stop_reader(t: Transport) -> None:
    reader = t._reader
    if reader is not None and not reader.done():
        t._stop_reader = True
        t._wake()
        await asyncio.wait_for(reader, 5.0)


async def test_no_ack_delivery_is_dispatched_in_the_callback(transport: Transport) -> None:
    seen = Recorder()
    transport.set_dispatcher(seen)
    replies: Consumer = transport._consumer("replies", no_ack=True)
    await replies(message(b"a", headers={"k": 1}))
    # no reader task runs: the callback itself handed the delivery over
    assert seen.deliveries == [
        Delivery(b"a", "amq.direct", "rk", "reply-key", "x-application/qmf", {"k": 1},
                 "guest", "replies")
    ]
    assert transport.backlog == 0
    await replies(message(b"b"))
    assert seen.bodies() == [b"a", b"b"]
    assert seen.deliveries[1].headers == {}


async def test_acked_deliveries_always_go_through_the_reader(transport: Transport) -> None:
    seen = Recorder()
    transport.set_dispatcher(seen)
    topic: Consumer = transport._consumer("topic", no_ack=False)
    await topic(message(b"t1", tag=1))
    assert seen.deliveries == [] and transport.backlog == 1
    start_reader(transport)
    await wait_until(lambda: seen.bodies() == [b"t1"])
    assert transport.backlog == 0


async def test_a_reply_waits_behind_buffered_deliveries(transport: Transport) -> None:
    seen = Recorder()
    transport.set_dispatcher(seen)
    topic: Consumer = transport._consumer("topic", no_ack=False)
    replies: Consumer = transport._consumer("replies", no_ack=True)
    await topic(message(b"t1", tag=1))
    await replies(message(b"r1"))  # t1 is still buffered: r1 must not overtake it
    await replies(message(b"r2"))
    assert seen.deliveries == [] and transport.backlog == 3
    start_reader(transport)
    await wait_until(lambda: transport.backlog == 0)
    assert seen.bodies() == [b"t1", b"r1", b"r2"]
    await replies(message(b"r3"))  # nothing waits any more: dispatched at once
    assert seen.bodies() == [b"t1", b"r1", b"r2", b"r3"]


async def test_arrival_order_kept_with_the_reader_running(transport: Transport) -> None:
    """aiormq starts one task per delivery, in arrival order: mixed acked and unacked
    deliveries reach the dispatcher in that order."""
    seen = Recorder()
    transport.set_dispatcher(seen)
    start_reader(transport)
    topic: Consumer = transport._consumer("topic", no_ack=False)
    replies: Consumer = transport._consumer("replies", no_ack=True)
    expected = []
    tasks = []
    for i in range(300):
        body = b"%d" % i
        expected.append(body)
        if i % 7 in (0, 1, 4):
            tasks.append(asyncio.create_task(topic(message(body, tag=i + 1))))
        else:
            tasks.append(asyncio.create_task(replies(message(body))))
        if i % 50 == 0:
            await asyncio.sleep(0)  # let the reader run between bursts
    await asyncio.gather(*tasks)
    await wait_until(lambda: len(seen.deliveries) == len(expected))
    assert seen.bodies() == expected
    assert transport.backlog == 0


async def test_inline_dispatch_error_is_logged_and_the_next_delivery_dispatched(
    transport: Transport, caplog: pytest.LogCaptureFixture
) -> None:
    seen = Recorder(fail_on=b"boom")
    transport.set_dispatcher(seen)
    replies: Consumer = transport._consumer("replies", no_ack=True)
    with caplog.at_level(logging.ERROR, logger="qmf_async.transport"):
        await replies(message(b"boom", routing_key="rk-boom"))  # does not raise into aiormq
        await replies(message(b"after"))
    assert seen.bodies() == [b"after"]
    errors = [r for r in caplog.records if r.name == "qmf_async.transport"]
    assert len(errors) == 1
    assert errors[0].exc_info is not None and "rk-boom" in errors[0].getMessage()


async def test_no_inline_dispatch_before_a_dispatcher_is_set(transport: Transport) -> None:
    replies: Consumer = transport._consumer("replies", no_ack=True)
    start_reader(transport)
    await replies(message(b"early"))
    assert transport.backlog == 1
    seen = Recorder()
    transport.set_dispatcher(seen)
    await wait_until(lambda: seen.bodies() == [b"early"])
    await replies(message(b"late"))
    assert seen.bodies() == [b"early", b"late"]


@pytest.mark.parametrize("state", ["closing", "lost"])
async def test_no_inline_dispatch_unless_open(transport: Transport, state: str) -> None:
    seen = Recorder()
    transport.set_dispatcher(seen)
    replies: Consumer = transport._consumer("replies", no_ack=True)
    transport._state = state
    await replies(message(b"x"))
    assert seen.deliveries == [] and transport.backlog == 1
