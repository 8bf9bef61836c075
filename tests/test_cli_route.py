"""``qmf route`` against two genuine qpidd brokers federating exchanges and a queue,
checked by moving messages (a plain AMQP 1.0 client, ``tests/amqp10_client.py``) and
against the classic qpid-route on the same brokers.  Each test starts its own pair
(``qpidd_fresh``).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("rich")  # a guard only: the cli extra brings it
from qmf_async.tools.cli import route

from ._util import qmf_in_process
from .amqp10_client import BlockingClient, Timeout
from .qpidd import Qpidd

pytestmark = pytest.mark.qpidd

ROOT = Path(__file__).resolve().parent.parent
ClassicTools = Callable[..., tuple[int, str, str]]
DEADLINE_S = 20.0


def qmf(*argv: str, timeout: float = 60.0) -> tuple[int, str, str]:
    """Run ``qmf ARGV`` (in this process): (exit code, stdout, stderr)."""
    return qmf_in_process(*argv, env={"QMF_URL": None}, timeout=timeout)


def qmf_process(*argv: str, timeout: float = 60.0) -> tuple[int, str, str]:
    """Run ``qmf ARGV`` as a subprocess, as a user's shell does."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("QMF_URL", None)
    done = subprocess.run([sys.executable, "-m", "qmf_async.tools.cli", *argv],
                          capture_output=True, text=True, timeout=timeout, env=env,
                          check=False)
    return done.returncode, done.stdout, done.stderr


def ok(*argv: str) -> str:
    rc, out, err = qmf(*argv)
    assert rc == 0, f"qmf {' '.join(argv)} exited {rc}: {err}"
    return out


def unique(what: str) -> str:
    return f"{what}-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def pair(qpidd_fresh: Callable[[bool], Qpidd]) -> tuple[Qpidd, Qpidd]:
    """(destination, source): two fresh qpidd brokers."""
    return qpidd_fresh(True), qpidd_fresh(True)


def add_bound_queue(broker: Qpidd, exchange: str, key: str = "") -> str:
    """A new queue on ``broker`` bound to ``exchange`` with ``key``; its name."""
    queue = unique("fed")
    ok("config", broker.address, "add", "queue", queue)
    ok("config", broker.address, "bind", exchange, queue, *([key] if key else []))
    return queue


def deliver(src: Qpidd, address: str, dest: Qpidd, queue: str, *, subject: str = "") -> str:
    """Publish on ``src`` to ``address`` until a message with the same body arrives in
    ``queue`` on ``dest`` (routes and dynamic bindings settle asynchronously); its body.

    Raises:
        AssertionError: nothing arrived within the deadline.
    """
    body = unique("body")
    sender_conn = BlockingClient(src.url, timeout=10)
    try:
        receiver_conn = BlockingClient(dest.url, timeout=10)
    except BaseException:
        sender_conn.close()
        raise
    try:
        sender = sender_conn.create_sender(address)
        receiver = receiver_conn.create_receiver(queue, credit=10)
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            sender.send(body, subject=subject or None)
            try:
                while True:
                    got = receiver.receive(timeout=0.5)
                    receiver.accept()
                    # across the 0-10 bridge the string body comes back as binary
                    text = got.body
                    if isinstance(text, (bytes, memoryview)):
                        text = bytes(text).decode()
                    if text == body:
                        return str(text)
            except Timeout:
                continue
        raise AssertionError(f"no message reached {queue} on {dest.address} from "
                             f"{address} on {src.address} within {DEADLINE_S}s")
    finally:
        sender_conn.close()
        receiver_conn.close()


def classic_links(out: str) -> list[dict[str, Any]]:
    """qpid-route link list: host, port, transport, durable, state of each row."""
    lines = out.splitlines()
    rows = []
    if "No Links Found" in out:
        return rows
    start = next(i for i, line in enumerate(lines) if line.startswith("====")) + 1
    for line in lines[start:]:
        if not line.strip():
            continue
        host, port, transport, durable, state = line.split()[:5]
        rows.append({"host": host, "port": int(port), "transport": transport,
                     "durable": durable == "Y", "state": state})
    return sorted(rows, key=lambda r: (r["host"], r["port"]))


