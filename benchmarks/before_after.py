"""Before and after in one session: the benchmarks of docs/benchmarks.md that touch the
console (Session, classic layer, exporter, tools) or the agent, run on two checkouts
alternately, their headline figures side by side in a markdown table.

    python benchmarks/before_after.py --before DIR [--after DIR] [--rounds 2]
        [--set default|all] [--only NAME,...] [--skip NAME,...] [--tiny] [--list]
        [--before-script auto|own|after] [--rabbitmq-url URL] [--proton-path DIR]
        [--out FILE.md] [--json FILE] [--logs DIR] [--no-compile]

``--after`` defaults to the checkout holding this script.  Make the "before" checkout
with ``git worktree add --detach DIR COMMIT`` (and ``ln -s /work/main/.venv DIR/.venv``
if you run its scripts by hand).

How it runs:

- Each benchmark runs ``--rounds`` times on each side, the sides alternating
  (before, after; then after, before; ...), one after the other, each a process of
  its own with ``PYTHONPATH`` set to its tree.  A benchmark that compares trees by
  itself (``--baseline DIR``: ``v2_updates``, ``default_path``) runs once, with
  ``--rounds`` of its own, from the after tree.
- Figures are CPU time where the benchmark measures it (``time.process_time``,
  ``getrusage``, ``/proc``): what a busy machine disturbs least.  Wall-clock figures
  are marked "(wall)".  The table gives the median over the rounds of each side, the
  ratio after/before, the change read the figure's way (lower or higher is better)
  and whether the two sides' ranges are apart or overlap.
- The before side runs its own tree's script when it has it with every option used;
  otherwise, or when the catalogue says the after tree's script reports a figure the
  before tree's does not, the after tree's script file runs against the before tree's
  package (from a temporary copy of the before tree's ``benchmarks/`` with that one
  file replaced, its other files linked).  When that fails and the before tree has a
  script of its own, the rest of that benchmark uses the before tree's own.  The output
  says which script each side ran.
- RabbitMQ: a private node started with the after tree's ``scripts/rabbitmq.sh
  --node`` and stopped at the end, unless ``--rabbitmq-url`` names one.  qpidd: each
  benchmark starts its own (the shared build, ``../shared/qpidd``), as it does alone.
- Both trees are byte-compiled first and the runs may write bytecode
  (``PYTHONDONTWRITEBYTECODE`` is removed from their environment), so a start-up
  measures imports as a user's install does, not the compiler.
- ``QMF_AMQP10`` is removed from the runs' environment; a "before, proton" side sets
  ``QMF_AMQP10=proton`` (the before tree's python-qpid-proton transport; add
  ``--proton-path`` when proton is not importable from the interpreter).

``--tiny`` runs every selected benchmark at smoke sizes, one round: a check that the
driver and the benchmarks work end to end, not figures.  ``--list`` prints the
catalogue (name, sizes, what each measures).  Exit status: 0 when every run gave its
figures, 1 otherwise (the table still shows what was measured).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

# --------------------------------------------------------------------------- values


@dataclass(frozen=True)
class Measure:
    """One figure of one run."""

    label: str
    value: float
    unit: str
    lower_is_better: bool = True


@dataclass(frozen=True)
class Side:
    """A column of the comparison: a tree, and what its runs get in their environment."""

    label: str
    tree: str  # "before" or "after"
    env: tuple[tuple[str, str], ...] = ()
    proton: bool = False


BEFORE = Side("before", "before")
AFTER = Side("after", "after")
BEFORE_PROTON = Side("before, proton", "before", (("QMF_AMQP10", "proton"),), proton=True)


@dataclass
class Run:
    """One process run and what came out of it."""

    bench: str
    side: str
    round: int
    script: str  # which script ran: "own", "after's", "after's (--baseline)"
    command: list[str]
    returncode: int | None  # None: killed after its timeout
    stdout: str
    stderr: str
    json_doc: Any
    cpu_s: float  # the process and the children it waited for (getrusage)
    wall_s: float
    load_start: tuple[float, float, float]
    measures: list[Measure] = field(default_factory=list)
    error: str = ""
    retried: bool = False  # failed with the after tree's script; rerun with the own one

    def last_json(self) -> dict[str, Any]:
        """The last stdout line that is a JSON object.

        Raises:
            ValueError: there is none.
        """
        for line in reversed(self.stdout.splitlines()):
            line = line.strip()
            if line.startswith("{"):
                try:
                    doc = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(doc, dict):
                    return doc
        raise ValueError("no JSON line on stdout")

    def whole_json(self) -> dict[str, Any]:
        """stdout as one JSON document (the exporter prints one, indented).

        Raises:
            ValueError: it is not one.
        """
        start = self.stdout.find("{")
        if start < 0:
            raise ValueError("no JSON document on stdout")
        doc = json.loads(self.stdout[start:])
        if not isinstance(doc, dict):
            raise ValueError("stdout is not a JSON object")
        return doc

    def file_json(self) -> dict[str, Any]:
        """The document the benchmark wrote to its ``--json`` file.

        Raises:
            ValueError: it wrote none.
        """
        if not isinstance(self.json_doc, dict):
            raise ValueError("no JSON file written")
        return self.json_doc


Parse = Callable[[Run], list[Measure]]
#: units of sizes: a change is "larger" or "smaller", not "slower" or "faster"
SIZE_UNITS = frozenset({"B/object", "B/queue", "MiB", "MB"})
#: a benchmark that compares the trees itself: per side label, per round inside it,
#: the measures
PairedParse = Callable[[Run], dict[str, list[list[Measure]]]]


@dataclass(frozen=True)
class Bench:
    """One entry of the catalogue."""

    name: str
    what: str  # what it measures and where docs/benchmarks.md shows it
    script: str  # relative to a tree
    args: tuple[str, ...]
    tiny: tuple[str, ...]
    parse: Parse | None = None
    paired: PairedParse | None = None  # set: one run from the after tree, --baseline
    sides: tuple[Side, ...] = (BEFORE, AFTER)
    rabbitmq: bool = False
    json_option: str | None = None  # an option taking a file the benchmark writes JSON to
    before_script: str = "auto"  # "after": its after version reports what the before's lacks
    default: bool = True  # in --set default
    timeout: float = 600.0
    ok_returncodes: tuple[int, ...] = (0,)
    #: seconds of one run at the real size (of one round inside, for a paired one), as
    #: measured on the 2-core development machine at load 2 to 4 (for --list)
    estimate_s: float = 30.0


# --------------------------------------------------------------------------- parsers


def _dig(doc: Any, *keys: str) -> Any:
    for k in keys:
        doc = doc[k]
    return doc


def _regex(run: Run, pattern: str) -> float:
    found = re.search(pattern, run.stdout)
    if not found:
        raise ValueError(f"no match for {pattern!r} in its output")
    return float(found.group(1).replace(",", ""))


def parse_echo(run: Run) -> list[Measure]:
    d = run.last_json()
    out = []
    for n, label in ((1, "1 in flight"), (1000, "1,000 in flight")):
        e = d[f"inflight_{n}"]
        out += [
            Measure(f"Session CPU per call, {label}",
                    e["ours"]["cpu_us_per_call_median"]["client"], "µs"),
            Measure(f"Agent CPU per call (Session calling), {label}",
                    e["ours"]["cpu_us_per_call_median"]["responder"], "µs"),
            Measure(f"Agent CPU per call (raw QMF client calling), {label}",
                    e["agent"]["cpu_us_per_call_median"]["responder"], "µs"),
            Measure(f"Session calls/s vs raw aiormq, {label} (wall)",
                    e["ours"]["ratio_to_raw_median"], "ratio", lower_is_better=False),
        ]
    return out


def parse_get_objects(run: Run) -> list[Measure]:
    d = run.last_json()
    cpu = d["cpu_seconds_best_run"]
    return [
        Measure("Session CPU, Agent → Session.get_objects", 1e3 * cpu["ours"]["client"], "ms"),
        Measure("Agent CPU answering it", 1e3 * cpu["ours"]["responder"], "ms"),
        Measure("Session CPU, raw replay → Session.get_objects",
                1e3 * cpu["session_share"]["client"], "ms"),
        Measure("Agent CPU, Agent → raw consumer", 1e3 * cpu["agent_share"]["responder"], "ms"),
        Measure("Agent → Session.get_objects, median (wall)",
                1e3 * d["seconds"]["ours"]["median"], "ms"),
    ]


def parse_memory(run: Run) -> list[Measure]:
    d = run.last_json()
    n = d["objects"]

    def per_object(part: dict[str, Any]) -> float:
        us = part.get("build_us_per_object")
        return float(us) if us is not None else part["build_seconds"] * 1e6 / n

    return [
        Measure("decode + build a QmfObject, CPU", per_object(d["ours"]), "µs/object"),
        Measure("the same and every value read once, CPU", per_object(d["ours_after_reading"]),
                "µs/object"),
        Measure("memory held per QmfObject", d["ours"]["total_bytes_per_object"], "B/object"),
    ]


def parse_agent_g(run: Run) -> list[Measure]:
    return [Measure("agent CPU answering a G", _regex(run, r"= ([\d.]+) us/object"),
                    "µs/object")]


def parse_agent_calls(run: Run) -> list[Measure]:
    return [Measure("agent CPU per M (dispatch to queued answer)",
                    _regex(run, r"([\d.]+) us CPU/call"), "µs/call")]


def parse_v2_convert(run: Run) -> list[Measure]:
    return [Measure("v2 object → v1 record (V2Link.record), CPU",
                    _regex(run, r"([\d,]+) objects/s"), "objects/s", lower_is_better=False)]


def parse_collector(run: Run) -> list[Measure]:
    d = run.last_json()["results"]
    return [Measure(f"collector rows/s of CPU, `{fam}` updates", d[fam]["collect_cpu"],
                    "rows/s", lower_is_better=False) for fam in ("i", "c") if fam in d]


def parse_load_calls(run: Run) -> list[Measure]:
    d = run.last_json()
    if d.get("lost") or d.get("misrouted"):
        raise ValueError(f"{d.get('lost')} calls lost, {d.get('misrouted')} misrouted")
    out = []
    if d.get("cpu_s") is not None:
        out.append(Measure("console + agent CPU per call (one process, 10,000 in flight)",
                           1e6 * d["cpu_s"] / d["calls"], "µs"))
    out.append(Measure("calls/s (wall)", d["calls_per_s"], "calls/s", lower_is_better=False))
    return out


def parse_load_storm(run: Run) -> list[Measure]:
    d = run.last_json()
    cpu = d["cpu_s"]
    return [
        Measure("console CPU per event read", 1e6 * cpu["console"] / max(1, d["read"]), "µs"),
        Measure("agents' CPU per event published", 1e6 * cpu["agents"] / max(1, d["published"]),
                "µs"),
        Measure("events read/s (wall)", d["received_per_s"], "events/s", lower_is_better=False),
    ]


def parse_load_agents(run: Run) -> list[Measure]:
    d = run.last_json()
    if d.get("wrong"):
        raise ValueError(f"agents with wrong objects: {d['wrong'][:5]}")
    return [Measure("get_objects of every agent's objects (wall)", d["seconds"], "s"),
            Measure("console peak RSS", d["rss_mb_peak"], "MB")]


def parse_bridge(run: Run) -> list[Measure]:
    d = run.last_json()
    return [Measure("bridge first poll (wall)", d["poll_seconds"], "s"),
            Measure("bridge steady poll (wall)", d["repoll_seconds"], "s"),
            Measure("console get_objects from the bridge (wall)", d["console_seconds"], "s")]


def parse_qpidd_compare(run: Run) -> list[Measure]:
    ours = run.last_json()["best"]["ours"]
    return [
        Measure("get_objects v1 over AMQP 1.0, client CPU (best call)",
                1e3 * ours["get_objects"]["cpu"], "ms"),
        Measure("echo, 1 in flight: client CPU per call",
                1e6 * ours["echo_1"]["cpu_per_call"], "µs"),
        Measure("echo, 1,000 in flight: client CPU per call",
                1e6 * ours["echo_window"]["cpu_per_call"], "µs"),
        Measure("echo calls/s, 1 in flight (wall)", ours["echo_1"]["rate"], "calls/s",
                lower_is_better=False),
        Measure("echo calls/s, 1,000 in flight (wall)", ours["echo_window"]["rate"],
                "calls/s", lower_is_better=False),
    ]


def parse_classic(run: Run) -> list[Measure]:
    res = run.file_json()["results"]
    out = []
    for client, label in (("classic", "qmf.console getObjects (classic layer)"),
                          ("asyncio", "Session.get_objects (asyncio)")):
        runs = res[client]
        cpu = [r["cpu"] for r in runs if r.get("cpu") is not None]
        if cpu:
            out.append(Measure(f"{label}, CPU (best call)", 1e3 * min(cpu), "ms"))
        out.append(Measure(f"{label} (wall, best call)",
                           1e3 * min(r["seconds"] for r in runs), "ms"))
    out.append(Measure("classic: reading name and msgDepth of every object (wall)",
                       1e3 * min(r["read_seconds"] for r in res["classic"]), "ms"))
    return out


def parse_stat_q(run: Run) -> list[Measure]:
    runs = run.file_json()["modes"]["stock"]["runs"]["qmf_stat"]
    return [
        Measure("qmf stat -q, whole process CPU (median)",
                1e3 * statistics.median(r["cpu"] for r in runs), "ms"),
        Measure("qmf stat -q, whole process (wall, median)",
                1e3 * statistics.median(r["seconds"] for r in runs), "ms"),
        Measure("qmf stat -q, peak RSS", max(r["max_rss_kb"] for r in runs) / 1024, "MiB"),
    ]


def parse_exporter(run: Run) -> list[Measure]:
    d = run.file_json()
    if d.get("dropped"):
        raise ValueError(f"the exporter dropped {d['dropped']} updates")
    out = []
    if d.get("cpu_us_per_update") is not None:
        out.append(Measure("exporter CPU per object update (with traffic)",
                           d["cpu_us_per_update"], "µs"))
    out += [
        Measure("scrape render CPU (qmf_exporter_scrape_cpu_seconds)",
                1e3 * d["render_cpu_s"], "ms"),
        Measure("scrape as a client sees it, median (wall)", 1e3 * d["scrape_s_median"], "ms"),
        Measure("exporter CPU without traffic", 100 * d["idle_cpu_share"], "% of a core"),
        Measure("exporter resident memory", d["rss_mib"], "MiB"),
    ]
    return out


def parse_collect_qpidd(run: Run) -> list[Measure]:
    d = run.file_json()
    if d["collector"]["dropped"]:
        raise ValueError(f"the collector dropped {d['collector']['dropped']} rows")
    written = max(1, d["collector"]["written"])
    return [Measure("qmf collect CPU per row written (whole process)",
                    1e6 * d["collector_cpu_s"] / written, "µs"),
            Measure("qmf collect peak RSS", d["collector_max_rss_mib"], "MiB")]


def parse_qpidd_v2(run: Run) -> list[Measure]:
    best = run.last_json()["best"]
    out = []
    for client, label in (("ours", "Session(qmf_version=2)"), ("ours_v1", "QMF v1 queries")):
        if client in best:
            out.append(Measure(f"get_objects, {label}: client CPU (best call)",
                               1e3 * best[client]["cpu"], "ms"))
            out.append(Measure(f"get_objects, {label}: peak RSS",
                               best[client]["max_rss_kb"] / 1024, "MiB"))
    return out


def parse_v2_filter(run: Run) -> list[Measure]:
    out = []
    for r in run.file_json()["results"]:
        got = r.get("objects", 0) + r.get("events", 0)
        if got:
            out.append(Measure(f"{r['name']}: CPU per object or event", 1e6 * r["cpu"] / got,
                               "µs"))
    return out


def parse_churn(run: Run) -> list[Measure]:
    d = run.last_json()
    return [Measure(f"RSS growth per churned queue ({d['mode']})", d["bytes_per_queue"],
                    "B/queue")]


def paired_v2_updates(run: Run) -> dict[str, list[list[Measure]]]:
    """Per side, per round inside the script: µs of CPU per update of each path."""
    sides = {"native": AFTER.label, "base native": BEFORE.label,
             "base proton": BEFORE_PROTON.label}
    names = {"raw": "transport alone", "core": "ConsoleProtocolV2",
             "session": "Session.object_updates"}
    per: dict[str, dict[int, list[Measure]]] = {}
    for r in run.file_json()["results"]:
        if r.get("objects") and r["transport"] in sides:
            per.setdefault(sides[r["transport"]], {}).setdefault(r["round"], []).append(
                Measure(f"{names.get(r['path'], r['path'])}: CPU per queue object update",
                        1e6 * r["cpu"] / r["objects"], "µs"))
    return {side: [rounds[k] for k in sorted(rounds)] for side, rounds in per.items()}


def paired_default_path(run: Run) -> dict[str, list[list[Measure]]]:
    """Per side, per round inside the script (one client process each): the client's
    CPU for its best call and the best call's wall time, of each client."""
    names = {"default": "Session()", "v2": "Session(qmf_version=2)",
             "v1": "Session(qmf_version=1)"}
    per: dict[str, dict[int, list[Measure]]] = {}
    for label, runs in run.file_json()["results"].items():
        client = label.removeprefix("base ")
        if client not in names:
            continue
        side = BEFORE.label if label.startswith("base ") else AFTER.label
        for rnd, r in enumerate(runs):
            got = per.setdefault(side, {}).setdefault(rnd, [])
            if r.get("client_cpu") is not None:
                got.append(Measure(f"get_objects of every queue, {names[client]}: "
                                   "client CPU (best call)", 1e3 * r["client_cpu"], "ms"))
            got.append(Measure(f"get_objects of every queue, {names[client]} "
                               "(wall, best call)", 1e3 * r["seconds"], "ms"))
    return {side: [rounds[k] for k in sorted(rounds)] for side, rounds in per.items()}


