"""The documentation: the site builds without a warning (``mkdocs build --strict``),
and every Python and shell block of README.md and docs/*.md runs against a real broker
(the RabbitMQ bus of the docs, or a stock qpidd) and prints what the page shows, in form.

How a block is marked (where it runs, why it is left out, how its output is checked) is
in tests/docs_blocks.py.  The blocks of one page for one broker run in one process
(tests/docs_driver.py); each broker is started once for the module.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import pytest_asyncio

from qmf_async import Session
from qmf_async.agent.broker import ManagementBroker

from ._util import import_example, private_vhost
from .docs_blocks import Block, MarkerError, all_blocks, form_mismatch, shape
from .qpidd import Qpidd, qpidd_home

ROOT = Path(__file__).resolve().parent.parent
BUS_INTERVAL = 1.0     # the role and the demo agent of the docs' RabbitMQ bus publish this often
BLOCK_TIMEOUT = 60.0   # one block


@pytest.mark.slow
def test_docs_build_strict(tmp_path: Path) -> None:
    missing = [name for name in ("mkdocs", "mkdocstrings", "mkdocstrings_handlers.python")
               if importlib.util.find_spec(name.split(".")[0]) is None
               or (name == "mkdocstrings_handlers.python"
                   and importlib.util.find_spec(name) is None)]
    if missing:
        pytest.fail(f"{', '.join(missing)} not installed: the docs build needs mkdocs and "
                    f"mkdocstrings[python] (pip install -e '.[docs]')", pytrace=False)
    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
         str(ROOT / "mkdocs.yml"), "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{output}"
    warnings = [line for line in output.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert not warnings, "\n".join(warnings)
    # the API reference was generated from the docstrings
    session_page = (site / "api" / "session.html").read_text()
    assert "add_broker" in session_page and "get_objects" in session_page
    assert "load_schema_xml" in (site / "api" / "agent.html").read_text()
    assert (site / "tutorial.html").is_file() and (site / "migration.html").is_file()


# --- the code blocks run as tests (tests/docs_blocks.py says how to mark a block) ------


def _pages(broker: str) -> list[str]:
    """The pages with blocks to run on ``broker``."""
    try:
        found = all_blocks()
    except MarkerError:
        return []  # test_every_block_is_marked_well reports it
    return list(dict.fromkeys(b.page for b in found if broker in b.brokers and b.skip is None
                              and not b.broker_killed))


def _killed_blocks() -> list[str]:
    """The blocks marked ``broker-killed`` (run alone, see tests/docs_blocks.py)."""
    try:
        return [b.id for b in all_blocks() if b.broker_killed and b.skip is None]
    except MarkerError:
        return []


def test_every_block_is_marked_well() -> None:
    """Every marker is readable, every skip says why, and every Python block that runs
    is a complete script (it compiles as a module: no ``await`` outside a function)."""
    skipped = []
    for block in all_blocks():  # raises MarkerError with the page and line
        if block.skip is not None:
            skipped.append(f"{block.id}: {block.skip}")
        elif block.language == "python":
            try:
                compile(block.source, block.id, "exec")
            except SyntaxError as exc:
                pytest.fail(f"{block.id} is not a complete script ({exc}); mark it "
                            f'<!-- skip: next "why" --> if it is a fragment', pytrace=False)
    print("left out:\n" + "\n".join(skipped))


def test_the_shape_of_an_output() -> None:
    shown = "<Broker amqp://localhost:5672/%2F connected>\n  RemoteAgent(1.10 demo)\n"
    printed = "<Broker amqp://127.0.0.1:41123/qmf-docs-ab12cd34 connected>\n" \
              "  RemoteAgent(1.0 demo)\n  RemoteAgent(1.11 demo)\n"
    assert form_mismatch(printed, shown) is None
    assert "of no form shown" in (form_mismatch(printed + "Traceback\n", shown) or "")
    assert "of no form printed" in (form_mismatch("  RemoteAgent(1.0 demo)\n", shown) or "")
    assert form_mismatch("  RemoteAgent(1.0 demo)\n", shown, "any") is None
    assert shape("0-1-1-10-7 at 1795357557334556695 f546d872cb130f83bcf7d291bdd00c90") \
        == "0-0-0-0-0 at 0 <hex>"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def rabbitmq_bus(amqp_url: str) -> AsyncIterator[str]:
    """The RabbitMQ bus of the docs: the management-broker role and the demo agent
    (examples/demo_agent.py, as the tutorial starts them) on a vhost of this module."""
    demo = import_example("demo_agent")
    with private_vhost(amqp_url, "qmf-docs-test") as url:
        role = ManagementBroker(url, interval=BUS_INTERVAL, broker_id=uuid.uuid4())
        await role.start()
        try:
            _agent, model = demo.build_demo_agent(url, interval=BUS_INTERVAL, seed=1)
            await model.start()
            try:
                yield url
            finally:
                await model.stop()
        finally:
            await role.stop(2.0)


@pytest.fixture(scope="module")
def stock_qpidd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Qpidd]:
    """A stock qpidd (QMF v2 only) for the docs' qpidd blocks, publishing every 2 s."""
    if qpidd_home() is None:
        reason = "qpidd not found (../shared/qpidd or $QPIDD_HOME)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI must run the docs' qpidd blocks", pytrace=False)
        pytest.skip(reason)
    broker = Qpidd.start(qmf1=False, pub_interval=2,
                         directory=tmp_path_factory.mktemp("docs-qpidd"))
    yield broker
    broker.stop()