def route_lines(out: str) -> set[tuple[str, ...]]:
    """route list lines (``dest src-host:port exchange key src-is-local``) as tuples."""
    return {tuple(line.split()) for line in out.splitlines() if line.strip()}


def map_routes(out: str) -> set[str]:
    """The route lines of a ``route map`` (pairs and static routes), spaces collapsed;
    the two brokers of a both-ways pair in sorted order (either may come first)."""
    lines = set()
    for line in out.splitlines():
        if "=>" not in line and "<=" not in line:
            continue
        words = line.split()
        if len(words) == 3 and words[1] == "<=>":
            words = [min(words[0], words[2]), "<=>", max(words[0], words[2])]
        lines.add(" ".join(words))
    return lines


def wait_for(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what} within {DEADLINE_S}s")


# --------------------------------------------------------------------------- no broker


def test_addresses_in_qpid_forms() -> None:
    a = route.parse_address("alice/secret@example.org:5673")
    assert (a.host, a.port, a.user, a.password, a.name) == (
        "example.org", 5673, "alice", "secret", "example.org:5673")
    b = route.parse_address("10.0.0.1")
    assert (b.host, b.port, b.user, b.password) == ("10.0.0.1", 5672, None, None)
    assert route.parse_address("[::1]:5").name == "[::1]:5"


@pytest.mark.parametrize("argv, words", [
    (["route", "add", "a:1", "b:2", "amq.direct"], "route add takes 4 to 7 arguments"),
    (["link", "add", "a:1"], "link add takes 2 to 3 arguments"),
    (["bogus", "add", "a:1", "b:2"], "unknown group 'bogus'"),
    (["route", "frob"], "unknown command route 'frob'"),
    (["link"], "give a group and a command"),
    (["-s", "dynamic", "add", "a:1", "b:2", "amq.topic"], "--src-local is not permitted"),
    (["link", "add", "a b", "c:1"], "is not [user[/password]@]host[:port]"),
])
def test_bad_command_lines_are_one_line_usage_errors(argv: list[str], words: str) -> None:
    rc, out, err = qmf("route", *argv)
    assert rc == 2, err
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and words in err, err


def test_unknown_broker_is_unreachable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # as a process: the exit code a shell sees
    rc, out, err = qmf_process("route", "--timeout", "5", "link", "list", f"127.0.0.1:{port}")
    assert rc == 3, err
    assert out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith("qmf route: error:")


# --------------------------------------------------------------------------- two brokers


def test_dynamic_route_federates_an_exchange(pair: tuple[Qpidd, Qpidd]) -> None:
    dest, src = pair
    ok("route", "dynamic", "add", dest.address, src.address, "amq.topic")
    queue = add_bound_queue(dest, "amq.topic", "news.#")
    body = deliver(src, "amq.topic", dest, queue, subject="news.today")
    assert body.startswith("body-")
    rows = json.loads(ok("route", "route", "list", dest.address, "--json"))
    assert [(r["src_broker"], r["dest"], r["dynamic"]) for r in rows] == [
        (src.address, "amq.topic", True)]
    # the destination's binding was propagated to the source as a binding of the
    # bridge queue: delete the route, and the source drops it
    ok("route", "dynamic", "del", dest.address, src.address, "amq.topic")
    assert json.loads(ok("route", "route", "list", dest.address, "--json")) == []