# --------------------------------------------------------------------------- catalogue

#: placeholders in the arguments: {rabbitmq} (AMQP URL), {rabbitmq_api} (HTTP API URL),
#: {before} (the before tree, for --baseline), {rounds} (the driver's rounds)
CATALOGUE: tuple[Bench, ...] = (
    Bench("agent_g", "agent: CPU to answer one G for 10,000 objects, in process "
          "(\"The agent composed\"; \"Round 3\")",
          "benchmarks/agent_answer.py", ("--count", "10000", "--rounds", "7"),
          ("--count", "1000", "--rounds", "2"), parse=parse_agent_g, estimate_s=1.5),
    Bench("agent_g_changed", "agent: the same with 1,000 objects changed per round",
          "benchmarks/agent_answer.py", ("--count", "10000", "--rounds", "7", "--changed",
                                         "1000"),
          ("--count", "1000", "--rounds", "2", "--changed", "100"), parse=parse_agent_g,
          estimate_s=1.5),
    Bench("agent_calls", "agent: CPU per echo M from dispatch to the queued answer, in "
          "process (\"The agent composed\")",
          "benchmarks/agent_answer.py", ("--calls", "20000", "--rounds", "7"),
          ("--calls", "1000", "--rounds", "2"), parse=parse_agent_calls, estimate_s=2.5),
    Bench("memory", "console: a QmfObject's decode + build CPU and memory "
          "(Console \"3. Memory per cached object\")",
          "benchmarks/memory.py", ("--count", "30000"), ("--count", "2000"),
          parse=parse_memory, before_script="after", estimate_s=14),
    Bench("v2_convert", "console: QMF v2 object into a v1 record (V2Link.record), CPU "
          "(\"QMF v2 objects into v1 records\")",
          "benchmarks/v2_convert.py", ("--rounds", "5", "--seconds", "1"),
          ("--rounds", "1", "--seconds", "0.2", "--objects", "500"), parse=parse_v2_convert,
          estimate_s=8),
    Bench("collector", "tools: Parquet collector rows per CPU second, fed QmfObjects "
          "through Subscriptions (\"Collector\")",
          "benchmarks/collector.py", ("--rows", "30000", "--rounds", "3", "--json"),
          ("--rows", "2000", "--rounds", "1", "--objects", "200", "--json"),
          parse=parse_collector, estimate_s=15),
    Bench("echo", "Session ↔ Agent method calls on RabbitMQ, CPU per call of each "
          "process, 1 and 1,000 in flight (Console \"1. Method calls\")",
          "benchmarks/echo.py", ("--quick", "--url", "{rabbitmq}"),
          ("--quick", "--url", "{rabbitmq}"), parse=parse_echo, rabbitmq=True, estimate_s=17),
    Bench("get_objects", "Session.get_objects of 10,000 objects from an Agent on "
          "RabbitMQ, CPU of each side (Console \"2. get_objects\")",
          "benchmarks/get_objects.py", ("--quick", "--url", "{rabbitmq}"),
          ("--quick", "--count", "500", "--url", "{rabbitmq}"), parse=parse_get_objects,
          rabbitmq=True, estimate_s=5),
    Bench("load_calls", "10,000 concurrent echo calls, console and agent in one process, "
          "RabbitMQ (\"Load\": calls)",
          "benchmarks/load.py", ("calls", "--count", "10000", "--url", "{rabbitmq}"),
          ("calls", "--count", "200", "--url", "{rabbitmq}"), parse=parse_load_calls,
          rabbitmq=True, before_script="after", estimate_s=12),
    Bench("default_path", "get_objects of 10,000 queues of a stock qpidd: Session(), "
          "qmf_version=2 and =1, client CPU (\"The default Session on a stock qpidd\"; "
          "issue 36: no slower than on proton)",
          "benchmarks/default_path.py",
          ("--queues", "10000", "--rounds", "{rounds}", "--repeat", "3", "--skip-py27",
           "--clients", "default,v2,v1", "--baseline", "{before}"),
          ("--queues", "200", "--rounds", "1", "--repeat", "1", "--skip-py27",
           "--clients", "default,v2,v1", "--baseline", "{before}"),
          paired=paired_default_path, json_option="--json", estimate_s=25),
    Bench("v2_updates", "CPU per v2 object update of a Session following every queue "
          "of a stock qpidd (2,000 queues changing every second), and of the "
          "protocol core alone; before also on proton (\"CPU per v2 object update\")",
          "benchmarks/v2_updates.py",
          ("--queues", "2000", "--rounds", "{rounds}", "--seconds", "5", "--settle", "4",
           "--transports", "native", "--paths", "core,session", "--baseline", "{before}",
           "--baseline-transports", "native,proton"),
          ("--queues", "200", "--rounds", "1", "--seconds", "1.5", "--settle", "2",
           "--transports", "native", "--paths", "core,session", "--baseline", "{before}",
           "--baseline-transports", "native,proton"),
          paired=paired_v2_updates, sides=(BEFORE, AFTER, BEFORE_PROTON),
          json_option="--json", estimate_s=50),
    Bench("qpidd_echo", "Session over AMQP 1.0 to qpidd: echo CPU per call (1 and 1,000 "
          "in flight) and a v1 get_objects of 2,000 queues (\"qpidd over AMQP 1.0\")",
          "benchmarks/qpidd_compare.py",
          ("--clients", "ours", "--queues", "2000", "--seconds", "3", "--rounds", "1",
           "--repeat", "3"),
          ("--clients", "ours", "--queues", "50", "--seconds", "0.5", "--rounds", "1",
           "--repeat", "1", "--window", "50"),
          parse=parse_qpidd_compare, json_option="--json", estimate_s=7),
    Bench("classic", "classic qmf.console getObjects of 10,000 queues on qmf-async, "
          "and the asyncio Session's, CPU (\"Classic API\")",
          "benchmarks/classic.py",
          ("--queues", "10000", "--rounds", "1", "--repeat", "3", "--skip-py27",
           "--alternate", "0"),
          ("--queues", "100", "--rounds", "1", "--repeat", "1", "--skip-py27",
           "--alternate", "0"),
          parse=parse_classic, json_option="--json", before_script="after", estimate_s=5),
    Bench("stat_q_small", "tools: `qmf stat -q` on a stock qpidd with 4 queues, whole "
          "process, 7 invocations (\"Start-up: qmf stat -q against qpid-stat -q\")",
          "benchmarks/qpidd/stat_q.py",
          ("--queues", "4", "--rounds", "7", "--modes", "stock", "--tools", "qmf_stat"),
          ("--queues", "4", "--rounds", "1", "--modes", "stock", "--tools", "qmf_stat"),
          parse=parse_stat_q, json_option="--json", estimate_s=4),
    Bench("stat_q", "tools: `qmf stat -q` on a stock qpidd with 10,000 queues, whole "
          "process (\"qmf stat -q vs qpid-stat -q on 10,000 queues\")",
          "benchmarks/qpidd/stat_q.py",
          ("--queues", "10000", "--rounds", "3", "--modes", "stock", "--tools", "qmf_stat"),
          ("--queues", "50", "--rounds", "1", "--modes", "stock", "--tools", "qmf_stat"),
          parse=parse_stat_q, json_option="--json", estimate_s=4),
    Bench("exporter", "`qmf exporter` on a stock qpidd with 2,000 queues, 2,000 msg/s: "
          "CPU per update, scrape render CPU and time; before also on proton "
          "(\"Prometheus exporter\"; issue 36: scrape no slower than on proton)",
          "benchmarks/exporter.py",
          ("--queues", "2000", "--rate", "2000", "--seconds", "8", "--scrapes", "10",
           "--no-writer-baseline"),
          ("--queues", "50", "--rate", "200", "--seconds", "3", "--scrapes", "2",
           "--no-writer-baseline"),
          parse=parse_exporter, sides=(BEFORE, AFTER, BEFORE_PROTON), json_option="--json",
          before_script="after", estimate_s=30),
    # ---- the rest: in --set all (minutes more, or covered above, or not CPU)
    Bench("load_storm", "event storm: 4 QMF v1 agents raising events as fast as "
          "RabbitMQ takes them, one console reading; CPU per event (\"Load\": storm)",
          "benchmarks/load.py", ("storm", "--seconds", "5", "--url", "{rabbitmq}"),
          ("storm", "--seconds", "1", "--agents", "2", "--url", "{rabbitmq}"),
          parse=parse_load_storm, rabbitmq=True, default=False, estimate_s=20),
    Bench("load_agents", "20 agents x 1,000 objects behind a management broker, one "
          "get_objects (wall; \"Load\": many agents)",
          "benchmarks/load.py",
          ("agents", "--agents", "20", "--objects", "1000", "--url", "{rabbitmq}"),
          ("agents", "--agents", "2", "--objects", "10", "--processes", "1",
           "--url", "{rabbitmq}"),
          parse=parse_load_agents, rabbitmq=True, default=False, estimate_s=30),
    Bench("bridge_scale", "RabbitMQ bridge: 500 real queues, first and steady poll, a "
          "console's get_objects from it (wall; \"RabbitMQ bridge\")",
          "benchmarks/bridge_scale.py",
          ("--queues", "500", "--amqp", "{rabbitmq}", "--api", "{rabbitmq_api}", "--json"),
          ("--queues", "20", "--amqp", "{rabbitmq}", "--api", "{rabbitmq_api}", "--json"),
          parse=parse_bridge, rabbitmq=True, default=False, ok_returncodes=(0, 1),
          estimate_s=20),
    Bench("collect_qpidd", "`qmf collect` on a stock qpidd with 1,000 queues and traffic, "
          "no snapshot: CPU per row (\"Telemetry at scale\")",
          "benchmarks/collect_qpidd.py",
          ("--queues", "1000", "--rate", "500", "--pub-interval", "1", "--seconds", "15",
           "--no-snapshot"),
          ("--queues", "50", "--rate", "50", "--pub-interval", "1", "--seconds", "3",
           "--no-snapshot"),
          parse=parse_collect_qpidd, json_option="--json", default=False, estimate_s=25),
    Bench("qpidd_v2", "get_objects of 10,000 queues over QMF v2 and v1 on a stock qpidd "
          "(\"QMF v2 on a stock qpidd\"; default_path runs the same queries)",
          "benchmarks/qpidd_v2.py",
          ("--queues", "10000", "--rounds", "1", "--repeat", "2", "--clients",
           "ours,ours_v1", "--decode-rounds", "1", "--decode-seconds", "0.2"),
          ("--queues", "100", "--rounds", "1", "--repeat", "1", "--clients", "ours,ours_v1",
           "--decode-rounds", "1", "--decode-seconds", "0.1"),
          parse=parse_qpidd_v2, default=False, estimate_s=25),
    Bench("v2_filter", "v2 indications, unfiltered, through the transport and the "
          "Session, CPU per object (\"QMF v2 indications\"; v2_updates measures the "
          "steady state)",
          "benchmarks/v2_filter.py",
          ("--queues", "1000", "--seconds", "4", "--only", "all"),
          ("--queues", "100", "--seconds", "1", "--only", "all"),
          parse=parse_v2_filter, json_option="--json", default=False, estimate_s=40),
    Bench("churn_session", "memory: a Session following queues of a qpidd that creates "
          "and deletes them (\"Memory under queue churn\"; not a speed)",
          "benchmarks/churn_memory.py",
          ("--queues", "1000", "--rounds", "3", "--mode", "session"),
          ("--queues", "50", "--rounds", "2", "--mode", "session", "--forget-after", "1"),
          parse=parse_churn, default=False, estimate_s=40),
    Bench("churn_exporter", "memory: the same feeding the exporter's store",
          "benchmarks/churn_memory.py",
          ("--queues", "1000", "--rounds", "3", "--mode", "exporter"),
          ("--queues", "50", "--rounds", "2", "--mode", "exporter", "--forget-after", "1"),
          parse=parse_churn, default=False, estimate_s=40),
)