#: the docs' literal address of the web dashboard, pointed at a free port of the test
DASHBOARD_ADDRESSES = ("127.0.0.1:8080", "localhost:8080", "--port 8080")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _with_dashboard_port(source: str, port: int) -> str:
    for literal in DASHBOARD_ADDRESSES:
        source = source.replace(literal, literal.replace("8080", str(port)))
    return source


def _pointed_at(source: str, url: str) -> str:
    """The block with the docs' literal default addresses pointed at ``url``."""
    parts = urlsplit(url)
    address = f"{parts.hostname}:{parts.port}"
    for literal in ("amqp://guest:guest@localhost:5672/", "amqp://localhost:5672/",
                    '"amqp://localhost"', "'amqp://localhost'"):
        quote = literal[0] if literal[0] in "\"'" else ""
        source = source.replace(literal, f"{quote}{url}{quote}")
    for literal in ("127.0.0.1:5673", "localhost:5673"):
        source = source.replace(literal, address)
    return source


async def _run_page(blocks: list[Block], url: str | None, cwd: Path) -> list[dict[str, Any]]:
    """Run ``blocks`` in one driver process, in ``cwd`` (a fresh directory with the
    clone's ``examples/`` and ``scripts/`` linked in, as the docs' commands are given
    from the clone's root); one result per block run (fewer when one did not finish:
    the test fails naming it)."""
    for name in ("examples", "scripts"):
        if not (cwd / name).exists():
            (cwd / name).symlink_to(ROOT / name, target_is_directory=True)
    port = _free_port()
    env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(ROOT)}
    if url is not None:
        env["QMF_URL"] = url
    request = {"blocks": [
        {"id": b.id, "language": b.language, "timeout": BLOCK_TIMEOUT, "env": env,
         "source": _with_dashboard_port(
             b.source if url is None else _pointed_at(b.source, url), port)}
        for b in blocks]}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "tests" / "docs_driver.py"), cwd=cwd,
        env={**os.environ, **env, "PYTHONUNBUFFERED": "1"},
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(request).encode())
    proc.stdin.close()
    results: list[dict[str, Any]] = []
    try:
        for block in blocks:
            try:
                line = await asyncio.wait_for(proc.stdout.readline(), BLOCK_TIMEOUT + 5)
            except TimeoutError:
                results.append({"id": block.id, "ok": False, "stdout": "",
                                "error": f"did not finish within {BLOCK_TIMEOUT} s"})
                break
            if not line:
                err = (await proc.stderr.read()).decode() if proc.stderr else ""
                results.append({"id": block.id, "ok": False, "stdout": "",
                                "error": f"the driver exited: {err[-3000:]}"})
                break
            results.append(json.loads(line))
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.communicate()
    return results


