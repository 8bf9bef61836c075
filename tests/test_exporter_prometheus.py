"""``qmf exporter`` scraped by a real Prometheus (Debian's, ``scripts/prometheus.sh``)
on a genuine qpidd: known traffic in, rates out of PromQL within 10% of the truth;
``promtool check metrics`` on the live exposition; every dashboard query answers; a
qpidd restart takes ``qpidd_up`` to 0 and back with the series back, once each.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from qmf_async.exporter import resource_path

from .conftest import _unavailable
from .prometheus_server import ExporterProcess, Prometheus, prometheus_binaries
from .qpidd import Qpidd, send_messages

pytest.importorskip("prometheus_client")

from benchmarks.qpidd.known_traffic import Traffic

pytestmark = [pytest.mark.qpidd, pytest.mark.slow]

RATE_IN, RATE_OUT = 200.0, 80.0
WINDOW_S = 12.0
TOLERANCE = 0.10


def _deadline_poll(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s (last {value!r})")
        time.sleep(0.25)


@pytest.fixture(scope="module")
def binaries() -> tuple[str, str]:
    found = prometheus_binaries()
    if found is None:
        _unavailable("prometheus/promtool not found (bash scripts/prometheus.sh installs them)")
    return found


@pytest.fixture(scope="module")
def traffic_run(qpidd_stock: Qpidd, binaries: tuple[str, str],
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Exporter, Prometheus and known traffic on one queue, once for the module."""
    queue = f"exp-{uuid.uuid4().hex[:12]}"
    exporter = ExporterProcess("-b", qpidd_stock.address, "--tick", "0.2")
    prom = Prometheus(binaries[0], tmp_path_factory.mktemp("prom"), [exporter.target])
    traffic = Traffic(qpidd_stock.address, queue, RATE_IN, RATE_OUT)
    try:
        _deadline_poll(lambda: prom.value(f'qpidd_up{{broker="{qpidd_stock.address}"}}') == 1,
                       30, "qpidd_up 1")
        traffic.start()
        started = time.time()
        _deadline_poll(lambda: prom.query(f'qpidd_queue_messages{{queue="{queue}"}}'), 30,
                       "the queue's series")
        # a client that connects and leaves: the dashboard's opened/closed connections
        send_messages(qpidd_stock.address, queue, 1)
        extra_sent = time.time()
        # a window of known traffic, then a margin for the last publication and scrape
        _deadline_poll(lambda: time.time() > started + WINDOW_S + 6, 60, "the traffic window")
        yield {"queue": queue, "exporter": exporter, "prom": prom, "traffic": traffic,
               "broker": qpidd_stock.address, "promtool": binaries[1], "extra_sent": extra_sent}
    finally:
        try:
            traffic.stop()
        finally:
            prom.stop()
            exporter.stop()


@pytest.mark.parametrize("metric,times", [("qpidd_queue_messages_enqueued_total", "sent"),
                                          ("qpidd_queue_messages_dequeued_total", "received")])
def test_rates_match_the_known_traffic(traffic_run: dict[str, Any], metric: str,
                                       times: str) -> None:
    prom, traffic, queue = traffic_run["prom"], traffic_run["traffic"], traffic_run["queue"]
    at = time.time() - 3.0   # the values published and scraped by now
    rate = prom.value(f'rate({metric}{{queue="{queue}"}}[{WINDOW_S:.0f}s])', at)
    assert rate is not None
    stamps = getattr(traffic, times)
    truth = traffic.count(stamps, at - WINDOW_S, at) / WINDOW_S
    if times == "sent":  # the one message of the connecting client, when in the window
        truth += 1 / WINDOW_S if traffic_run["extra_sent"] > at - WINDOW_S else 0
    nominal = RATE_IN if times == "sent" else RATE_OUT
    # the client keeps its pace on a quiet machine; on a loaded one the truth is what
    # it achieved, and the exporter must match that
    assert truth >= nominal / 2, (truth, nominal)
    print(f"{metric}: rate() {rate:.1f}/s, truth {truth:.1f}/s, nominal {nominal:.0f}/s")
    assert abs(rate - truth) <= TOLERANCE * truth, (metric, rate, truth)


def test_promtool_finds_nothing_on_the_live_exposition(traffic_run: dict[str, Any]) -> None:
    text = traffic_run["exporter"].metrics()
    assert f'queue="{traffic_run["queue"]}"' in text
    done = subprocess.run([traffic_run["promtool"], "check", "metrics"], input=text,
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and done.stdout + done.stderr == "", done.stdout + done.stderr
    # the consoles' own queues (the exporter's too) are left out by default
    assert "qmf-reply-" not in text and "qmf-topic" not in text


def test_every_dashboard_query_returns_data(traffic_run: dict[str, Any]) -> None:
    prom = traffic_run["prom"]
    dash = json.loads(resource_path("dashboard.json").read_text())
    empty = []
    for panel in dash["panels"]:
        for target in panel["targets"]:
            expr = (target["expr"].replace("$__rate_interval", "10s")
                    .replace("$broker", ".*"))
            if not prom.query(expr):
                empty.append((panel["title"], expr))
    assert empty == []


def test_a_qpidd_restart(qpidd_fresh: Callable[[bool], Qpidd], binaries: tuple[str, str],
                         tmp_path: Path) -> None:
    broker = qpidd_fresh(False)
    queue = f"exp-{uuid.uuid4().hex[:12]}"
    exporter = ExporterProcess("-b", broker.address, "--tick", "0.2", "--stale-after", "2")
    prom = Prometheus(binaries[0], tmp_path / "prom", [exporter.target])
    traffic = Traffic(broker.address, queue, 50.0, 50.0)
    up = f'qpidd_up{{broker="{broker.address}"}}'
    series = f'qpidd_queue_messages_enqueued_total{{queue="{queue}"}}'
    try:
        traffic.start()
        _deadline_poll(lambda: prom.value(up) == 1 and prom.query(series), 40, "before")
        broker.stop()
        _deadline_poll(lambda: prom.value(up) == 0, 30, "qpidd_up 0 while qpidd is down")
        # the stale objects leave the exposition (--stale-after 2)
        _deadline_poll(lambda: f'queue="{queue}"' not in exporter.metrics(), 30,
                       "the old series leave")
        again = Qpidd.start(qmf1=False, port=broker.port, directory=broker.directory)
        broker.pid = again.pid
        back = time.time()
        _deadline_poll(lambda: prom.value(up) == 1, 40, "qpidd_up 1 again")

        def fresh() -> bool:
            result = prom.query(f"timestamp({series})")
            return bool(result) and float(result[0]["value"][1]) > back

        _deadline_poll(fresh, 40, "the queue's series back")
        # one series per object, in Prometheus and in the exposition
        selector = f'{{broker="{broker.address}", __name__=~"qpidd_queue_messages.*"}}'
        assert prom.query(f"count by (__name__, broker, vhost, queue, reason) ({selector}) > 1"
                          ) == []
        text = exporter.metrics()
        samples = [line.rsplit(" ", 1)[0] for line in text.splitlines()
                   if line and not line.startswith("#")]
        assert len(samples) == len(set(samples))
        assert prom.value(f'up{{instance="{exporter.target}"}}') == 1
    finally:
        try:
            traffic.stop()
        finally:
            prom.stop()
            err = exporter.stop()
    assert "Traceback" not in err, err
    assert os.path.exists(tmp_path / "prom" / "data")
