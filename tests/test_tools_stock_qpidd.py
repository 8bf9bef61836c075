"""The user-facing programs against a stock qpidd (QMF v2 only, as shipped), given
nothing but its address: ``qmf stat``, ``qmf shell``, ``qmf collect`` and the web
dashboard, each run as a user runs it (a subprocess)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from qmf_async import Session
from qmf_async.names import is_console_queue

from ._util import wait_until
from .qpidd import send_messages

pytestmark = [pytest.mark.qpidd]

ROOT = Path(__file__).resolve().parents[1]


def _qmf(*args: str, stdin: str | None = None,
         timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "qmf_async", *args], input=stdin,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "QMF_URL": ""})


async def _make_queue(url: str, name: str) -> None:
    async with Session.connect(url) as session:
        (broker,) = await session.get_objects(_class="broker")
        assert (await broker.create("queue", name, {}, False)).status == 0


async def _drop_queue(url: str, name: str) -> None:
    async with Session.connect(url) as session:
        (broker,) = await session.get_objects(_class="broker")
        await broker.delete("queue", name, {})


@pytest.fixture
async def queue(qpidd_stock: Any) -> Any:
    name = f"tools-{uuid.uuid4().hex[:8]}"
    await _make_queue(qpidd_stock.url, name)
    await asyncio.to_thread(send_messages, qpidd_stock.address, name, 7)
    yield name
    await _drop_queue(qpidd_stock.url, name)


@pytest.mark.parametrize("version", [[], ["--qmf-version", "2"], ["--qmf-version", "1"]],
                         ids=["default", "v2", "v1"])
async def test_qmf_stat_lists_the_queue_with_its_depth(qpidd_stock: Any, queue: str,
                                                       version: list[str]) -> None:
    proc = await asyncio.to_thread(_qmf, "stat", "-b", qpidd_stock.address, "-q", "--json",
                                   "-L", "0", *version)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    (row,) = [r for r in rows if r["queue"] == queue]
    assert (row["msg"], row["msgIn"], row["msgOut"], row["dur"]) == (7, 7, 0, False), row


async def test_qmf_shell_lists_and_calls(qpidd_stock: Any, queue: str) -> None:
    proc = await asyncio.to_thread(_qmf, "shell", qpidd_stock.address,
                                   stdin="list\nlist queue\nquit\n")
    assert proc.returncode == 0, proc.stderr
    assert "org.apache.qpid.broker:queue" in proc.stdout
    assert queue in proc.stdout


async def test_qmf_collect_writes_samples_and_events(qpidd_stock: Any, tmp_path: Path) -> None:
    name = f"coll-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "dataset"
    proc = await asyncio.to_thread(
        subprocess.Popen, [sys.executable, "-m", "qmf_async", "collect", "-b",
                           qpidd_stock.address, "--out", str(out), "--duration", "8",
                           "--batch-seconds", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        started = await asyncio.to_thread(proc.stderr.readline)
        assert "collecting from" in started, started
        await _make_queue(qpidd_stock.url, name)
        await asyncio.to_thread(send_messages, qpidd_stock.address, name, 3)
        _out, stderr = await asyncio.to_thread(proc.communicate, timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        await _drop_queue(qpidd_stock.url, name)
    assert proc.returncode == 0, stderr
    import pyarrow.dataset as ds

    events = ds.dataset(out / "events", format="parquet", partitioning="hive").to_table()
    declared = [r for r in events.to_pylist() if r["event_name"] == "queueDeclare"]
    (mine,) = [r for r in declared if dict(r["args"])["qName"] == name]
    # qpidd has no vhosts: its address is written without one
    assert mine["agent"] == "1.0" and mine["broker"] == qpidd_stock.url
    samples = ds.dataset(out / "samples", format="parquet", partitioning="hive").to_table(
        columns=["class_name", "agent", "props"])
    classes = set(samples.column("class_name").to_pylist())
    assert "queue" in classes
    # the consoles' own queues (collect's among them) are left out, as qmf stat -q does
    queues = {dict(r["props"]).get("name") for r in samples.to_pylist()
              if r["class_name"] == "queue"}
    assert name in queues and not [q for q in queues if q and is_console_queue(q)], queues


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


def _post(url: str, body: Any) -> Any:
    parts = urllib.parse.urlsplit(url)  # a write from the dashboard's own origin
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json",
                                          "origin": f"{parts.scheme}://{parts.netloc}"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


async def test_the_dashboard_shows_and_calls(qpidd_stock: Any, queue: str) -> None:
    await _dashboard_shows_and_calls(qpidd_stock, queue)


async def test_the_dashboard_on_a_qpidd_with_qmf_v1_on(qpidd_v1: Any) -> None:
    # v1 and v2 both published: the dashboard (v2 over AMQP 1.0) shows each queue once
    name = f"dash-v1-{uuid.uuid4().hex[:8]}"
    await _make_queue(qpidd_v1.url, name)
    try:
        await asyncio.to_thread(send_messages, qpidd_v1.address, name, 7)
        await _dashboard_shows_and_calls(qpidd_v1, name)
    finally:
        await _drop_queue(qpidd_v1.url, name)


async def _dashboard_shows_and_calls(qpidd: Any, queue: str) -> None:
    port = _free_port()
    proc = await asyncio.to_thread(
        subprocess.Popen, [sys.executable, str(ROOT / "examples" / "web_dashboard" / "app.py"),
                           "--url", qpidd.address, "--port", str(port),
                           "--methods", "queue.purge,broker.echo"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        def connected() -> bool:
            try:
                return bool(_get(f"{base}/api/agents")["connected"])
            except OSError:
                return False
        await wait_until(lambda: asyncio.to_thread(connected), timeout=30.0,
                         message="the dashboard connected to qpidd")
        agents = await asyncio.to_thread(_get, f"{base}/api/agents")
        assert [a["label"].startswith("apache.org:qpidd:") for a in agents["agents"]] == [True]
        queues = await asyncio.to_thread(_get, f"{base}/api/objects/queue")
        # as the stream, the listing leaves out the consoles' own queues (the
        # dashboard's among them)
        assert [q["properties"]["name"] for q in queues
                if is_console_queue(q["properties"]["name"])] == []
        (mine,) = [q for q in queues if q["properties"]["name"] == queue]
        assert mine["statistics"]["msgDepth"] == 7
        (broker,) = await asyncio.to_thread(_get, f"{base}/api/objects/broker")
        answer = await asyncio.to_thread(
            _post, f"{base}/api/object/{broker['object_id']}/methods/echo",
            {"sequence": 3, "body": "from the dashboard"})
        assert answer["out_args"] == {"sequence": 3, "body": "from the dashboard"}
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def test_qmf_config_log_and_reload_acl_as_qpid_config(qpidd_stock: Any,
                                                            classic_tools: Any) -> None:
    addr = qpidd_stock.address
    before = await asyncio.to_thread(_qmf, "config", addr, "log")
    assert before.returncode == 0 and before.stdout.startswith("Log level: ")
    rc, classic_out, _err = await asyncio.to_thread(classic_tools, "qpid-config", "-b", addr,
                                                    "log")
    assert rc == 0 and classic_out == before.stdout  # the same line
    level = before.stdout.split(": ", 1)[1].strip()
    try:
        changed = await asyncio.to_thread(_qmf, "config", addr, "log", "info+")
        assert (changed.returncode, changed.stdout) == (0, "")
        rc, classic_out, _err = await asyncio.to_thread(classic_tools, "qpid-config", "-b",
                                                        addr, "log")
        assert classic_out.strip() == "Log level: info+"
    finally:
        await asyncio.to_thread(_qmf, "config", addr, "log", level)
    # no ACL file configured: the broker's reason, one line, the method-failed code
    acl = await asyncio.to_thread(_qmf, "config", addr, "reload-acl")
    assert acl.returncode == 6
    assert acl.stderr.strip().splitlines() == [
        'qmf config: error: reloadACLFile failed: Unable to open ACL file "": eof=F; '
        'fail=T; bad=F (status 65536)']
    rc, classic_out, _err = await asyncio.to_thread(classic_tools, "qpid-config", "-b", addr,
                                                    "reload-acl")
    assert rc == 1 and 'Unable to open ACL file ""' in classic_out


async def test_qmf_queue_stats_takes_the_broker_as_qpid_queue_stats_does(
        qpidd_stock: Any, queue: str) -> None:
    proc = await asyncio.to_thread(_qmf, "queue-stats", "-a", qpidd_stock.address,
                                   "--count", "1", "-i", "0.2", "--json", "-f", queue)
    assert proc.returncode == 0, proc.stderr
    (report,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(q["queue"], q["depth"]) for q in report["queues"]] == [(queue, 7)]


async def test_the_dashboard_page_in_a_browser_on_qpidd(qpidd_stock: Any, queue: str) -> None:
    """The page itself, in headless Chromium, against a stock qpidd: qpidd's queues with
    its agent's label, the chosen queue's chart fed by qpidd's publications."""
    playwright = pytest.importorskip("playwright.async_api")
    from .test_web_dashboard import CHROMIUM_ARGS, _chromium

    executable = _chromium()
    if executable is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium)")
    port = _free_port()
    proc = await asyncio.to_thread(
        subprocess.Popen, [sys.executable, str(ROOT / "examples" / "web_dashboard" / "app.py"),
                           "--url", qpidd_stock.address, "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        def up() -> bool:
            try:
                return bool(_get(f"{base}/api/agents")["connected"])
            except OSError:
                return False
        await wait_until(lambda: asyncio.to_thread(up), timeout=30.0,
                         message="the dashboard connected to qpidd")
        async with playwright.async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=executable,
                                               args=CHROMIUM_ARGS)
            try:
                page = await browser.new_page(viewport={"width": 1280, "height": 800})
                errors: list[str] = []
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                await page.goto(f"{base}/?queue={queue}")
                row = page.locator(f"tr[data-queue='{queue}']")
                expect = playwright.expect
                await expect(row).to_have_count(1, timeout=20_000)
                await expect(row.locator("td.depth")).to_have_text("7", timeout=20_000)
                await expect(row.locator("td.agent")).to_contain_text("apache.org:qpidd:")
                await expect(page.locator("#selected-name")).to_have_text(queue)
                # qpidd publishes the queue when it changes: more messages, a new sample
                await asyncio.to_thread(send_messages, qpidd_stock.address, queue, 3)
                await expect(row.locator("td.depth")).to_have_text("10", timeout=20_000)
                await page.wait_for_function(
                    "Number(document.querySelector('#depth-chart').dataset.points) >= 1",
                    timeout=20_000)
                names = await page.locator("#queues tbody tr").evaluate_all(
                    "rows => rows.map((r) => r.dataset.queue)")
                assert queue in names and not [n for n in names if is_console_queue(n)]
                ticks = (await page.locator("#depth-chart").get_attribute("data-ticks")
                         or "").split()
                assert len(ticks) >= 2 and len(set(ticks)) == len(ticks), ticks
                await page.screenshot(path=str(ROOT / "test-artifacts" / "web_dashboard_qpidd.png"),
                                      full_page=True)
                assert not errors, errors
            finally:
                await browser.close()
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def test_the_consoles_own_queues_are_one_word_and_hidden(qpidd_stock: Any,
                                                                queue: str) -> None:
    """The consoles' own queues on qpidd (``<container id>_<link>``) have no blank in
    their names, and qmf stat -q, qmf config queues, qmf queue-stats and the shell leave
    them out unless --console-queues (while a session of this test holds its own)."""
    async with Session.connect(qpidd_stock.url):
        addr = qpidd_stock.address
        every = await asyncio.to_thread(_qmf, "stat", "-b", addr, "-q", "--json",
                                        "--console-queues")
        assert every.returncode == 0, every.stderr
        names = [r["queue"] for r in json.loads(every.stdout)]
        own = [n for n in names if is_console_queue(n)]
        assert queue in names and own, names
        assert [n for n in names if any(c.isspace() for c in n)] == [], names
        assert all(n.startswith("qmf-async-console-") for n in own), own
        shown = await asyncio.to_thread(_qmf, "stat", "-b", addr, "-q", "--json")
        assert shown.returncode == 0, shown.stderr
        assert sorted(r["queue"] for r in json.loads(shown.stdout)) \
            == sorted(n for n in names if not is_console_queue(n))
        config = await asyncio.to_thread(_qmf, "config", "-b", addr, "queues", "--json")
        assert config.returncode == 0, config.stderr
        listed = [r["name"] for r in json.loads(config.stdout)]
        assert queue in listed and not [n for n in listed if is_console_queue(n)], listed
        for flag in ([], ["--console-queues"]):
            rates = await asyncio.to_thread(_qmf, "queue-stats", "-a", addr, "-i", "0.2",
                                            "--count", "1", "--json", *flag)
            assert rates.returncode == 0, rates.stderr
            rated = [r["queue"] for r in json.loads(rates.stdout)["queues"]]
            own = [n for n in rated if is_console_queue(n)]
            assert queue in rated and (own if flag else not own), (flag, rated)
        shell = await asyncio.to_thread(_qmf, "shell", addr, stdin="list queue\nquit\n")
        assert shell.returncode == 0, shell.stderr
        assert queue in shell.stdout and "qmf-async-console-" not in shell.stdout, \
            shell.stdout


async def test_qmf_into_a_closed_pipe_and_the_dashboard_without_proton(
        qpidd_stock: Any) -> None:
    """``qmf stat ... | head`` when head has gone: quiet, exit code 141.  The dashboard
    on qpidd with proton not importable serves (the built-in AMQP 1.0), whatever
    ``QMF_AMQP10`` says (it once picked proton's transport and is not read now)."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-m", "qmf_async", "stat", "-q", "-b",
                             qpidd_stock.address], stdout=write, stderr=subprocess.PIPE,
            text=True, timeout=60, check=False)
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (141, "")
    blocked = ("import runpy, sys; sys.modules['proton'] = None; "
               f"sys.argv = ['app.py', '--url', {qpidd_stock.address!r}, '--port', '0']; "
               f"runpy.run_path({str(ROOT / 'examples' / 'web_dashboard' / 'app.py')!r}, "
               "run_name='__main__')")
    # the dashboard needs no proton: it serves
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", blocked, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "QMF_AMQP10": "proton"})
    try:
        assert proc.stdout is not None
        first = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        assert first.startswith("======== Running on http://127.0.0.1:"), first
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 10)
