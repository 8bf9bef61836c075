"""``qmf config`` side by side with the classic ``qpid-config`` on a genuine qpidd.

On one broker of this module's own: the listings (queues, exchanges, ``-r`` with
bindings, headers bindings included, ``list TYPE``) of both tools carry the same names
and values (our ``--json`` against the classic tables parsed by their header
positions); a queue, exchange or binding made by one tool is seen and removed by the
other, both ways; the same queue and exchange options give the same declare arguments
(qpidd's ``arguments`` property) whichever tool made the object.  The classic tool is
run with the same command line as ours, only the program name changed.
"""

from __future__ import annotations

import ast
import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ._util import qmf_in_process
from .conftest import ClassicTools, _start_qpidd
from .qpidd import Qpidd

pytestmark = pytest.mark.qpidd

#: the queue options of both tools, and the declare arguments they must become
FULL_QUEUE = ["--durable", "--max-queue-size", "1000", "--max-queue-count", "10",
              "--limit-policy", "ring", "--flow-stop-size", "900", "--flow-resume-size", "500",
              "--flow-stop-count", "9", "--flow-resume-count", "5", "--group-header", "g",
              "--shared-groups", "--argument", "foo=bar", "--argument", "n=5",
              "--file-count", "4", "--file-size", "8", "--efp-partition-num", "1",
              "--efp-pool-file-size", "2048", "--wcache-page-size", "32",
              "--wcache-num-pages", "8", "--replicate", "all",
              "--alternate-exchange", "amq.fanout"]
FULL_ARGUMENTS = {"qpid.max_size": 1000, "qpid.max_count": 10, "qpid.policy_type": "ring",
                  "qpid.flow_stop_size": 900, "qpid.flow_resume_size": 500,
                  "qpid.flow_stop_count": 9, "qpid.flow_resume_count": 5,
                  "qpid.group_header_key": "g", "qpid.shared_msg_group": 1, "foo": "bar",
                  "n": 5, "qpid.file_count": 4, "qpid.file_size": 8,
                  "qpid.efp_partition_num": 1, "qpid.efp_pool_file_size": 2048,
                  "qpid.wcache-page-size": 32, "qpid.wcache-num-pages": 8,
                  "qpid.replicate": "all"}
#: store options without --durable are dropped (both tools)
LVQ_QUEUE = ["--lvq-key", "k", "--limit-policy", "reject", "--file-count", "3"]
LVQ_ARGUMENTS = {"qpid.last_value_queue_key": "k", "qpid.policy_type": "reject"}
EXCHANGE = ["--durable", "--sequence", "--ive", "--alternate-exchange", "amq.fanout",
            "--replicate", "configuration"]
EXCHANGE_ARGUMENTS = {"qpid.msg_sequence": 1, "qpid.ive": 1, "qpid.replicate": "configuration"}
TOOLS = ["qmf", "classic"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Qpidd]:
    """A stock qpidd (QMF v1 off) of this module's own."""
    started = _start_qpidd(False, tmp_path_factory.mktemp("qpidd-config"))
    yield started
    started.stop()


