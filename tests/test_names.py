"""The consoles' own queue names and AMQP 1.0 container ids (qmf_async.names): one word
each, recognisable as a console's; and the connection properties that name our
process.  The qpidd side (``<container id>_<link>`` queues, qmf stat -c's cproc and
cpid) is in test_tools_stock_qpidd.py and test_parity_stat_qpidd.py."""

from __future__ import annotations

import fnmatch
import os
import re

import pytest

from qmf_async import Session, exporter, names
from qmf_async.transport import client_process_properties

from ._util import rabbitmqctl_output


def test_container_ids_are_one_word() -> None:
    ids = {names.container_id("qmf-async console") for _ in range(3)}
    assert len(ids) == 3
    assert all(re.fullmatch(r"qmf-async-console-[0-9a-f]{12}", i) for i in ids), ids
    odd = names.container_id(" qmf-agent my\tlabel / ü ")
    assert re.fullmatch(r"qmf-agent-my-label-[0-9a-f]{12}", odd), odd
    assert re.fullmatch(r"qmf-async-[0-9a-f]{12}", names.container_id("  ")), "empty name"


@pytest.mark.parametrize(("name", "console"), [
    ("qmf-reply-0123456789abcdef", True),            # RabbitMQ: the endpoint's own name
    ("qmf-topic-0123456789abcdef", True),
    ("qmf-loss-0123456789abcdef", True),
    ("qmf-async-console-3f80c2a1b4d5_qmf-topic2-0123456789abcdef-7", True),  # qpidd
    ("qmfc-v2-host.1234.1", True), ("reply-host.1234.1", True),  # classic consoles
    ("orders", False), ("qmf-async console", False), ("my-qmf-queue", False),
    ("a\nqmf-reply-", True), ("topic-", True), ("Reply-x", False), ("x-reply-y", False),
    ("", False),
])
def test_console_queues_are_recognised(name: str, console: bool) -> None:
    assert names.is_console_queue(name) is console
    # plain string tests, as the fnmatch patterns match
    assert console is any(fnmatch.fnmatchcase(name, p) for p in names.CONSOLE_QUEUES)
    assert exporter.is_console_queue is names.is_console_queue
    assert exporter.CONSOLE_QUEUES is names.CONSOLE_QUEUES


def test_one_status_table_for_errors_and_agents() -> None:
    """One table (names.Status) gives the error's name and the text an agent writes,
    as qpidd's Manageable::StatusText does; the views of it agree."""
    from qmf_async import MethodError, protocol
    assert [(int(s), s.name, s.text) for s in names.Status][:3] == [
        (0, "OK", "OK"), (1, "UNKNOWN_OBJECT", "UnknownObject"),
        (2, "UNKNOWN_METHOD", "UnknownMethod")]
    assert names.Status.FEATURE_NOT_IMPLEMENTED.text == "FeatureNotImplemented"
    assert protocol.STATUS_TEXT == {int(s): s.text for s in names.Status}
    assert str(MethodError(6, "no")) == "6 (FORBIDDEN): no"
    assert str(MethodError(0x10000, "app")) == "65536 (UNKNOWN_STATUS): app"


def test_keys_and_agent_names() -> None:
    assert names.keyify("org.apache.qpid.broker") == "org_apache_qpid_broker"
    assert names.agent_key(1, 0) == "agent.1.0"
    assert names.is_qpidd_agent("apache.org:qpidd:3f80c2a1") is True
    assert not names.is_qpidd_agent("qmf-async:agent:1") and not names.is_qpidd_agent(None)
    from qmf_async import protocol
    assert protocol.keyify is names.keyify


def test_client_process_properties() -> None:
    props = client_process_properties()
    assert props["qpid.client_pid"] == os.getpid()
    assert props["qpid.client_ppid"] == os.getppid()
    assert isinstance(props["qpid.client_process"], str) and props["qpid.client_process"]
    assert props["qpid.client_process"] not in ("__main__.py", "-c")


@pytest.mark.integration
async def test_rabbitmq_queue_names_and_client_properties(amqp_url: str) -> None:
    async with Session.connect(amqp_url) as session:
        (broker,) = session.brokers
        own = [broker._reply_queue, broker._topic_queue, broker._loss_queue]
        assert all(isinstance(n, str) and names.is_console_queue(n) for n in own), own
        assert not [n for n in own if n and re.search(r"\s", n)], own
        table = await rabbitmqctl_output("list_connections", "client_properties")
        if table is None:
            pytest.skip("rabbitmqctl is not usable here")
        mine = [line for line in table.splitlines() if "qpid.client_pid" in line
                and re.search(rf"\b{os.getpid()}\b", line)]
        assert mine and all("qpid.client_process" in line for line in mine), table
