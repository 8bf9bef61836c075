"""``qmf events`` beside the classic ``qpid-printevents`` on a genuine qpidd: the same
broker activity printed by both, with the same event classes, the same arguments and
the same time stamps (to the second qpid-printevents prints), on a stock qpidd (QMF
v1 off) and on one with v1 on.

The activity is made by plain AMQP 1.0 clients, neither of the two tools: a raw QMF v2
client (``tests/qmf2_raw.py``) creates a queue and a binding and deletes them by the
broker's ``create``/``delete`` methods, and a plain one (``tests/amqp10_client.py``)
subscribes to the queue in between (``subscribe``/``unsubscribe``).  Every event of it,
from the raw client's ``clientConnect`` to its ``clientDisconnect``, is compared in
order: classes and every argument (qpid-printevents' ``name=value`` line parsed, its
maps read as Python literals, against ``qmf events --json``).

The activity is run twice: once with qpid-printevents alone, to learn how many events it
raises, then with both tools, ``qmf events --count N`` stopping by itself after those N.
"""

from __future__ import annotations

import ast
import calendar
import json
import os
import re
import sys
import time
import uuid
from typing import Any

import pytest

from qmf_async.wire import decode_amqp10_message

from .amqp10_client import BlockingClient
from .conftest import CLASSIC_TOOLS_RUN, ClassicTools
from .qmf2_raw import RawV2Client
from .qpidd import ROOT, Qpidd
from .test_parity_qpidd import BROKERS, Tool, declare, poll, running

pytestmark = pytest.mark.qpidd

BROKER_OID = {"_object_name": "org.apache.qpid.broker:broker:amqp-broker"}
#: a qpid-printevents line: %c time (UTC), package:class, then name=value pairs
CLASSIC_LINE = re.compile(
    r"^(?P<time>\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}) (?P<cls>[\w.]+:\w+)(?P<rest>.*)$")
ARGUMENT = re.compile(r" (\w+)=")

Event = tuple[str, dict[str, Any], int]  # class, arguments, time stamp (s)


def same_value(ours: Any, classic: str) -> bool:
    """Whether our JSON value is what qpid-printevents printed with Python 2's ``%s``:
    maps and lists compared as values (its reprs read as literals), the rest as text."""
    if classic[:1] in ("{", "["):
        return bool(ast.literal_eval(classic) == ours)  # u'...' reads as a Python 3 str
    if isinstance(ours, bool):
        return classic == str(ours)
    return isinstance(ours, (str, int)) and classic == str(ours)


def parse_classic(lines: list[str]) -> list[Event]:
    """The events of qpid-printevents' output (its own connection notes left out)."""
    out: list[Event] = []
    for line in lines:
        m = CLASSIC_LINE.match(line.rstrip("\n"))
        if m is None or m["cls"].startswith("qpid-printevents:"):
            continue
        parts = ARGUMENT.split(m["rest"])  # ['', name, value, name, value, ...]
        assert parts[0] == "", line
        args = {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}
        stamp = calendar.timegm(time.strptime(m["time"], "%a %b %d %H:%M:%S %Y"))
        out.append((m["cls"], args, stamp))
    return out