#: benchmarks of docs/benchmarks.md left out, and why (printed by --list)
LEFT_OUT = (
    ("decode.py, encode.py, v2_decode.py, v2_memory.py",
     "wire/ only (codecs): no console or agent code runs"),
    ("pipeline_rates.py, spark_cluster.py", "the Spark jobs: JVM time, no console"),
    ("load.py soak, raw-storm", "soak is a leak check over minutes; raw-storm has no QMF"),
    ("qpidd_compare.py classic/raw_proton clients, qpidd_v2.py raw_v2/classic/qpid-stat",
     "baselines of other programs: the same on both trees"),
)


# --------------------------------------------------------------------------- trees


@dataclass(frozen=True)
class Tree:
    label: str
    root: Path

    def describe(self) -> str:
        def git(*args: str) -> str:
            done = subprocess.run(["git", "-C", str(self.root), *args], capture_output=True,
                                  text=True, check=False)
            return done.stdout.strip()

        head = git("log", "-1", "--format=%h %s") or "(not a git checkout)"
        dirty = git("status", "--porcelain", "--untracked-files=no")
        return f"`{self.root}` at {head[:90]}" + (" (with uncommitted changes)" if dirty else "")


class Overlay:
    """The before tree with some of the after tree's benchmark scripts: a temporary
    root whose ``benchmarks/`` is a copy of the before tree's (the scripts named
    replaced by the after tree's) and whose other entries link to the before tree."""

    def __init__(self, before: Path, after: Path, shared: Path | None) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="qmf-before-after-"))
        self.root = self.base / "before"
        self.root.mkdir()
        for entry in before.iterdir():
            if entry.name not in (".git", "benchmarks"):
                (self.root / entry.name).symlink_to(entry)
        shutil.copytree(before / "benchmarks", self.root / "benchmarks",
                        ignore=shutil.ignore_patterns("__pycache__"))
        if shared is not None:  # scripts find ../shared next to their root
            (self.base / "shared").symlink_to(shared)
        self.after = after

    def script(self, relative: str) -> Path:
        target = self.root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.after / relative, target)
        return target

    def remove(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)