def test_static_route_and_the_classic_tool_agree(pair: tuple[Qpidd, Qpidd],
                                                 classic_tools: ClassicTools) -> None:
    dest, src = pair
    ok("route", "route", "add", dest.address, src.address, "amq.direct", "k1")
    queue = add_bound_queue(dest, "amq.direct", "k1")
    deliver(src, "amq.direct", dest, queue, subject="k1")

    # a route made by the classic tool, seen by qmf route
    rc, _, err = classic_tools("qpid-route", "route", "add", dest.address, src.address,
                               "amq.direct", "k2")
    assert rc == 0, err
    ours = ok("route", "route", "list", dest.address)
    rc, theirs, err = classic_tools("qpid-route", "route", "list", dest.address)
    assert rc == 0, err
    assert route_lines(ours) == route_lines(theirs)
    assert route_lines(ours) == {
        (dest.address, src.address, "amq.direct", "k1", "False"),
        (dest.address, src.address, "amq.direct", "k2", "False")}

    rc, theirs, err = classic_tools("qpid-route", "link", "list", dest.address)
    assert rc == 0, err
    links = json.loads(ok("route", "link", "list", dest.address, "--json"))
    mine = [{k: r[k] for k in ("host", "port", "transport", "durable", "state")}
            for r in links]
    assert mine == classic_links(theirs)
    assert [(r["host"], r["port"]) for r in mine] == [("127.0.0.1", src.port)]
    table = ok("route", "link", "list", dest.address)
    assert "Host" in table and "Last Error" in table and str(src.port) in table

    # each tool deletes the other's route
    ok("route", "route", "del", dest.address, src.address, "amq.direct", "k2")
    rc, _, err = classic_tools("qpid-route", "route", "del", dest.address, src.address,
                               "amq.direct", "k1")
    assert rc == 0, err
    assert ok("route", "route", "list", dest.address) == ""
    rc, theirs, err = classic_tools("qpid-route", "route", "list", dest.address)
    assert rc == 0 and theirs.strip() == "", err

    # gone: a second delete is "not found" (5), quiet with -q
    rc, out, err = qmf("route", "route", "del", dest.address, src.address, "amq.direct", "k1")
    assert (rc, out) == (5, "") and err.strip() == "qmf route: error: route not found"
    assert qmf("route", "-q", "route", "del", dest.address, src.address, "amq.direct",
               "k1")[0] == 0


def test_queue_route_federates_a_queue(pair: tuple[Qpidd, Qpidd]) -> None:
    dest, src = pair
    source_queue = unique("src")
    ok("config", src.address, "add", "queue", source_queue)
    ok("route", "queue", "add", dest.address, src.address, "amq.fanout", source_queue)
    queue = add_bound_queue(dest, "amq.fanout")
    deliver(src, source_queue, dest, queue)
    rows = json.loads(ok("route", "route", "list", dest.address, "--json"))
    assert [(r["src"], r["dest"], r["src_is_queue"]) for r in rows] == [
        (source_queue, "amq.fanout", True)]
    ok("route", "-e", "queue", "del", dest.address, src.address, "amq.fanout", source_queue)
    # -e: the link went with its last route
    assert json.loads(ok("route", "link", "list", dest.address, "--json")) == []


def test_durable_push_route_with_src_local(pair: tuple[Qpidd, Qpidd],
                                           classic_tools: ClassicTools) -> None:
    """``-s``: the tool connects to the source, whose link reaches the destination."""
    dest, src = pair
    ok("route", "-s", "-d", "route", "add", dest.address, src.address, "amq.direct", "push")
    queue = add_bound_queue(dest, "amq.direct", "push")
    deliver(src, "amq.direct", dest, queue, subject="push")
    assert json.loads(ok("route", "link", "list", dest.address, "--json")) == []
    ours = ok("route", "route", "list", src.address)
    rc, theirs, err = classic_tools("qpid-route", "route", "list", src.address)
    assert rc == 0, err
    assert route_lines(ours) == route_lines(theirs) == {
        (src.address, dest.address, "amq.direct", "push", "True")}
    links = json.loads(ok("route", "link", "list", src.address, "--json"))
    rc, theirs, err = classic_tools("qpid-route", "link", "list", src.address)
    assert rc == 0, err
    assert [{k: r[k] for k in ("host", "port", "transport", "durable", "state")}
            for r in links] == classic_links(theirs)
    assert [(r["port"], r["durable"]) for r in links] == [(dest.port, True)]
    # without -s the route is not found: it is pushed, not pulled
    rc, _, err = qmf("route", "route", "del", src.address, dest.address, "amq.direct", "push")
    assert rc == 5, err
    ok("route", "-s", "route", "del", dest.address, src.address, "amq.direct", "push")
    assert ok("route", "route", "list", src.address) == ""


