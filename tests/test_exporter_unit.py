"""The exporter without brokers: the mapping, the live store, the exposition (parsed by
prometheus-client's parser and, when present, checked by ``promtool``), the shipped
rules (``promtool test rules``: one test per alert), the dashboard, the docs' metric
table and the CLI without the extra."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from qmf_async import Change, ClassKey, ObjectId, QmfType, SchemaClass, SchemaStatistic
from qmf_async.exporter import (
    QPIDD_CLASSES,
    Filters,
    LiveStore,
    escape_label,
    format_value,
    full_metric_table,
    generic_class_map,
    resource_path,
    snake,
)

parser = pytest.importorskip("prometheus_client.parser")

ROOT = Path(__file__).resolve().parent.parent
B = "127.0.0.1:5672"
QPIDD = "org.apache.qpid.broker"
AGENT = SimpleNamespace(name="apache.org:qpidd:one", label="qpidd")


class Obj:
    """An object as the store reads it (what a QmfObject answers)."""

    def __init__(self, cls: str, n: int, values: dict[str, Any], *,
                 changes: Change = Change.PROPERTIES | Change.STATISTICS,
                 deleted: bool = False, agent: Any = AGENT, created: int = 0,
                 package: str = QPIDD, schema: SchemaClass | None = None) -> None:
        self.key = ClassKey(package, cls, bytes(16))
        self.oid = ObjectId.from_ints(n, n)
        self.values, self.changes, self.deleted = values, changes, deleted
        self.agent, self.created, self.schema = agent, created, schema
        self.sampled = 0

    def get_class_key(self) -> ClassKey:
        return self.key

    def get_object_id(self) -> ObjectId:
        return self.oid

    def get_schema(self) -> SchemaClass:
        assert self.schema is not None
        return self.schema

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)

    def get_changes(self) -> Change:
        return self.changes

    def get_index(self) -> str:
        return str(self.values.get("name", ""))

    def get_agent(self) -> Any:
        return self.agent

    def get_timestamps(self) -> tuple[int, int, int]:
        return (self.sampled, self.created, 0)

    def is_deleted(self) -> bool:
        return self.deleted


VHOST = Obj("vhost", 1, {"name": "/"})


def queue(n: int, name: str, **values: Any) -> Obj:
    props = {"name": name, "vhostRef": VHOST.oid, "durable": True, "autoDelete": False,
             "exclusive": False, "arguments": {"qpid.policy_type": "ring"},
             "msgDepth": 3, "byteDepth": 30, "msgTotalEnqueues": 10, "msgTotalDequeues": 7,
             "consumerCount": 1, "flowStopped": False, "discardsRing": 2}
    props.update(values)
    return Obj("queue", n, props)


def families(text: str) -> dict[str, Any]:
    return {f.name: f for f in parser.text_string_to_metric_families(text)}


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    out = {}
    for fam in parser.text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name:
                out[tuple(sorted(s.labels.items()))] = s.value
    return out


def test_queue_families_types_units_and_labels() -> None:
    store = LiveStore()
    store.update(B, VHOST, 1.0)
    store.update(B, queue(2, "orders"), 1.0)
    text = store.render()
    fams = families(text)
    # counters carry _total (the parser strips it from the family name), gauges do not
    assert fams["qpidd_queue_messages_enqueued"].type == "counter"
    assert fams["qpidd_queue_messages"].type == "gauge"
    assert fams["qpidd_queue_messages_bytes"].type == "gauge"
    labels = (("broker", B), ("queue", "orders"), ("vhost", "/"))
    assert samples(text, "qpidd_queue_messages_enqueued_total") == {labels: 10}
    assert samples(text, "qpidd_queue_messages_dequeued_total") == {labels: 7}
    assert samples(text, "qpidd_queue_flow_stopped") == {labels: 0}
    discards = samples(text, "qpidd_queue_messages_discarded_total")
    assert discards[(*labels[:2], ("reason", "ring"), labels[2])] == 2
    info = samples(text, "qpidd_queue_info")
    assert info == {(("auto_delete", "false"), ("broker", B), ("durable", "true"),
                     ("exclusive", "false"), ("policy", "ring"), ("queue", "orders"),
                     ("vhost", "/")): 1}
    # a statistic the object does not have is no sample (not a zero)
    assert samples(text, "qpidd_queue_bindings") == {}


def test_updates_take_the_latest_values_and_deletions_drop_out() -> None:
    store = LiveStore()
    store.update(B, VHOST, 1.0)
    store.update(B, queue(2, "orders"), 1.0)
    stats_only = queue(2, "orders", msgTotalEnqueues=25)
    stats_only.changes = Change.STATISTICS
    store.update(B, stats_only, 2.0)
    text = store.render()
    assert list(samples(text, "qpidd_queue_messages_enqueued_total").values()) == [25]
    gone = queue(2, "orders")
    gone.deleted = True
    store.update(B, gone, 3.0)
    assert samples(store.render(), "qpidd_queue_messages_enqueued_total") == {}
    assert store.lifecycle[(B, "queue_deleted")] == 1


def test_console_queues_are_left_out_by_default_and_patterns_apply() -> None:
    store = LiveStore(filters=Filters(queue_include=("app-*",)))
    store.update(B, VHOST, 1.0)
    for n, name in enumerate(["app-1", "other", "c_qmf-reply-1234", "qmfc-v2-ab"], 2):
        store.update(B, queue(n, name), 1.0)
    names = {dict(k)["queue"] for k in samples(store.render(), "qpidd_queue_messages")}
    assert names == {"app-1"}
    assert store.filtered == 3
    everything = LiveStore(filters=Filters(queue_exclude=()))
    everything.update(B, queue(3, "c_qmf-reply-1234"), 1.0)
    assert len(samples(everything.render(), "qpidd_queue_messages")) == 1


def test_a_restarted_broker_gives_one_series_per_object() -> None:
    store = LiveStore()
    store.update(B, VHOST, 1.0)
    store.update(B, queue(2, "orders", msgTotalEnqueues=100), 1.0)
    new_agent = SimpleNamespace(name="apache.org:qpidd:two", label="qpidd")
    restarted = queue(9, "orders", msgTotalEnqueues=4)
    restarted.agent = new_agent
    store.update(B, restarted, 2.0)
    assert list(samples(store.render(), "qpidd_queue_messages_enqueued_total").values()) == [4]
    # the snapshot after the reconnect updated the new object only: the old one leaves
    assert store.sweep(B, before=1.5) == 2  # the old queue and the vhost
    assert store.objects() == 1


def test_a_stale_agent_vanishes_after_the_documented_age() -> None:
    store = LiveStore()
    store.update(B, queue(2, "orders"), 10.0)
    store.update("other:5672", queue(3, "orders"), 10.0)
    store.broker_down(B, 20.0)
    assert store.expire(now=25.0, stale_after=10.0) == 0
    assert store.expire(now=31.0, stale_after=10.0) == 1
    left = samples(store.render(), "qpidd_queue_messages")
    assert [dict(k)["broker"] for k in left] == ["other:5672"]
    assert (B, AGENT.name) not in store.agents


def test_the_series_limit_cuts_and_counts() -> None:
    store = LiveStore(max_series=50)
    store.update(B, VHOST, 1.0)
    for n in range(2, 12):
        store.update(B, queue(n, f"q{n}"), 1.0)
    text = store.render()
    written = [line for line in text.splitlines()
               if line and not line.startswith(("#", "qpidd_queues_"))]  # per broker: uncut
    assert len(written) == 50 == store.series
    assert store.series_cut > 0 and store.series_cut_total == store.series_cut
    families(text)  # still a valid exposition


def test_new_connections_are_counted_snapshots_are_not() -> None:
    store = LiveStore()
    store.since_ns[B] = 1000
    conn = Obj("connection", 5, {"address": "10.0.0.1:4000", "bytesFromClient": 5})
    store.update(B, conn, 1.0, snapshot=True)
    store.update(B, Obj("connection", 6, {"address": "10.0.0.1:4001"}, created=999), 1.0)
    store.update(B, Obj("connection", 7, {"address": "10.0.0.1:4002"}, created=2000), 1.0)
    text = store.render()
    assert samples(text, "qpidd_connections_opened_total") == {(("broker", B),): 1}
    assert samples(text, "qpidd_connection_received_bytes_total") == {
        (("broker", B), ("connection", "10.0.0.1:4000"), ("vhost", "")): 5}


def test_generic_agents_are_exported_from_their_schema() -> None:
    key = ClassKey("com.example.app", "worker", bytes(16))
    schema = SchemaClass(kind=1, class_key=key, statistics=(
        SchemaStatistic("jobsDone", QmfType.UINT64, desc="Jobs done"),
        SchemaStatistic("busyTime", QmfType.DELTATIME),
        SchemaStatistic("state", QmfType.SSTR)))
    cmap = generic_class_map(schema)
    names = [m.name for m in cmap.metrics]
    assert names == ["qmf_com_example_app_worker_info", "qmf_com_example_app_worker_jobs_done",
                     "qmf_com_example_app_worker_busy_time_seconds"]
    agent = SimpleNamespace(name="example:app:1", label="")
    obj = Obj("worker", 4, {"name": "w1", "jobsDone": 7, "busyTime": 2_500_000_000},
              package="com.example.app", schema=schema, agent=agent)
    assert not LiveStore().exports(key)
    store = LiveStore(generic=True)
    store.update(B, obj, 1.0)
    text = store.render()
    labels = (("agent", "example:app:1"), ("broker", B), ("object", "w1"))
    assert samples(text, "qmf_com_example_app_worker_jobs_done") == {labels: 7}
    assert samples(text, "qmf_com_example_app_worker_busy_time_seconds") == {labels: 2.5}
    assert not LiveStore(generic=True, packages=["org.other"]).exports(key)


def test_names_and_values_in_the_text_format() -> None:
    assert snake("msgTotalEnqueues") == "msg_total_enqueues"
    assert snake("com.example.App-2") == "com_example_app_2"
    assert escape_label('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    assert [format_value(v) for v in (3, 2.0, 0.5, float("nan"), float("inf"))] == [
        "3", "2", "0.5", "NaN", "+Inf"]
    store = LiveStore(filters=Filters(queue_exclude=()))
    store.update(B, queue(2, 'we"ird\\name\n'), 1.0)
    (key,) = samples(store.render(), "qpidd_queue_messages")
    assert dict(key)["queue"] == 'we"ird\\name\n'


def test_naming_guide() -> None:
    """Every family: snake case, qpidd_ prefix, _total exactly on counters, base units."""
    for cmap in QPIDD_CLASSES:
        for m in cmap.metrics:
            assert re.fullmatch(r"qpidd_[a-z0-9_]+", m.name), m.name
            assert m.name.endswith("_total") == (m.kind == "counter"), m.name
            assert not re.search(r"_(milli|micro|nano)seconds|_octets|_kilobytes", m.name)


def _ci_or_skip(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"{tool} not found (scripts/prometheus.sh installs it; CI is set)")
        pytest.skip(f"{tool} not found (bash scripts/prometheus.sh)")
    return path


def test_promtool_finds_nothing_in_the_exposition(tmp_path: Path) -> None:
    promtool = _ci_or_skip("promtool")
    store = LiveStore()
    store.update(B, VHOST, 1.0)
    store.update(B, queue(2, "orders"), 1.0)
    store.update(B, Obj("connection", 5, {"address": "x:1", "bytesFromClient": 5,
                                          "authIdentity": "guest"}), 1.0)
    store.update(B, Obj("broker", 7, {"name": "amqp-broker", "uptime": 10**9,
                                      "msgTotalEnqueues": 4, "discardsNoRoute": 1}), 1.0)
    done = subprocess.run([promtool, "check", "metrics"], input=store.render(),
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and done.stdout + done.stderr == "", done.stdout + done.stderr


def test_rules_check_and_every_alert_has_a_unit_test() -> None:
    promtool = _ci_or_skip("promtool")
    rules = resource_path("rules.yml")
    done = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr
    tests = ROOT / "tests" / "data" / "exporter" / "rules_test.yml"
    done = subprocess.run([promtool, "test", "rules", str(tests)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    alerts = set(re.findall(r"- alert: (\w+)", rules.read_text()))
    tested = set(re.findall(r"alertname: (\w+)", tests.read_text()))
    assert len(alerts) >= 7 and alerts == tested


def test_dashboard_is_valid_json_with_queries() -> None:
    dash = json.loads(resource_path("dashboard.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert len(exprs) >= 10
    for needed in ("qpidd_up", "qpidd_queue_messages{", "qpidd_queue_messages_enqueued_total",
                   "qpidd_connection_info", "qpidd_broker_messages_discarded_total"):
        assert any(needed in e for e in exprs), needed


def test_the_docs_table_is_the_one_the_code_generates() -> None:
    doc = (ROOT / "docs" / "prometheus.md").read_text()
    begin, end = "<!-- metric-table: begin -->\n", "<!-- metric-table: end -->"
    assert begin in doc and end in doc
    table = doc.split(begin, 1)[1].split(end, 1)[0]
    assert table == full_metric_table(), "regenerate it: python -m qmf_async.exporter"


def _qmf(*args: str, block_prometheus: bool) -> subprocess.CompletedProcess[str]:
    code = ("import sys\n"
            + ("sys.modules['prometheus_client'] = None\n" if block_prometheus else "")
            + "from qmf_async.tools.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                          text=True, timeout=60, cwd=ROOT)


def test_without_the_extra_one_line_and_exit_2_and_the_rest_works() -> None:
    done = _qmf("exporter", "-b", "127.0.0.1:1", block_prometheus=True)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "qmf exporter: needs the prometheus extra: pip install 'qmf-async[prometheus]'"]
    version = _qmf("--version", block_prometheus=True)
    assert version.returncode == 0 and "qmf-async" in version.stdout
    helped = _qmf("exporter", "--help", block_prometheus=True)
    assert helped.returncode == 0 and "--listen" in helped.stdout


def test_a_connection_opened_and_closed_between_publications_counts_both() -> None:
    store = LiveStore(filters=Filters(connection_exclude=("10.9.*",)))
    store.since_ns[B] = 1000
    store.update(B, Obj("connection", 5, {"address": "10.0.0.1:4000"}, created=2000,
                        deleted=True), 1.0)
    hidden = Obj("connection", 6, {"address": "10.9.0.1:1"}, created=2000)
    store.update(B, hidden, 1.0)
    store.update(B, hidden, 2.0)  # filtered: counted once, not per update
    hidden.deleted = True
    store.update(B, hidden, 3.0)
    text = store.render()
    assert samples(text, "qpidd_connections_opened_total") == {(("broker", B),): 2}
    assert samples(text, "qpidd_connections_closed_total") == {(("broker", B),): 2}
    assert store.filtered == 1 and store.objects() == 0


def test_an_older_answer_never_takes_a_counter_back() -> None:
    store = LiveStore()
    newer = queue(2, "orders", msgTotalEnqueues=50)
    newer.sampled = 2_000
    store.update(B, newer, 1.0)
    older = queue(2, "orders", msgTotalEnqueues=40)  # a snapshot answer sampled before
    older.sampled = 1_000
    store.update(B, older, 2.0, snapshot=True)
    assert list(samples(store.render(), "qpidd_queue_messages_enqueued_total").values()) == [50]
    assert store.stale_updates == 1


def test_a_scrape_reusing_unchanged_families_writes_what_a_fresh_one_would() -> None:
    def feed(store: LiveStore, step: int) -> None:
        if step == 0:
            store.update(B, VHOST, 1.0)
            for n in range(2, 8):
                store.update(B, queue(n, f"q{n}"), 1.0)
        elif step == 1:
            changed = queue(3, "q3", msgTotalEnqueues=99, discardsRing=5)
            changed.changes = Change.STATISTICS
            store.update(B, changed, 2.0)
        elif step == 2:
            gone = queue(4, "q4")
            gone.deleted = True
            store.update(B, gone, 3.0)
            store.update(B, queue(20, "q20"), 3.0)

    scraped = LiveStore()
    for step in range(3):
        feed(scraped, step)
        scraped.render()  # caches every family
        fresh = LiveStore()
        for again in range(step + 1):
            feed(fresh, again)
        assert sorted(scraped.render().splitlines()) == sorted(fresh.render().splitlines())


def test_the_web_dashboard_example_leaves_the_console_queues_out_too() -> None:
    pytest.importorskip("aiohttp")
    from ._util import import_example

    app = import_example("web_dashboard", ROOT / "examples" / "web_dashboard" / "app.py")
    mine, console = queue(2, "orders"), queue(3, "qmf-async console-1_qmf-topic-ab12-3")
    default = app.Dashboard("amqp://127.0.0.1:1/")
    assert default.shows(mine) and not default.shows(console)
    everything = app.Dashboard("amqp://127.0.0.1:1/", console_queues=True)
    assert everything.shows(console)


async def test_the_http_server_answers_metrics_and_holds_the_updates_meanwhile() -> None:
    import asyncio

    from qmf_async.exporter import CONTENT_TYPE, serve_metrics

    calls: list[bool] = []
    server = await serve_metrics(lambda: b"x_total 1\n", "127.0.0.1", 0, pause=calls.append)
    port = server.address[1]

    async def ask(request: bytes) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request)
        answer = await asyncio.wait_for(reader.read(), 5)
        writer.close()
        return answer

    try:
        got = await ask(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert got.startswith(b"HTTP/1.1 200 OK\r\n") and got.endswith(b"\r\n\r\nx_total 1\n")
        assert f"Content-Type: {CONTENT_TYPE}".encode() in got
        assert calls == [True, False]
        zipped = await ask(b"GET /metrics HTTP/1.1\r\nAccept-Encoding: gzip\r\n\r\n")
        header, _, body = zipped.partition(b"\r\n\r\n")
        assert b"Content-Encoding: gzip" in header
        assert gzip.decompress(body) == b"x_total 1\n"
        head = await ask(b"HEAD /metrics HTTP/1.1\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200") and head.endswith(b"\r\n\r\n")
        assert (await ask(b"GET /nope HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 404")
        assert (await ask(b"POST /metrics HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 501")
        # a client that connects and sends nothing holds nothing
        _, silent = await asyncio.open_connection("127.0.0.1", port)
        await asyncio.sleep(0.05)
        assert calls.count(True) == calls.count(False) == 3
        silent.close()
    finally:
        await server.close()