async def _check_page(page: str, broker: str, url: str | None, cwd: Path) -> None:
    """Every Python and shell block of the page for ``broker`` runs without an error,
    and prints what the page shows in form (the shown output is checked on the first
    broker a block names)."""
    runs = [b for b in all_blocks() if b.page == page and broker in b.brokers
            and b.skip is None and not b.broker_killed]
    results = await _run_page(runs, url, cwd)
    failures = []
    for block, result in zip(runs, results, strict=False):
        if not result["ok"]:
            failures.append(f"{block.id} ({broker}) failed: {result['error']}\n"
                            f"printed:\n{result['stdout']}")
        elif block.output is not None and block.brokers[0] == broker:
            why = form_mismatch(result["stdout"], block.output, block.output_check)
            if why:
                failures.append(f"{block.id} ({broker}) printed another form than the page "
                                f"shows:\n{why}\nprinted:\n{result['stdout']}")
    if failures:
        pytest.fail("\n\n".join(failures), pytrace=False)


# one test per page and broker; a broker no block names has no test (rather than one
# skipped for an empty parameter set)

if _pages("rabbitmq"):
    @pytest.mark.integration
    @pytest.mark.asyncio(loop_scope="module")
    @pytest.mark.parametrize("page", _pages("rabbitmq"))
    async def test_docs_blocks_rabbitmq(page: str, rabbitmq_bus: str, tmp_path: Path) -> None:
        await _check_page(page, "rabbitmq", rabbitmq_bus, tmp_path)


if _pages("qpidd"):
    @pytest.mark.qpidd
    @pytest.mark.asyncio(loop_scope="module")
    @pytest.mark.parametrize("page", _pages("qpidd"))
    async def test_docs_blocks_qpidd(page: str, stock_qpidd: Qpidd, tmp_path: Path) -> None:
        await _check_page(page, "qpidd", stock_qpidd.url, tmp_path)


if _pages("none"):
    @pytest.mark.asyncio(loop_scope="module")
    @pytest.mark.parametrize("page", _pages("none"))
    async def test_docs_blocks_without_broker(page: str, tmp_path: Path) -> None:
        await _check_page(page, "none", None, tmp_path)


if _killed_blocks():
    @pytest.mark.qpidd
    @pytest.mark.asyncio(loop_scope="module")
    @pytest.mark.parametrize("block_id", _killed_blocks())
    async def test_docs_block_ends_when_its_qpidd_is_killed(block_id: str,
                                                            tmp_path: Path) -> None:
        """A ``broker-killed`` block (a loop that ends only when its broker is lost)
        follows a qpidd of its own until that qpidd is killed, then ends by itself,
        printing what the page shows."""
        if qpidd_home() is None:
            pytest.skip("qpidd not found (../shared/qpidd or $QPIDD_HOME)")
        block = next(b for b in all_blocks() if b.id == block_id)
        broker = Qpidd.start(qmf1=False, pub_interval=1, directory=tmp_path / "qpidd")
        try:  # the queue the tutorial's set-up makes
            async with Session.connect(broker.url, timeout=10.0) as session:
                (br,) = await session.get_objects(_class="broker", _timeout=10.0)
                await br.create("queue", "orders", {}, False)
        except BaseException:
            broker.stop()
            raise
        command = ([sys.executable, "-c"] if block.language == "python"
                   else ["bash", "-e", "-o", "pipefail", "-c"])
        try:
            proc = await asyncio.create_subprocess_exec(
                *command, _pointed_at(block.source, broker.url), cwd=tmp_path,
                env={**os.environ, "QMF_URL": broker.url, "PYTHONPATH": str(ROOT),
                     "PYTHONUNBUFFERED": "1"},
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE)
            assert proc.stdout is not None and proc.stderr is not None
            try:
                first = await asyncio.wait_for(proc.stdout.readline(), BLOCK_TIMEOUT)
                assert first, f"{block_id} printed nothing: {(await proc.stderr.read()).decode()}"
                os.kill(broker.pid, signal.SIGKILL)  # the broker is lost
                rest, err = await asyncio.wait_for(proc.communicate(), BLOCK_TIMEOUT)
            except TimeoutError:
                pytest.fail(f"{block_id} did not end within {BLOCK_TIMEOUT} s", pytrace=False)
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
        finally:
            broker.stop()
        printed = (first + rest).decode()
        assert proc.returncode == 0, \
            f"{block_id} exited {proc.returncode}: {err.decode()[-3000:]}\nprinted:\n{printed}"
        if block.output is not None:
            why = form_mismatch(printed, block.output, block.output_check)
            assert why is None, f"{block_id} printed another form than the page shows:\n" \
                                f"{why}\nprinted:\n{printed}"
