"""``qmf queue-stats`` beside the classic ``qpid-queue-stats`` on a genuine qpidd, with
steady traffic driven by a plain AMQP 1.0 client (``tests/amqp10_client.py``), on a stock qpidd
(QMF v1 off) and on one with v1 on.

Both run with the same ``-a ADDRESS -f LIST`` (``qmf queue-stats -i 1 --count K
--json``; qpid-queue-stats runs until killed, its lines are read with a deadline).  The
filter uses what qpid-queue-stats does with it (each comma-separated item a regular
expression matched at the start of the name): ``P-in`` also keeps ``P-in-idle``,
``P-o.t`` keeps ``P-out``, and ``P-xin`` is kept by neither.

Compared: the same queue names (with one exception, below), and rates within what the
traffic can produce at any timing.  A sender puts messages on ``P-in`` and a receiver
takes them from ``P-out``, each waiting ``1/rate`` seconds after every message, so no
window of T seconds holds more than ``rate * T + 1`` of them; every row of both tools
must stay under that bound, show no traffic in the other direction, and the rows'
average must reach half the rate the clients achieved.

The exception: qpid-queue-stats prints a queue only when the broker publishes new
statistics for it, so an idle queue (``P-in-idle``) never appears; ``qmf queue-stats``
reads every matching queue each interval and shows it with rates 0.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import threading
import time
import uuid
from typing import Any

import pytest

from .amqp10_client import BlockingClient
from .conftest import CLASSIC_TOOLS_RUN, ClassicTools
from .qpidd import ROOT, Qpidd
from .test_parity_qpidd import BROKERS, poll, running

pytestmark = pytest.mark.qpidd

IN_RATE = 20.0  # msg/s put on P-in (and on P-xin)
OUT_RATE = 10.0  # msg/s taken from P-out
PREFILL = 400  # messages on P-out at the start (more than the run takes)
REPORTS = 4


class Traffic:
    """Steady traffic in a background thread: ``send`` to a queue or ``take`` from it,
    at most ``rate`` messages a second (a pause of 1/rate after each)."""

    def __init__(self, broker: Qpidd, queue: str, rate: float, take: bool) -> None:
        self.broker, self.queue, self.rate, self.take = broker, queue, rate, take
        self.done = 0
        self.started = self.last = 0.0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            conn = BlockingClient(self.broker.url, timeout=15)
            try:
                if self.take:
                    link: Any = conn.create_receiver(self.queue, credit=1)
                else:
                    link = conn.create_sender(self.queue, create=True)
                self.started = time.monotonic()
                while not self._stop.is_set():
                    if self.take:
                        link.receive(timeout=10)
                        link.accept()
                    else:
                        link.send("x")
                    self.done += 1
                    self.last = time.monotonic()
                    self._stop.wait(1.0 / self.rate)
            finally:
                conn.close()
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def achieved(self) -> float:
        """Messages a second over the run so far."""
        return self.done / (self.last - self.started) if self.last > self.started else 0.0

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(20)
        assert not self._thread.is_alive(), f"traffic on {self.queue} did not stop"
        assert self.error is None, f"traffic on {self.queue}: {self.error!r}"


def fill(broker: Qpidd, queue: str, count: int) -> None:
    with BlockingClient(broker.url, timeout=15) as conn:
        sender = conn.create_sender(queue, create=True)
        for _ in range(count):
            sender.send("y")


def classic_rows(lines: list[str]) -> list[tuple[str, float, int, float, float]]:
    """qpid-queue-stats rows (name, sec, depth, enq rate, deq rate) after its header."""
    rows = []
    for line in lines:
        cells = line.split()
        if len(cells) != 5 or cells[0] == "Queue" or line.startswith("="):
            continue
        rows.append((cells[0], float(cells[1]), int(cells[2]), float(cells[3]),
                     float(cells[4])))
    return rows


def test_quiet_queue_has_zero_rates() -> None:
    """A queue the agent has not sampled again (same time stamp and counters) is quiet:
    rates 0 over the tool's own time between reads; a changed or re-created one not."""
    from qmf_async.tools.cli import queue_stats

    class Q:
        def get(self, name: str, default: Any = None) -> Any:
            return {"name": "q", "msgDepth": 3}.get(name, default)

        def get_agent(self) -> None:
            return None

        def get_object_id(self) -> str:
            return "0-1-1-0-5"

    s = queue_stats.Sample
    q: Any = Q()
    row = queue_stats.rate_row(q, s(5, 7, 10, 4, 1_000_000_000), s(5, 7, 10, 4, 2_500_000_000))
    assert (row["interval"], row["enqueues"], row["enqueue_rate"], row["dequeue_rate"]) == (
        1.5, 0, 0.0, 0.0)
    for before in (s(5, 6, 10, 4, 1), s(5, 7, 9, 4, 1), s(6, 7, 10, 4, 1)):
        assert queue_stats.rate_row(q, before, s(5, 7, 10, 4, 2))["enqueue_rate"] is None