class Tools:
    """Both tools on one broker: the same arguments, only the program differs."""

    def __init__(self, broker: Qpidd, classic_tools: ClassicTools) -> None:
        self.broker = broker
        self.classic_tools = classic_tools

    def qmf(self, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
        # in this process (test_cli_tools and test_cli_route run it as a process too)
        return qmf_in_process("config", "-b", self.broker.address, *args, stdin=stdin,
                              env={"QMF_URL": None}, timeout=60)

    def classic(self, *args: str) -> tuple[int, str, str]:
        return self.classic_tools("qpid-config", "-b", self.broker.address, *args, timeout=60)

    def run(self, tool: str, *args: str) -> tuple[int, str, str]:
        return self.qmf(*args) if tool == "qmf" else self.classic(*args)

    def ok(self, tool: str, *args: str) -> str:
        rc, out, err = self.run(tool, *args)
        assert rc == 0 and "Failed" not in out, (tool, args, out, err)
        return out

    def qmf_json(self, *args: str) -> Any:
        return json.loads(self.ok("qmf", *args, "--json"))


@pytest.fixture
def tools(broker: Qpidd, classic_tools: ClassicTools) -> Tools:
    return Tools(broker, classic_tools)


@pytest.fixture
def prefix() -> str:
    return f"cfg-{uuid.uuid4().hex[:8]}"


# --------------------------------------------------------------------------- classic output


def attributes(text: str) -> list[str]:
    """An Attributes cell as sorted options (``--argument K=V`` kept together; the
    classic tool prints the other arguments in its dictionary's order)."""
    words = text.split()
    out: list[str] = []
    while words:
        word = words.pop(0)
        out.append(f"{word} {words.pop(0)}" if word == "--argument" else word)
    return sorted(out)


def classic_queues(out: str) -> dict[str, list[str]]:
    """``qpid-config queues``: name -> attributes."""
    lines = out.splitlines()
    start = lines[0].index("Attributes")
    return {line[:start].strip(): attributes(line[start:]) for line in lines[2:] if line}


def classic_exchanges(out: str) -> dict[str, tuple[str, list[str]]]:
    """``qpid-config exchanges``: name -> (type, attributes)."""
    lines = out.splitlines()
    name_at, start = lines[0].index("Exchange Name"), lines[0].index("Attributes")
    return {line[name_at:start].strip(): (line[:name_at].strip(), attributes(line[start:]))
            for line in lines[2:] if line}


_BIND = re.compile(r"    bind \[(?P<key>.*?)\] => (?P<name>.*?)(?: (?P<args>\{.*\}))?$")


def classic_recursive(out: str) -> dict[str, list[tuple[str, str, dict[str, Any]]]]:
    """``qpid-config queues|exchanges -r``: object -> [(key, other name, arguments)]."""
    found: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    current = ""
    for line in out.splitlines():
        head = re.match(r"(?:Queue|Exchange) '(.*)'", line)
        if head:
            current = head.group(1)
            found[current] = []
            continue
        m = _BIND.match(line)
        assert m, line
        args = ast.literal_eval(m["args"]) if m["args"] else {}
        found[current].append((m["key"], m["name"], args))
    return found


def classic_list(out: str) -> list[dict[str, str]]:
    """``qpid-config list TYPE``: rows of cells, cut at the header's column positions."""
    lines = out.splitlines()
    rule = next((i for i, line in enumerate(lines) if line.strip().startswith("=====")), None)
    if rule is None:  # no objects: the title only
        assert lines == [lines[0]] and lines[0].startswith("Objects of type"), out
        return []
    header = lines[rule - 1]
    names = header.split()
    starts: list[int] = []
    pos = 0
    for name in names:
        pos = header.index(name, pos)
        starts.append(pos)
        pos += len(name)
    ends = [*starts[1:], None]
    return [{n: line[s:e].strip() for n, s, e in zip(names, starts, ends, strict=True)}
            for line in lines[rule + 1:] if line.strip()]


def together(*calls: Callable[[], Any]) -> list[Any]:
    """Independent tool runs at once (each is a process of its own)."""
    with ThreadPoolExecutor(len(calls)) as pool:
        return [f.result() for f in [pool.submit(c) for c in calls]]


def poll(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.1)


# --------------------------------------------------------------------------- options


def test_queue_options_read_back_equal_whichever_tool_made_the_queue(
        tools: Tools, prefix: str) -> None:
    made = {}
    for tool in TOOLS:
        full, lvq = f"{prefix}-{tool}-full", f"{prefix}-{tool}-lvq"
        tools.ok(tool, "add", "queue", full, *FULL_QUEUE)
        tools.ok(tool, "add", "queue", lvq, *LVQ_QUEUE)
        made[tool] = (full, lvq)
    ours = {q["name"]: q for q in tools.qmf_json("queues", prefix)}
    classic = classic_queues(tools.ok("classic", "queues", prefix))
    assert sorted(ours) == sorted(classic) == sorted(n for pair in made.values() for n in pair)
    for full, lvq in made.values():
        # qpidd's arguments property: what the options became
        assert ours[full]["arguments"] == FULL_ARGUMENTS
        assert ours[lvq]["arguments"] == LVQ_ARGUMENTS
        assert (ours[full]["durable"], ours[lvq]["durable"]) == (True, False)
        assert ours[full]["alternate_exchange"] == "amq.fanout"
        assert ours[lvq]["alternate_exchange"] is None
        # both listings say the same of each queue
        for name in (full, lvq):
            assert attributes(ours[name]["attributes"]) == classic[name], name
    assert "--shared-groups" in classic[made["qmf"][0]]
    # and the classic generic listing reads the same arguments from qpidd
    rows = classic_list(tools.ok("classic", "list", "queue", "--show-property", "name",
                                 "--show-property", "arguments"))
    listed = {r["name"]: ast.literal_eval(r["arguments"]) for r in rows
              if r["name"].startswith(prefix)}
    assert listed == {ours_name: ours[ours_name]["arguments"] for ours_name in ours}


def test_exchange_options_read_back_equal_whichever_tool_made_the_exchange(
        tools: Tools, prefix: str) -> None:
    for tool in TOOLS:
        tools.ok(tool, "add", "exchange", "headers", f"{prefix}-{tool}", *EXCHANGE)
    ours = {e["name"]: e for e in tools.qmf_json("exchanges", prefix)}
    classic = classic_exchanges(tools.ok("classic", "exchanges", prefix))
    assert sorted(ours) == sorted(classic) == [f"{prefix}-{t}" for t in sorted(TOOLS)]
    for name, row in ours.items():
        assert row["arguments"] == EXCHANGE_ARGUMENTS
        assert (row["type"], row["durable"], row["alternate_exchange"]) == (
            "headers", True, "amq.fanout")
        assert classic[name] == ("headers", attributes(row["attributes"]))
    assert classic[f"{prefix}-qmf"][1] == sorted(
        ["--durable", "--replicate=configuration", "--sequence", "--ive",
         "--alternate-exchange=amq.fanout"])


def test_ring_strict_is_refused_before_connecting(tools: Tools, prefix: str) -> None:
    rc, out, err = tools.qmf("add", "queue", prefix, "--limit-policy", "ring-strict")
    assert rc == 2 and out == "" and "no such policy" in err
    rc, _out, _err = tools.qmf("queues", prefix)
    assert rc == 1  # nothing was made


# --------------------------------------------------------------------------- listings


def test_exchange_and_queue_listings_match(tools: Tools, prefix: str) -> None:
    tools.ok("classic", "add", "queue", f"{prefix}-a", "--durable")
    tools.ok("qmf", "add", "queue", f"{prefix}-b", "--max-queue-count", "7")
    tools.ok("qmf", "add", "exchange", "topic", f"{prefix}-x")
    # every exchange, the broker's own included
    ours = {e["name"]: e for e in tools.qmf_json("exchanges")}
    classic = classic_exchanges(tools.ok("classic", "exchanges"))
    assert "" in classic and f"{prefix}-x" in classic
    assert {n: (e["type"], attributes(e["attributes"])) for n, e in ours.items()} == classic
    # --ignore-default leaves the default exchange out, in both
    ours_nd = {e["name"] for e in tools.qmf_json("exchanges", "--ignore-default")}
    classic_nd = classic_exchanges(tools.ok("classic", "exchanges", "--ignore-default"))
    assert ours_nd == set(classic_nd) == set(classic) - {""}
    queues = {q["name"]: attributes(q["attributes"]) for q in tools.qmf_json("queues", prefix)}
    assert queues == classic_queues(tools.ok("classic", "queues", prefix))
    assert queues[f"{prefix}-a"] == ["--durable"]
    assert queues[f"{prefix}-b"] == ["--max-queue-count=7"]
    # the summary counts the same objects
    summary = tools.qmf_json()
    overview = tools.ok("classic")
    assert f"Total Exchanges: {summary['exchanges']['total']}" in overview
    for ex_type, n in summary["exchanges"]["by_type"].items():
        assert re.search(rf"^\s*{ex_type}: {n}$", overview, re.M), (ex_type, overview)
    # the queue totals differ by the tools' own reply queues: count durable ones
    assert re.search(rf"^\s*durable: {summary['queues']['durable']}$", overview, re.M)


def test_a_filter_that_matches_nothing_exits_1_in_both(tools: Tools, prefix: str) -> None:
    for command in ("queues", "exchanges"):
        rc, out, _err = tools.qmf(command, prefix)
        assert (rc, out) == (1, "")
        rc, out, _err = tools.classic(command, prefix)
        assert (rc, out) == (1, "")


def test_list_type_matches(tools: Tools, prefix: str) -> None:
    tools.ok("qmf", "add", "queue", f"{prefix}-q", "--durable")
    tools.ok("qmf", "add", "exchange", "headers", f"{prefix}-h")
    tools.ok("qmf", "bind", f"{prefix}-h", f"{prefix}-q", "k", "any", "a=1", "b=2")
    # the default properties of queue and exchange
    for cls, key in (("queue", "name"), ("exchange", "name")):
        ours = tools.qmf_json("list", cls)
        classic = classic_list(tools.ok("classic", "list", cls))
        mine = {r[key]: {k: str(v) for k, v in r.items()} for r in ours}
        theirs = {r[key]: r for r in classic}
        assert sorted(classic[0]) == sorted(ours[0])  # the same columns
        for name, row in theirs.items():
            if cls == "queue" and not name.startswith(prefix):
                continue  # the tools' own reply queues
            assert mine[name] == row, (cls, name)
    # bindings: references shown as the names they point at
    props = ["exchangeRef", "queueRef", "bindingKey", "arguments"]
    shown = [w for p in props for w in ("--show-property", p)]
    ours = [r for r in tools.qmf_json("list", "binding", *shown)
            if r["queueRef"].startswith(prefix)]
    classic = [r for r in classic_list(tools.ok("classic", "list", "binding", *shown))
               if r["queueRef"].startswith(prefix)]
    for row in classic:
        row["arguments"] = ast.literal_eval(row["arguments"])
    key = lambda r: (r["exchangeRef"], r["bindingKey"])  # noqa: E731
    assert sorted(ours, key=key) == sorted(classic, key=key) == [
        {"exchangeRef": "", "queueRef": f"{prefix}-q", "bindingKey": f"{prefix}-q",
         "arguments": {}},
        {"exchangeRef": f"{prefix}-h", "queueRef": f"{prefix}-q", "bindingKey": "k",
         "arguments": {"a": "1", "b": "2", "x-match": "any"}}]
    # an unknown property: a warning, the others still shown
    rc, out, err = tools.qmf("list", "queue", "--show-property", "name",
                             "--show-property", "nosuch")
    assert rc == 0 and "no property 'nosuch'" in err and f"{prefix}-q" in out


# ------------------------------------------------------------ one tool makes, the other removes


@pytest.mark.parametrize(("maker", "other"), [("qmf", "classic"), ("classic", "qmf")])
def test_objects_and_bindings_made_by_one_tool_are_seen_and_removed_by_the_other(
        tools: Tools, prefix: str, maker: str, other: str) -> None:
    queue, headers, topic = f"{prefix}-q", f"{prefix}-hx", f"{prefix}-tx"
    tools.ok(maker, "add", "queue", queue)
    tools.ok(maker, "add", "exchange", "headers", headers)
    tools.ok(maker, "add", "exchange", "topic", topic, "--durable")
    tools.ok(maker, "bind", headers, queue, "hk", "all", "a=1", "b=x")
    tools.ok(maker, "bind", topic, queue, "t.#")
    expected = {("hk", headers, (("a", "1"), ("b", "x"), ("x-match", "all"))),
                ("t.#", topic, ()), (queue, "''", ())}

    def ours_of_queue() -> set[tuple[str, str, tuple[tuple[str, str], ...]]]:
        (row,) = tools.qmf_json("queues", queue, "-r")
        return {(b["key"], b["exchange"] or "''", tuple(sorted(b["arguments"].items())))
                for b in row["bindings"]}

    def classic_of_queue() -> set[tuple[str, str, tuple[tuple[str, str], ...]]]:
        found = classic_recursive(tools.ok("classic", "queues", queue, "-r"))
        return {(k, n, tuple(sorted(a.items()))) for k, n, a in found[queue]}

    ours_q, classic_q, ours_ex, classic_ex = together(
        ours_of_queue, classic_of_queue, lambda: tools.qmf_json("exchanges", headers, "-r"),
        lambda: tools.ok("classic", "exchanges", headers, "-r"))
    assert ours_q == classic_q == expected
    assert [(b["queue"], b["key"], b["arguments"]) for b in ours_ex[0]["bindings"]] == [
        (queue, "hk", {"a": "1", "b": "x", "x-match": "all"})]
    assert classic_recursive(classic_ex) == {
        headers: [("hk", queue, {"a": "1", "b": "x", "x-match": "all"})]}

    # the other tool removes them
    together(lambda: tools.ok(other, "unbind", headers, queue, "hk"),
             lambda: tools.ok(other, "unbind", topic, queue, "t.#"))
    assert together(ours_of_queue, classic_of_queue) == [{(queue, "''", ())}] * 2
    together(lambda: tools.ok(other, "del", "exchange", headers),
             lambda: tools.ok(other, "del", "exchange", topic),
             lambda: tools.ok(other, "del", "queue", queue))
    codes = together(*(lambda t=tool, c=command: tools.run(t, c, prefix)[0]
                       for tool in TOOLS for command in ("queues", "exchanges")))
    assert codes == [1, 1, 1, 1]


@pytest.mark.parametrize(("maker", "other"), [("qmf", "classic"), ("classic", "qmf")])
def test_generic_add_list_del_of_a_link(tools: Tools, prefix: str, maker: str,
                                        other: str) -> None:
    """``add link`` / ``del link`` through the broker's create/delete (a link to a
    closed port: it stays, retrying)."""
    link = f"{prefix}-link"
    tools.ok(maker, "add", "link", link, "--argument", "host=127.0.0.1",
             "--argument", "port=1")
    shown = ["--show-property", "name", "--show-property", "host", "--show-property", "port"]
    ours = {r["name"]: r for r in tools.qmf_json("list", "link", *shown)}
    classic = {r["name"]: r for r in classic_list(tools.ok("classic", "list", "link",
                                                           *shown))}
    assert ours[link]["host"] == classic[link]["host"] == "127.0.0.1"
    assert ours[link]["port"] == int(classic[link]["port"]) == 1
    tools.ok(other, "del", "link", link)

    def gone() -> bool:
        return link not in {r["name"] for r in tools.qmf_json("list", "link")}

    poll(gone, 10, f"link {link} deleted")
    assert link not in {r["name"] for r in classic_list(tools.ok("classic", "list", "link"))}
    # qpidd deletes an unknown link silently; qmf says it is not there
    rc, _out, err = tools.qmf("del", "link", link)
    assert rc == 5 and f"no link named '{link}'" in err


# --------------------------------------------------------------------------- refusals


def test_xml_exchange_refused_clearly(tools: Tools, prefix: str, tmp_path: Path) -> None:
    rc, out, err = tools.qmf("add", "exchange", "xml", prefix)
    assert rc == 6 and out == ""
    (line,) = err.strip().splitlines()
    assert "Invalid exchange type: xml" in line and "has no XML exchange" in line
    rc, out, _err = tools.classic("add", "exchange", "xml", prefix)
    assert rc == 1 and "Invalid exchange type: xml" in out
    # -f belongs to XML bindings only
    query = tmp_path / "q.xq"
    query.write_text("./a = 1")
    tools.ok("qmf", "add", "queue", prefix)
    rc, _out, err = tools.qmf("bind", "amq.direct", prefix, "k", "-f", str(query))
    assert rc == 2 and "-f is for binding to an XML exchange" in err
    # a headers binding wants its conditions, as in qpid-config
    rc, _out, err = tools.qmf("bind", "amq.match", prefix, "k")
    assert rc == 2 and "all|any" in err
    rc, out, _err = tools.classic("bind", "amq.match", prefix, "k")
    assert rc == 1 and "need 'any'/'all'" in out
    rc, _out, err = tools.qmf("bind", "amq.match", prefix, "k", "some", "a=1")
    assert rc == 2 and "'some'" in err
    # --start-replica needs the HA module, which this qpidd has not
    rc, out, err = tools.qmf("add", "queue", f"{prefix}-r", "--start-replica",
                             "127.0.0.1:1")
    assert rc == 5 and out == f"queue '{prefix}-r' created\n"
    assert "--start-replica needs the HA module" in err


def test_shutdown_stops_the_broker_as_qpid_config_does(
        qpidd_fresh: Any, classic_tools: ClassicTools) -> None:
    for tool in TOOLS:
        broker: Qpidd = qpidd_fresh(False)
        rc, out, err = Tools(broker, classic_tools).run(tool, "shutdown")
        assert rc == 0, (tool, out, err)
        poll(lambda b=broker: not b.is_running(), 15, f"qpidd stopped by {tool} shutdown")