def options_missing(script: Path, args: Sequence[str]) -> list[str]:
    """The options of ``args`` that the script (or benchmarks/_common.py, whose parser
    some scripts use) does not define: a text search for ``"--option"``."""
    text = script.read_text(errors="replace")
    common = script.parent / "_common.py"
    if common.exists():
        text += common.read_text(errors="replace")
    return [a for a in args if a.startswith("--") and f'"{a}"' not in text]


# --------------------------------------------------------------------------- RabbitMQ


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class RabbitNode:
    """A private RabbitMQ node for the run (``scripts/rabbitmq.sh --node``)."""

    def __init__(self, tree: Path) -> None:
        self.script = tree / "scripts" / "rabbitmq.sh"
        self.name = f"qmf-before-after-{os.getpid()}"
        self.dir = Path(tempfile.gettempdir()) / self.name
        amqp, api, dist = _free_ports(3)
        self.url = f"amqp://guest:guest@localhost:{amqp}/"
        self.api = f"http://guest:guest@localhost:{api}/"
        self.ports = (amqp, api, dist)
        self.started = False

    def env(self) -> dict[str, str]:
        return {"RABBITMQ_NODENAME": f"{self.name}@localhost",
                "RABBITMQ_ENABLED_PLUGINS_FILE": f"{self.dir}/enabled_plugins"}

    def start(self) -> None:
        """Raises:
            RuntimeError: it did not start.
        """
        amqp, api, dist = self.ports
        self.started = True  # stopped at the end even when it half started
        done = subprocess.run(
            ["bash", str(self.script), "--node", self.name, "--port", str(amqp),
             "--api-port", str(api), "--dist-port", str(dist), "--dir", str(self.dir)],
            capture_output=True, text=True, timeout=300, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"the RabbitMQ node did not start: {done.stderr.strip()[-800:]}")

    def stop(self) -> None:
        if self.started:
            subprocess.run(["bash", str(self.script), "--stop", "--node", self.name, "--dir",
                            str(self.dir)], capture_output=True, text=True, timeout=120,
                           check=False)
            self.started = False