def test_filter_items_are_trimmed_regexes() -> None:
    """``-f``: items are regular expressions matched at the start of the name, as in
    qpid-queue-stats; unlike it, empty items and the spaces around items are dropped."""
    from qmf_async.tools.cli import queue_stats

    patterns = queue_stats.compile_filter("audit, inv.ices,")
    assert [p.pattern for p in patterns] == ["audit", "inv.ices"]
    kept = [n for n in ("audit", "audit-2", "invoices", "x-audit", "orders")
            if any(p.match(n) for p in patterns)]
    assert kept == ["audit", "audit-2", "invoices"]


@pytest.mark.slow
@pytest.mark.parametrize("which", BROKERS)
def test_queue_stats_match_qpid_queue_stats(which: str, request: pytest.FixtureRequest,
                                            classic_tools: ClassicTools) -> None:
    broker: Qpidd = request.getfixturevalue(which)
    p = f"pqs-{uuid.uuid4().hex[:8]}"
    q_in, q_out, q_idle, q_other = f"{p}-in", f"{p}-out", f"{p}-in-idle", f"{p}-xin"
    filter_arg = f"{p}-in,{p}-o.t"
    fill(broker, q_out, PREFILL)
    fill(broker, q_idle, 3)
    traffic = [Traffic(broker, q_in, IN_RATE, take=False),
               Traffic(broker, q_other, IN_RATE, take=False),
               Traffic(broker, q_out, OUT_RATE, take=True)]
    try:
        poll(lambda: all(t.done >= 2 or t.error for t in traffic), 20, "traffic flowing")
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        ours_argv = [sys.executable, "-m", "qmf_async", "queue-stats", "-a", broker.address,
                     "-f", filter_arg, "-i", "1", "--count", str(REPORTS), "--json"]
        classic_argv = ["bash", str(CLASSIC_TOOLS_RUN), "qpid-queue-stats", "-a",
                        broker.address, "-f", filter_arg]
        with running(classic_argv) as classic, running(ours_argv, env) as ours:
            poll(lambda: ours.proc.poll() is not None, 30 + REPORTS,
                 f"qmf queue-stats ending after {REPORTS} reports")
            assert ours.proc.returncode == 0, "".join(ours.err)

            def classic_has_rows() -> bool:
                names = [r[0] for r in classic_rows(classic.out)]
                return names.count(q_in) >= 2 and names.count(q_out) >= 2
            poll(lambda: classic_has_rows() or classic.proc.poll() is not None, 30,
                 "qpid-queue-stats printing two rows for each busy queue")
            assert classic.proc.poll() is None, "".join(classic.err)
            ours.stop()
            reports = [json.loads(line) for line in ours.out]
            theirs = classic_rows(list(classic.out))
    finally:
        for t in traffic:
            t.stop()
    rates = {t.queue: t.achieved() for t in traffic}

    # the same names: the filter's regular expressions, anchored at the start
    assert [r["report"] for r in reports] == list(range(1, REPORTS + 1))
    for report in reports:
        assert sorted(row["queue"] for row in report["queues"]) == sorted(
            [q_in, q_out, q_idle])
    assert {r[0] for r in theirs} == {q_in, q_out}  # the idle queue: never published

    # every row within what the traffic can produce in its window
    def check(queue: str, seconds: float, moved: float, other: float, rate: float,
              slack: float) -> None:
        assert seconds > 0, (queue, seconds)
        assert 0 <= moved <= rate * seconds + 1 + slack, (queue, seconds, moved)
        assert other == 0, (queue, other)

    ours_rows = [row for report in reports for row in report["queues"]]
    for row in ours_rows:
        if row["queue"] == q_idle:  # rates 0, depth unchanged
            assert (row["enqueue_rate"], row["dequeue_rate"], row["depth"]) == (0.0, 0.0, 3)
            continue
        assert row["enqueue_rate"] is not None, row
        take = row["queue"] == q_out
        check(row["queue"], row["interval"], row["dequeues" if take else "enqueues"],
              row["enqueues" if take else "dequeues"], OUT_RATE if take else IN_RATE, 0)
        assert row["enqueue_rate"] == pytest.approx(row["enqueues"] / row["interval"])
    for name, sec, _depth, enq, deq in theirs:
        take = name == q_out
        # printed with 2 decimals: rate * sec is within 0.05 of the count
        check(name, sec, (deq if take else enq) * sec, enq if take else deq,
              OUT_RATE if take else IN_RATE, 0.05)

    # both saw the traffic: the rows' average reaches half the achieved rate
    for queue, column, key in ((q_in, 3, "enqueue_rate"), (q_out, 4, "dequeue_rate")):
        mine = [row[key] for row in ours_rows if row["queue"] == queue]
        classic_rates = [r[column] for r in theirs if r[0] == queue]
        assert sum(mine) / len(mine) >= rates[queue] / 2, (queue, mine, rates[queue])
        assert sum(classic_rates) / len(classic_rates) >= rates[queue] / 2, (
            queue, classic_rates, rates[queue])

    # depths: ours moves by exactly the counted enqueues and dequeues between reports
    for queue in (q_in, q_out):
        series = [row for row in ours_rows if row["queue"] == queue]
        for before, after in itertools.pairwise(series):
            assert after["depth"] - before["depth"] == after["enqueues"] - after["dequeues"]
        depths = [r[2] for r in theirs if r[0] == queue]
        assert depths == (sorted(depths, reverse=True) if queue == q_out else sorted(depths))