def test_duplicate_route_and_links(pair: tuple[Qpidd, Qpidd],
                                   classic_tools: ClassicTools) -> None:
    dest, src = pair
    assert ok("route", "link", "list", dest.address).strip() == "No Links Found"
    ok("route", "link", "add", dest.address, src.address)
    links = json.loads(ok("route", "link", "list", dest.address, "--json"))
    assert [(r["port"], r["state"]) for r in links] == [(src.port, "Operational")]

    ok("route", "route", "add", dest.address, src.address, "amq.direct", "k")
    rc, out, err = qmf("route", "route", "add", dest.address, src.address, "amq.direct", "k")
    assert rc == 1 and out == ""
    assert err.strip() == "qmf route: error: duplicate route - ignoring: amq.direct(k)"
    assert qmf("route", "-q", "route", "add", dest.address, src.address, "amq.direct",
               "k")[0] == 0

    rc, out, err = qmf("route", "link", "add", dest.address, dest.address)
    assert rc == 2 and "to itself" in err

    # a link closed by the classic tool is gone for qmf route, and the other way round
    rc, _, err = classic_tools("qpid-route", "link", "del", dest.address, src.address)
    assert rc == 0, err
    wait_for(lambda: json.loads(ok("route", "link", "list", dest.address, "--json")) == [],
             "the link closed by qpid-route did not go")
    rc, _, err = classic_tools("qpid-route", "link", "add", dest.address, src.address)
    assert rc == 0, err
    ok("route", "link", "del", dest.address, src.address)
    rc, out, err = classic_tools("qpid-route", "link", "list", dest.address)
    assert rc == 0 and "No Links Found" in out, out + err
    rc, out, err = qmf("route", "link", "del", dest.address, src.address)
    assert rc == 5 and err.strip() == (
        f"qmf route: error: no link from {src.address} to {dest.address}")


def test_route_map_and_flush(pair: tuple[Qpidd, Qpidd], classic_tools: ClassicTools) -> None:
    dest, src = pair
    ok("route", "dynamic", "add", dest.address, src.address, "amq.topic")
    ok("route", "dynamic", "add", src.address, dest.address, "amq.topic")
    ok("route", "route", "add", dest.address, src.address, "amq.direct", "k")
    ours = ok("route", "route", "map", dest.address)
    rc, theirs, err = classic_tools("qpid-route", "route", "map", dest.address)
    assert rc == 0, err
    assert map_routes(ours) == map_routes(theirs)
    assert map_routes(ours) == {
        f"{min(src.address, dest.address)} <=> {max(src.address, dest.address)}",
        f"{dest.address}(ex=amq.direct) <= {src.address}(ex=amq.direct) key=k"}
    assert f"    {src.address}... Ok" in ours.splitlines()
    data = json.loads(ok("route", "route", "map", dest.address, "--json"))
    assert {b["broker"] for b in data["brokers"] if b["ok"]} == {dest.address, src.address}
    assert [(g["exchange"], [p["bidirectional"] for p in g["pairs"]])
            for g in data["dynamic"]] == [("amq.topic", [True])]

    ok("route", "-e", "route", "flush", dest.address)
    assert json.loads(ok("route", "route", "list", dest.address, "--json")) == []
    assert json.loads(ok("route", "link", "list", dest.address, "--json")) == []
    # the other broker's route is still there
    rows = json.loads(ok("route", "route", "list", src.address, "--json"))
    assert [(r["src_broker"], r["dynamic"]) for r in rows] == [(dest.address, True)]