# --------------------------------------------------------------------------- running


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_process(cmd: Sequence[str], env: dict[str, str], cwd: Path, timeout: float
                ) -> tuple[int | None, str, str, float, float]:
    """Run ``cmd`` in a session of its own: (returncode or None on timeout, stdout,
    stderr, CPU seconds of it and the children it waited for, wall seconds).  On the
    timeout its whole process group is ended (SIGTERM, then SIGKILL)."""
    c0, t0 = _children_cpu(), time.monotonic()
    proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True, env=env, cwd=cwd,
                            start_new_session=True)
    rc: int | None
    try:
        out, err = proc.communicate(timeout=timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        for sig, wait in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 15.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        out, err = proc.communicate()
        rc = None
    return rc, out, err, _children_cpu() - c0, time.monotonic() - t0


@dataclass
class Driver:
    before: Tree
    after: Tree
    rounds: int
    tiny: bool
    before_script_mode: str
    logs: Path
    python: str
    proton_path: str | None
    shared: Path | None
    bytecode: bool
    rabbit_url: str | None = None
    rabbit_api: str | None = None
    rabbit_env: dict[str, str] = field(default_factory=dict)
    overlay: Overlay | None = None
    runs: list[Run] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: per benchmark: how the before side runs ("own" or "after")
    chosen: dict[str, str] = field(default_factory=dict)
    #: per benchmark: wall seconds of its runs
    spent: dict[str, float] = field(default_factory=dict)

    # ---- environment and scripts

    def tree(self, name: str) -> Tree:
        return self.before if name == "before" else self.after

    def env(self, pythonpath: Path, side: Side) -> dict[str, str]:
        env = dict(os.environ)
        for key in ("QMF_AMQP10", "QMF_BENCH_TREE", "QMF_URL"):
            env.pop(key, None)
        if self.bytecode:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
        paths = [str(pythonpath)]
        if side.proton and self.proton_path:
            paths.append(self.proton_path)
        env["PYTHONPATH"] = os.pathsep.join(paths)
        env.update(side.env)
        if self.shared is not None:
            env.setdefault("QMF_SHARED", str(self.shared))
        env.update(self.rabbit_env)
        if self.rabbit_url:
            env["QMF_TEST_URL"] = self.rabbit_url
        if self.rabbit_api:
            env["QMF_RABBITMQ_API"] = self.rabbit_api
        return env

    def args(self, bench: Bench) -> list[str]:
        values = {"rabbitmq": self.rabbit_url or "", "rabbitmq_api": self.rabbit_api or "",
                  "before": str(self.before.root), "rounds": str(self.rounds)}
        return [a.format(**values) for a in (bench.tiny if self.tiny else bench.args)]

    def before_mode(self, bench: Bench) -> tuple[str, str]:
        """("own" or "after", why) for the before side of ``bench``."""
        if bench.name in self.chosen:
            return self.chosen[bench.name], ""
        own = self.before.root / bench.script
        if self.before_script_mode == "own" and own.exists():
            return "own", "--before-script own"
        if self.before_script_mode == "after":
            return "after", "--before-script after"
        if not own.exists():
            return "after", "the before tree has no such script"
        missing = options_missing(own, self.args(bench))
        if missing:
            return "after", f"the before tree's script lacks {', '.join(missing)}"
        if bench.before_script == "after":
            return "after", "its after version reports figures the before tree's lacks"
        return "own", ""

    def script_for(self, bench: Bench, side: Side) -> tuple[Path, Path, str]:
        """(PYTHONPATH root, script path, which script) for a side of ``bench``."""
        if side.tree == "after":
            return self.after.root, self.after.root / bench.script, "own"
        mode, why = self.before_mode(bench)
        if bench.name not in self.chosen:
            self.chosen[bench.name] = mode
            if mode == "after":
                self.notes.append(f"`{bench.name}`: the before side ran the after tree's "
                                  f"script against the before tree's package ({why}).")
        if mode == "own":
            return self.before.root, self.before.root / bench.script, "own"
        if self.overlay is None:
            self.overlay = Overlay(self.before.root, self.after.root, self.shared)
        return self.overlay.root, self.overlay.script(bench.script), "after's"

    # ---- runs

    def run_once(self, bench: Bench, side: Side, rnd: int) -> Run:
        root, script, which = self.script_for(bench, side)
        cmd = [self.python, str(script), *self.args(bench)]
        json_file: Path | None = None
        if bench.json_option:
            json_file = self.logs / f"{bench.name}.{side.label.replace(', ', '-')}.{rnd}.json"
            json_file.unlink(missing_ok=True)
            cmd += [bench.json_option, str(json_file)]
        progress(f"{bench.name}: {side.label if not bench.paired else 'both trees'}, "
                 f"round {rnd + 1} ({which} script) ...")
        load = os.getloadavg()
        rc, out, err, cpu, wall = run_process(cmd, self.env(root, side), root, bench.timeout)
        doc = None
        if json_file is not None and json_file.exists():
            try:
                doc = json.loads(json_file.read_text())
            except json.JSONDecodeError:
                doc = None
        run = Run(bench.name, side.label, rnd, which, cmd, rc, out, err, doc, cpu, wall,
                  load)
        self.spent[bench.name] = self.spent.get(bench.name, 0.0) + wall
        stem = self.logs / f"{bench.name}.{side.label.replace(', ', '-')}.{rnd}"
        stem.with_suffix(".out").write_text(out)
        stem.with_suffix(".err").write_text(err)
        if rc is None:
            run.error = f"killed after {bench.timeout:.0f} s"
        elif rc not in bench.ok_returncodes:
            tail = err.strip().splitlines()[-1:] or ["(nothing on stderr)"]
            run.error = f"exit status {rc}: {tail[0][:300]}"
        progress(f"  {wall:.1f} s wall, {cpu:.1f} s CPU" +
                 (f"; FAILED: {run.error}" if run.error else ""))
        return run

    def measure(self, bench: Bench) -> None:
        if bench.paired is not None:
            self.measure_paired(bench)
            return
        assert bench.parse is not None
        rounds = 1 if self.tiny else self.rounds
        for rnd in range(rounds):
            order = bench.sides if rnd % 2 == 0 else tuple(reversed(bench.sides))
            for side in order:
                run = self.run_once(bench, side, rnd)
                if not run.error:
                    try:
                        run.measures = bench.parse(run)
                    except (ValueError, KeyError, TypeError, IndexError,
                            ZeroDivisionError) as exc:
                        run.error = f"figures not read: {type(exc).__name__}: {exc}"
                        progress(f"  FAILED: {run.error}")
                if run.error and side.tree == "before" and run.script == "after's" and \
                        (self.before.root / bench.script).exists() and \
                        not options_missing(self.before.root / bench.script,
                                            self.args(bench)):
                    run.retried = True
                    self.runs.append(run)
                    self.chosen[bench.name] = "own"
                    self.notes.append(f"`{bench.name}`: the after tree's script failed on "
                                      f"the before tree ({run.error}); the before tree's "
                                      "own script ran from then on.")
                    run = self.run_once(bench, side, rnd)
                    if not run.error:
                        try:
                            run.measures = bench.parse(run)
                        except (ValueError, KeyError, TypeError, IndexError,
                                ZeroDivisionError) as exc:
                            run.error = f"figures not read: {type(exc).__name__}: {exc}"
                self.runs.append(run)

    def measure_paired(self, bench: Bench) -> None:
        """One run of the after tree's script, which runs both trees itself; one
        :class:`Run` per side and round inside it."""
        assert bench.paired is not None
        run = self.run_once(bench, AFTER, 0)
        run.script = "after's (--baseline)"
        per_side: dict[str, list[list[Measure]]] = {}
        if not run.error:
            try:
                per_side = bench.paired(run)
            except (ValueError, KeyError, TypeError, IndexError, ZeroDivisionError) as exc:
                run.error = f"figures not read: {type(exc).__name__}: {exc}"
        inside = 1 if self.tiny else self.rounds
        self.notes.append(f"`{bench.name}`: one run of the after tree's script with "
                          f"`--baseline {self.before.root}` ({inside} round(s) inside, the "
                          "trees interleaved by the script; the before side runs the after "
                          "tree's measuring code on the before tree's package).")
        for side in bench.sides:
            rounds = per_side.get(side.label) or [[]]
            for rnd, measures in enumerate(rounds):
                error = run.error or ("" if measures else "no figures for this side")
                self.runs.append(Run(bench.name, side.label, rnd, run.script, run.command,
                                     run.returncode, "", "", None, run.cpu_s, run.wall_s,
                                     run.load_start, measures, error))


def progress(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- report


def _fmt(v: float) -> str:
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def _values(runs: list[Run], bench: str, side: str, label: str) -> list[float]:
    return [m.value for r in runs if r.bench == bench and r.side == side
            for m in r.measures if m.label == label]


def _change(before: float, after: float, m: Measure) -> str:
    """The change read the figure's way: "2.1% slower", "0.8% faster", "3.0% larger"."""
    ratio = after / before
    worse = ratio > 1 if m.lower_is_better else ratio < 1
    pct = abs(ratio - 1) * 100
    if pct < 0.05:
        return "same"
    if m.unit in SIZE_UNITS:
        return f"{pct:.1f}% {'larger' if worse else 'smaller'}"
    return f"{pct:.1f}% {'slower' if worse else 'faster'}"


def _ranges(before: list[float], after: list[float], m: Measure) -> str:
    """Whether the two sides' runs are apart (every run of one above every run of the
    other) or overlap."""
    if len(before) < 2 or len(after) < 2:
        return "one run each"
    if min(after) > max(before) or max(after) < min(before):
        worse = (min(after) > max(before)) == m.lower_is_better
        return "apart: " + ("worse" if worse else "better")
    return "overlap"


def report(driver: Driver, benches: Sequence[Bench], started: float,
           load_start: tuple[float, float, float], load_end: tuple[float, float, float]
           ) -> str:
    runs = driver.runs
    how = ("--tiny (smoke sizes, 1 round: a check, not figures)" if driver.tiny
           else f"{driver.rounds} rounds")
    lines = [
        f"### Before and after ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))})",
        "",
        f"- before: {driver.before.describe()}",
        f"- after: {driver.after.describe()}",
        f"- {how} per benchmark, the sides alternating (A B, B A, ...); {os.cpu_count()} CPUs; "
        f"whole run {(time.time() - started) / 60:.1f} min",
        "- load average (1, 5, 15 min): at the start "
        + " / ".join(f"{x:.2f}" for x in load_start) + ", at the end "
        + " / ".join(f"{x:.2f}" for x in load_end),
        "- medians over the rounds; \"ranges\": whether the two sides' runs overlap",
        "",
        "| benchmark | figure | unit | before | after | after/before | change | ranges |",
        "|---|---|---|---:|---:|---:|---|---|",
    ]
    failed = [r for r in runs if r.error]
    for bench in benches:
        labels: list[Measure] = []
        seen: set[str] = set()
        for r in runs:
            if r.bench == bench.name:
                for m in r.measures:
                    if m.label not in seen:
                        seen.add(m.label)
                        labels.append(m)
        if not labels:
            lines.append(f"| {bench.name} | (no figures: see the failures below) | | | | | | |")
            continue
        for m in labels:
            for base in (s for s in bench.sides if s.tree == "before"):
                b = _values(runs, bench.name, base.label, m.label)
                a = _values(runs, bench.name, AFTER.label, m.label)
                if not b and not a:
                    continue
                bm = statistics.median(b) if b else None
                am = statistics.median(a) if a else None
                ratio = f"{am / bm:.3f}" if bm and am is not None else "--"
                change = _change(bm, am, m) if bm and am is not None else "--"
                name = bench.name if base is BEFORE else f"{bench.name} (vs {base.label})"
                better = "" if m.lower_is_better else " (higher is better)"
                lines.append(
                    f"| {name} | {m.label}{better} | {m.unit} | "
                    f"{_fmt(bm) if bm is not None else '--'} | "
                    f"{_fmt(am) if am is not None else '--'} | {ratio} | {change} | "
                    f"{_ranges(b, a, m)} |")
    lines += ["", "Time per benchmark (wall, all its runs): " + ", ".join(
        f"{b.name} {_fmt(driver.spent.get(b.name, 0.0))} s" for b in benches) + "."]
    if driver.notes:
        lines += ["", "Notes:", ""] + [f"- {n}" for n in driver.notes]
    if failed:
        lines += ["", "Failures:", ""] + [
            f"- `{r.bench}`, {r.side}, round {r.round + 1} ({r.script} script): {r.error}"
            + (" (rerun with the before tree's own script)" if r.retried else "")
            for r in failed]
    lines += ["", f"Each run's output: `{driver.logs}`."]
    return "\n".join(lines)


# --------------------------------------------------------------------------- main


def select(opts: argparse.Namespace) -> list[Bench]:
    """The benchmarks chosen on the command line, in catalogue order.

    Raises:
        SystemExit: an unknown name.
    """
    names = {b.name for b in CATALOGUE}
    only = [n for n in opts.only.split(",") if n] if opts.only else []
    skip = [n for n in opts.skip.split(",") if n] if opts.skip else []
    unknown = [n for n in only + skip if n not in names]
    if unknown:
        raise SystemExit(f"before_after: unknown benchmark(s): {', '.join(unknown)} "
                         f"(--list shows them)")
    chosen = [b for b in CATALOGUE
              if (b.name in only if only else (b.default or opts.set == "all"))
              and b.name not in skip]
    return chosen


def print_list(rounds: int) -> None:
    total = 0.0
    print("| name | in --set default | what | arguments | est. s per run |")
    print("|---|---|---|---|---:|")
    for b in CATALOGUE:
        print(f"| {b.name} | {'yes' if b.default else 'no'} | {b.what} | "
              f"`{b.script} {' '.join(b.args)}` | {b.estimate_s:.0f} |")
        if b.default:
            total += (5 + b.estimate_s * rounds if b.paired
                      else b.estimate_s * len(b.sides) * rounds)
    print(f"\n--set default at --rounds {rounds}: about {total / 60:.0f} min (plus about "
          "30 s: the RabbitMQ node's start and the byte-compilation).")
    print("\nLeft out:")
    for what, why in LEFT_OUT:
        print(f"- {what}: {why}")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--before", type=Path, help="the checkout before (e.g. of ffb886a)")
    p.add_argument("--after", type=Path, default=ROOT,
                   help="the checkout after (default: the one holding this script)")
    p.add_argument("--rounds", type=int, default=2, help="runs per side of each benchmark")
    p.add_argument("--set", choices=("default", "all"), default="default")
    p.add_argument("--only", default="", help="comma-separated names (see --list)")
    p.add_argument("--skip", default="", help="comma-separated names to leave out")
    p.add_argument("--tiny", action="store_true", help="smoke sizes, one round")
    p.add_argument("--list", action="store_true", help="print the catalogue and exit")
    p.add_argument("--before-script", choices=("auto", "own", "after"), default="auto",
                   help="which script the before side runs (see the module docstring)")
    p.add_argument("--rabbitmq-url", default=None,
                   help="an AMQP 0-9-1 URL of a RabbitMQ to use (default: a private node "
                        "for the run); --rabbitmq-api names its management API")
    p.add_argument("--rabbitmq-api", default="http://guest:guest@localhost:15672/")
    p.add_argument("--proton-path", default=None,
                   help="a folder holding python-qpid-proton, for the proton side when the "
                        "interpreter cannot import it")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--no-compile", dest="compile", action="store_false",
                   help="neither byte-compile the trees nor let the runs write bytecode")
    p.add_argument("--logs", type=Path, default=None, help="each run's output (default: a "
                   "new temporary folder)")
    p.add_argument("--out", type=Path, help="also write the markdown report here")
    p.add_argument("--json", type=Path, help="also write every run's figures here")
    opts = p.parse_args(argv)
    if opts.list:
        print_list(opts.rounds)
        return 0
    if opts.before is None:
        p.error("--before is required")
    benches = select(opts)
    before = Tree("before", opts.before.resolve())
    after = Tree("after", opts.after.resolve())
    for t in (before, after):
        if not (t.root / "qmf_async").is_dir():
            p.error(f"{t.root} has no qmf_async package")
    shared_dir = Path(os.environ.get("QMF_SHARED", after.root.parent / "shared"))
    logs = opts.logs or Path(tempfile.mkdtemp(prefix="qmf-before-after-logs-"))
    logs.mkdir(parents=True, exist_ok=True)
    driver = Driver(before, after, max(1, opts.rounds), opts.tiny, opts.before_script, logs,
                    opts.python, opts.proton_path,
                    shared_dir if shared_dir.is_dir() else None, opts.compile)
    started, load_start = time.time(), os.getloadavg()
    progress(f"{len(benches)} benchmarks: {', '.join(b.name for b in benches)}; logs in {logs}")
    node: RabbitNode | None = None
    try:
        if opts.compile:
            for t in (before, after):
                dirs = [str(t.root / d) for d in ("qmf_async", "qmf", "qpidtoollibs",
                                                  "benchmarks", "tests")
                        if (t.root / d).is_dir()]
                subprocess.run([opts.python, "-m", "compileall", "-q", "-j", "0", *dirs],
                               stdout=subprocess.DEVNULL, check=False)
        if opts.rabbitmq_url:
            driver.rabbit_url, driver.rabbit_api = opts.rabbitmq_url, opts.rabbitmq_api
        last_rabbit = max((i for i, b in enumerate(benches) if b.rabbitmq), default=-1)
        for i, bench in enumerate(benches):
            if bench.rabbitmq and driver.rabbit_url is None:
                # a private node, up only while the benchmarks that need it run
                node = RabbitNode(after.root)
                progress(f"starting a private RabbitMQ node {node.name} ...")
                node.start()
                driver.rabbit_url, driver.rabbit_api = node.url, node.api
                driver.rabbit_env = node.env()
            driver.measure(bench)
            if node is not None and node.started and i == last_rabbit:
                progress("stopping the RabbitMQ node ...")
                node.stop()
    except KeyboardInterrupt:
        driver.notes.append("interrupted (Ctrl-C): the table has what was measured.")
    finally:
        if node is not None and node.started:
            progress("stopping the RabbitMQ node ...")
            node.stop()
        if driver.overlay is not None:
            driver.overlay.remove()
    text = report(driver, benches, started, load_start, os.getloadavg())
    print(text)
    if opts.out:
        opts.out.write_text(text + "\n")
    if opts.json:
        opts.json.write_text(json.dumps([
            {"bench": r.bench, "side": r.side, "round": r.round, "script": r.script,
             "command": r.command, "returncode": r.returncode, "cpu_s": r.cpu_s,
             "wall_s": r.wall_s, "load_start": r.load_start, "error": r.error,
             "measures": [m.__dict__ for m in r.measures]} for r in driver.runs], indent=1))
    return 1 if any(r.error and not r.retried for r in driver.runs) else 0


if __name__ == "__main__":
    sys.exit(main())