def parse_ours(lines: list[str]) -> list[Event]:
    out: list[Event] = []
    for line in lines:
        record = json.loads(line)
        out.append((record["class"], record["arguments"], record["timestamp"] // 10**9))
    return out


def activity(broker: Qpidd, prefix: str) -> str:
    """Queue, binding, subscription, unbind and delete by plain AMQP 1.0 clients;
    returns the container id of the raw client (its connection spans all of it)."""
    queue, key = f"{prefix}-q", f"{prefix}-key"
    client = RawV2Client("127.0.0.1", broker.port)
    try:
        def call(method: str, arguments: dict[str, Any]) -> None:
            before = len(client.replies)
            client.send("_method_request", {"_object_id": BROKER_OID, "_method_name": method,
                                            "_arguments": arguments})
            client.wait_for(lambda: len(client.replies) > before, f"the answer to {method}")
            answer = decode_amqp10_message(client.replies[-1])
            assert answer.application_properties["qmf.opcode"] == "_method_response", \
                answer.body

        call("create", {"type": "queue", "name": queue, "properties": {}, "strict": True})
        call("create", {"type": "binding", "name": f"amq.direct/{queue}/{key}",
                        "properties": {}, "strict": True})
        with BlockingClient(broker.url, timeout=15) as conn:
            conn.create_receiver(queue).close()
        call("delete", {"type": "binding", "name": f"amq.direct/{queue}/{key}", "options": {}})
        call("delete", {"type": "queue", "name": queue, "options": {}})
        return client.container_id
    finally:
        client.close()


def activity_window(events: list[Event], container: str) -> list[Event]:
    """The events from the raw client's clientConnect to its clientDisconnect."""
    end = next((i for i, (cls, args, _) in enumerate(events)
                if cls.endswith(":clientDisconnect")
                and f"'container-id': '{container}'" in str(args.get("properties"))), None)
    if end is None:
        return []
    rhost = events[end][1]["rhost"]
    start = next(i for i, (cls, args, _) in enumerate(events)
                 if cls.endswith(":clientConnect") and args.get("rhost") == rhost)
    return events[start:end + 1]


def sync_classic(broker: Qpidd, classic: Tool, prefix: str) -> None:
    """Declare queues until qpid-printevents prints one (it subscribes after it says
    brokerConnected, so earlier events are not printed)."""
    poll(lambda: "brokerConnected" in classic.text() or classic.proc.poll() is not None,
         20, "qpid-printevents connected")
    assert classic.proc.poll() is None, "".join(classic.err)
    deadline = time.monotonic() + 20
    n = 0
    while f"qName={prefix}-sync-" not in classic.text():
        assert time.monotonic() < deadline, "qpid-printevents printed no event"
        declare(broker, f"{prefix}-sync-{n}")
        n += 1
        end = time.monotonic() + 1.0
        while f"qName={prefix}-sync-" not in classic.text() and time.monotonic() < end:
            time.sleep(0.05)


@pytest.mark.parametrize("which", BROKERS)
def test_events_match_qpid_printevents(which: str, request: pytest.FixtureRequest,
                                       classic_tools: ClassicTools) -> None:
    broker: Qpidd = request.getfixturevalue(which)
    prefix = f"parity-evs-{uuid.uuid4().hex[:8]}"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    classic_argv = ["bash", str(CLASSIC_TOOLS_RUN), "qpid-printevents", broker.address]
    with running(classic_argv) as classic:
        sync_classic(broker, classic, prefix)
        # 1. how many events the activity raises, as qpid-printevents prints them
        container = activity(broker, f"{prefix}-a")
        first = poll(lambda: activity_window(parse_classic(classic.out), container), 15,
                     "qpid-printevents printing the first activity")
        classes = [cls.split(":")[1] for cls, _, _ in first]
        for wanted in ("queueDeclare", "bind", "subscribe", "unsubscribe", "unbind",
                       "queueDelete"):
            assert wanted in classes, (wanted, classes)

        # 2. the same activity with qmf events running, stopping after as many events;
        # its own queues' events (raised while it subscribes) are left out by --where
        ours_argv = [sys.executable, "-m", "qmf_async", "events", "--json",
                     "--count", str(len(first)),
                     "--where", "qName IS NULL OR NOT (qName LIKE 'qmf-async%')", broker.url]
        with running(ours_argv, env) as ours:
            poll(lambda: "listening on" in "".join(ours.err) or ours.proc.poll() is not None,
                 20, "qmf events listening")
            assert ours.proc.poll() is None, "".join(ours.err)
            container = activity(broker, f"{prefix}-b")
            poll(lambda: ours.proc.poll() is not None, 20,
                 f"qmf events exiting after --count {len(first)}")
            assert ours.proc.returncode == 0, "".join(ours.err)
            ours.stop()  # joins the readers: all of its output is in
            mine = parse_ours(ours.out)
        theirs = poll(lambda: activity_window(parse_classic(classic.out), container), 15,
                      "qpid-printevents printing the second activity")

    assert len(mine) == len(theirs) == len(first), (mine, theirs)
    for (cls, args, stamp), (c_cls, c_args, c_stamp) in zip(mine, theirs, strict=True):
        assert cls == c_cls, (mine, theirs)
        assert sorted(args) == sorted(c_args), (cls, args, c_args)
        assert all(same_value(args[k], c_args[k]) for k in args), (cls, args, c_args)
        assert stamp == c_stamp, (cls, stamp, c_stamp)
    # the activity's own names, as both printed them
    assert {a.get("qName") for _, a, _ in mine} >= {f"{prefix}-b-q"}
    bind = next(a for c, a, _ in mine if c.endswith(":bind") and a["qName"] == f"{prefix}-b-q")
    assert (bind["exName"], bind["key"]) == ("amq.direct", f"{prefix}-b-key")
