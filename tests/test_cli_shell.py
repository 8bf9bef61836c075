"""``qmf shell`` and ``qmf repl`` against the real RabbitMQ, with the management-broker
role and the demo broker agent (examples/demo_agent.py) running in-process.

The command class (:class:`qmf_async.tools.cli.shell.Shell`) is driven directly; the tools are
also run as subprocesses (``python -m qmf_async shell|repl``) with commands piped to
stdin, and the shell once in a pseudo-terminal (stdlib ``os.openpty``), where tab
completion and prompt_toolkit's prompt are exercised end to end.

``broker`` is one routing key per vhost, so the module runs on a vhost of its own when
rabbitmqctl can make one (local broker); otherwise on the shared vhost, where the
assertions only look at this module's agent's objects.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import io
import logging
import os
import re
import signal
import struct
import sys
import termios
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attrs
import pytest

from qmf_async import Session
from qmf_async.agent import Agent
from qmf_async.agent.broker import ManagementBroker
from qmf_async.names import is_console_queue
from qmf_async.tools.cli._common import (
    EXIT_METHOD,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
)
from qmf_async.tools.cli.shell import (
    COMMANDS,
    FIRST_ID,
    Shell,
    ShellError,
    ShellExit,
    _OneLineFormatter,
    _report,
    history_file,
)

from ._util import cut_connection, import_example, private_vhost, wait_until
from .qpidd import Qpidd

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "org.apache.qpid.broker"
INTERVAL = 0.2
DEMO_QUEUES = ("orders", "invoices", "audit", "work-1")
ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][0-9A-Za-z]|\x1b[=>]")


def _import_demo() -> Any:
    return import_example("demo_agent")


demo = _import_demo()


def _label(what: str) -> str:
    return f"cli-shell-{what}-{uuid.uuid4().hex[:8]}"


# --------------------------------------------------------------------------- the bus


@attrs.frozen
class Bus:
    url: str
    isolated: bool  #: the vhost is this module's alone


@pytest.fixture(scope="module")
def bus(amqp_url: str) -> Iterator[Bus]:
    """``amqp_url`` on a temporary vhost of this module (deleted afterwards), or
    ``amqp_url`` itself when rabbitmqctl cannot make one."""
    with private_vhost(amqp_url, "qmf-cli-shell-test") as url:
        yield Bus(url, url != amqp_url)


@contextlib.asynccontextmanager
async def running_bus(bus: Bus) -> AsyncIterator[tuple[Agent, Any]]:
    """The management-broker role and a demo agent attached to it."""
    role = ManagementBroker(bus.url, broker_id=uuid.uuid4(), interval=INTERVAL,
                            label=_label("role"))
    await role.start()
    try:
        agent, model = demo.build_demo_agent(bus.url, interval=INTERVAL, queues=1, seed=5,
                                             label=_label("demo"), attach_timeout=2.0)
        await model.start()
        try:
            yield agent, model
        finally:
            await model.stop()
    finally:
        await role.stop(2.0)


@attrs.define
class Env:
    shell: Shell
    session: Session
    agent: Agent
    model: Any
    emitted: list[str]

    def ids(self, cls: str) -> dict[str, int]:
        """Short ids of our agent's live objects of ``cls`` by name."""
        banks = (self.agent.broker_bank, self.agent.agent_bank)
        out = {}
        for sid, obj in self.shell.cached(cls).items():
            if obj.get_object_id().agent_key() == banks:
                values = self.shell.values(sid)
                out[str(values.get("name", values.get("bindingKey")))] = sid
        return out

    async def run(self, line: str) -> str:
        return await self.shell.execute(line)


@pytest.fixture
async def env(bus: Bus) -> AsyncIterator[Env]:
    async with running_bus(bus) as (agent, model):
        assert agent.attached
        session = Session(timeout=5.0, broker_timeout=1.0, agent_interval=0.3)
        try:
            await session.add_broker(bus.url, timeout=5.0)
            await session.wait_for_agents(label=agent.label, timeout=5.0)
            emitted: list[str] = []
            shell = Shell(session, emit=emitted.append)
            assert await shell.start() == []
            try:
                e = Env(shell, session, agent, model, emitted)
                # the classes the tests read ids of, listed once: the role may learn the
                # demo agent's classes after the shell started, and a vhost (no
                # statistics) is published again only when it changes
                await e.run("list queue")
                await e.run("list broker")
                await e.run("list vhost")
                yield e
            finally:
                await shell.close()
        finally:
            await session.close()


def _rows(text: str) -> list[list[str]]:
    """The rows of a table (the lines after the ``===`` rule), split on 2+ spaces."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if set(line.strip()) == {"="})
    return [re.split(r"\s{2,}", line.strip()) for line in lines[start + 1:] if line.strip()]


# --------------------------------------------------------------------------- the commands


async def test_list_summary_and_list_class(env: Env, bus: Bus) -> None:
    summary = await env.run("list")
    assert summary.startswith("Management Object Types:")
    counts = {row[0]: (int(row[1]), int(row[2])) for row in _rows(summary)}
    for cls in ("broker", "vhost", "queue", "exchange", "binding"):
        assert f"{PACKAGE}:{cls}" in counts, summary
    if bus.isolated:
        assert counts[f"{PACKAGE}:queue"] == (len(DEMO_QUEUES), 0)
        assert counts[f"{PACKAGE}:broker"] == (1, 0)
        assert counts[f"{PACKAGE}:binding"] == (len(DEMO_QUEUES) + 4, 0)

    listing = await env.run("list queue")
    assert listing.splitlines()[0] == f"Objects of type {PACKAGE}:queue"
    rows = _rows(listing)
    by_name = {row[3].split(":")[-1]: int(row[0]) for row in rows}
    assert set(DEMO_QUEUES) <= set(by_name)
    assert all(sid >= FIRST_ID for sid in by_name.values())
    assert all(row[2] == "-" and re.fullmatch(r"\d\d:\d\d:\d\d", row[1]) for row in rows)
    # the index shows the vhost reference as the vhost's short id
    (vhost_id,) = env.ids("vhost").values()
    assert all(row[3] == f"{vhost_id}:{row[3].split(':')[-1]}" for row in rows)
    # ids are stable: asking again gives every object its id again
    assert {row[3].split(":")[-1]: int(row[0]) for row in _rows(await env.run("list queue"))} \
        == by_name
    assert by_name["orders"] == env.ids("queue")["orders"]

    # qualified names, active/all contents, long time format
    assert (await env.run(f"list {PACKAGE}:queue")).splitlines()[0] \
        == f"Objects of type {PACKAGE}:queue"
    active = await env.run("list queue active")
    assert active.startswith(f"Object of type {PACKAGE}:queue: (last sample time: ")
    assert "orders" in active and "msgDepth" in active
    await env.run("set time-format long")
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", await env.run("list queue"))
    assert await env.run("set") == "time-format long"


async def test_show_ids_and_ranges(env: Env) -> None:
    q = env.ids("queue")
    ordered = sorted(q.values())
    first, last = ordered[0], ordered[-1]
    text = await env.run(f"show {first}-{ordered[1]} {last}")
    header = _rows(text)  # rows after the rule; the header is the line before it
    head = text.splitlines()[1].split()
    assert head[:2] == ["Type", "Element"]
    assert head[2:5] == [str(first), str(ordered[1]), str(last)] and head[-1] == "Unit"
    names = next(row for row in header if row[1] == "name")
    id_to_name = {sid: name for name, sid in q.items()}
    assert names[2:5] == [id_to_name[first], id_to_name[ordered[1]], id_to_name[last]]
    stats = {row[1] for row in header if row[0] == "statistic"}
    assert {"msgDepth", "msgTotalEnqueues", "consumerCount"} <= stats
    # qpid-tool's "list <ids>" is the same; an object of another class gets its own table
    assert await env.run(f"list {first}") == await env.run(f"show {first}")
    (broker_id,) = env.ids("broker").values()
    mixed = await env.run(f"show {first} {broker_id}")
    assert f"Object of type {PACKAGE}:queue" in mixed
    assert f"Object of type {PACKAGE}:broker" in mixed
    # references are shown as the referenced object's short id
    (vhost_id,) = env.ids("vhost").values()
    vhost_row = next(row for row in header if row[1] == "vhostRef")
    assert vhost_row[2:5] == [str(vhost_id)] * 3


async def test_schema(env: Env) -> None:
    summary = await env.run("schema")
    kinds = {row[0]: row[1] for row in _rows(summary)}
    assert kinds[f"{PACKAGE}:queue"] == "object"
    assert kinds[f"{PACKAGE}:queueDeclare"] == "event"
    detail = await env.run("schema queue")
    assert detail.startswith(f"Schema for class '{PACKAGE}:queue' (hash ")
    rows = {row[0]: row for row in _rows(detail.split("\n\n")[0])}
    assert rows["name"][1:4] == ["sstr", "ReadCreate", "index"]
    assert rows["vhostRef"][1:4] == ["ref", "ReadCreate", "index"]
    assert rows["msgDepth"][1:3] == ["uint64", "message"]
    assert "Method 'purge': Discard all or some messages on a queue" in detail
    purge = detail.split("Method 'purge'")[1]
    assert re.search(r"request\s+uint32\s+I", purge) and re.search(r"filter\s+map\s+I", purge)
    event = await env.run("schema queueDeclare")
    assert event.startswith(f"Schema for event '{PACKAGE}:queueDeclare'")
    assert re.search(r"qName\s+sstr", event)


async def test_agents(env: Env) -> None:
    text = await env.run("agents")
    assert "management broker: yes" in text.splitlines()[0]
    agents = {row[0]: row for row in _rows(text)}
    ours = agents[f"{env.agent.broker_bank}.{env.agent.agent_bank}"]
    assert ours[1] == env.agent.label
    assert int(ours[2]) >= 1 + 1 + len(DEMO_QUEUES)  # broker, vhost, queues... are cached


async def test_call_with_typed_arguments(env: Env) -> None:
    (bid,) = env.ids("broker").values()
    echo = await env.run(f'call {bid} echo 42 "hello world"')
    assert echo.splitlines()[0] == "OK (0)"
    assert {row[0]: row[1] for row in _rows(echo)} == {"sequence": "42", "body": "hello world"}
    # keywords, other integer notations; strings are never evaluated
    echo = await env.run(f"call {bid} echo body='__import__(\"os\").getcwd()' sequence=0x10")
    assert {row[0]: row[1] for row in _rows(echo)} \
        == {"sequence": "16", "body": '__import__("os").getcwd()'}
    # a map as JSON and a bool
    out = await env.run(f"call {bid} create queue shell-q '{{\"durable\": true}}' no")
    assert out == "OK (0)"
    assert env.model.queues["shell-q"].obj["durable"] is True

    # purge: the queue empties, and the update reaches the shell's cache in the background
    env.model.paused = True
    orders = env.model.queues["orders"]
    qid = env.ids("queue")["orders"]
    await wait_until(lambda: env.model.tick() or orders.messages, message="orders not empty")
    await wait_until(lambda: env.shell.values(qid)["msgDepth"] == len(orders.messages) > 0,
                     message="the queue's depth in the shell's cache")
    assert await env.run(f"call {qid} purge 0") == "OK (0)"
    assert len(orders.messages) == 0
    await wait_until(lambda: env.shell.values(qid)["msgDepth"] == 0,
                     message="the purge seen through background updates")


BAD_COMMANDS = [
    ("bogus", EXIT_USAGE),
    ("show", EXIT_USAGE),
    ("show abc", EXIT_USAGE),
    ("show 99999", EXIT_NOT_FOUND),
    ("list nosuchclass", EXIT_NOT_FOUND),
    ("list queue sometimes", EXIT_USAGE),
    ("schema nosuchclass", EXIT_NOT_FOUND),
    ("set time-format medium", EXIT_USAGE),
    ("events maybe", EXIT_USAGE),
    ("call {broker} nosuchmethod", EXIT_NOT_FOUND),
    ("call {broker} echo notanint x", EXIT_USAGE),
    ("call {broker} echo 1+1 x", EXIT_USAGE),
    ("call {broker} echo 1 x extra", EXIT_USAGE),
    ("call {broker} create queue q {{bad false", EXIT_USAGE),
    ("call {broker} create queue q [1] false", EXIT_USAGE),
    ("call {broker} create queue q {{}} maybe", EXIT_USAGE),
    ("call {broker} echo 1 'unterminated", EXIT_USAGE),
    ("call {broker} echo -1 x", EXIT_USAGE),  # uint32 range, checked before sending
    ("call {orders} purge 0 {{}} extra", EXIT_USAGE),
    ("call {broker} delete queue no-such-queue {{}}", EXIT_METHOD),  # the agent failed it
]


async def test_bad_commands_fail_in_one_line(env: Env) -> None:
    (bid,) = env.ids("broker").values()
    for template, code in BAD_COMMANDS:
        line = template.format(broker=bid, orders=env.ids("queue")["orders"])
        with pytest.raises(ShellError) as info:
            await env.run(line)
        message = str(info.value)
        assert message and "\n" not in message, (line, message)
        assert info.value.code == code, (line, message)
        # the shell goes on
        assert (await env.run("list queue")).startswith("Objects of type"), line


async def test_events_on_prints_events_as_they_arrive(env: Env) -> None:
    (bid,) = env.ids("broker").values()
    assert await env.run("events") == "events are off"
    assert await env.run("events on") == ""
    assert await env.run("events") == "events are on"
    await env.run(f"call {bid} create queue ev-q {{}} false")
    line = await wait_until(lambda: next((e for e in env.emitted if "queueDeclare" in e), None),
                            message="a queueDeclare event emitted")
    assert line.startswith("event ") and f"{PACKAGE}:queueDeclare" in line
    assert "qName=ev-q" in line and "durable=False" in line
    assert await env.run("events off") == ""
    assert await env.run("events") == "events are off"


async def test_background_updates_follow_creation_and_deletion(env: Env) -> None:
    broker_obj = env.shell.cached("broker")[env.ids("broker")["amqp-broker"]]
    # created and deleted through another path than the shell: only updates tell it
    await broker_obj.invoke("create", "queue", "bg-q", {}, False)
    await wait_until(lambda: "bg-q" in env.ids("queue"), message="bg-q cached from updates")
    sid = env.ids("queue")["bg-q"]
    await broker_obj.invoke("delete", "queue", "bg-q", {})
    await wait_until(lambda: sid not in env.shell.cached("queue"), message="bg-q deleted")
    assert sid in env.shell.cached("queue", deleted=True)
    rows = {int(row[0]): row for row in _rows(await env.run("list queue"))}
    assert rows[sid][2] != "-"  # destroyed time
    assert f"{sid} (deleted)" in await env.run("list queue all")
    assert f"{sid} (deleted)" not in await env.run("list queue active")


async def test_completion(env: Env) -> None:
    shell = env.shell
    (bid,) = env.ids("broker").values()
    assert shell.complete("") == list(COMMANDS)
    assert shell.complete("lis") == ["list"]
    assert shell.complete("s") == ["show", "schema", "set"]
    assert "queue" in shell.complete("list qu") and "queueDeclare" not in shell.complete("list ")
    assert "queueDeclare" in shell.complete("schema queueD")
    assert shell.complete("list queue ") == ["active", "all"]
    ids = shell.complete("show ")
    assert str(bid) in ids and all(i.isdigit() for i in ids)
    assert ids == sorted(ids, key=int)
    assert shell.complete(f"call {bid} ec") == ["echo"]
    assert shell.complete(f"call {bid} echo ") == ["sequence=", "body="]
    assert shell.complete(f"call {bid} echo body=x ") == ["sequence="]
    assert shell.complete("set time-format ") == ["short", "long"]
    assert shell.complete("events o") == ["on", "off"]
    assert shell.complete("call 99999 ") == []


async def test_quit_and_comments(env: Env) -> None:
    for line in ("quit", "exit", " QUIT "):
        with pytest.raises(ShellExit):
            await env.run(line)
    assert await env.run("# a comment") == ""
    assert await env.run("   ") == ""
    assert "list CLASS" in await env.run("help")


def test_history_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    path = history_file("shell")
    assert path == tmp_path / ".qmf_history" / "shell" and path.exists()
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    monkeypatch.setenv("HOME", str(not_a_dir))  # unusable: history stays in memory
    assert history_file("shell") is None
    monkeypatch.delenv("HOME")
    assert history_file("shell") is None


# --------------------------------------------------------------------------- subprocesses


def _env(url: str, home: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "QMF_URL": url, "HOME": str(home), "PYTHONPATH": str(ROOT),
           "PYTHONUNBUFFERED": "1", **extra}
    env.pop("QMF_TEST_URL", None)
    return env


async def _run_piped(tool: str, stdin: str, env: dict[str, str], timeout: float = 20.0
                     ) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "qmf_async", tool, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT, env=env)
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_shell_reads_commands_from_piped_stdin(bus: Bus, tmp_path: Path) -> None:
    async with running_bus(bus):
        code, out, err = await _run_piped(
            "shell", "list\nlist queue\nshow 101\nagents\nschema queue\nquit\nbogus\n",
            _env(bus.url, tmp_path))
        # (stderr may carry a library's log line under load, never an error of ours)
        assert code == EXIT_OK and "error" not in err, (out, err)
        assert "Management Object Types:" in out
        assert f"Objects of type {PACKAGE}:queue" in out
        assert all(re.search(rf":{name}\n", out) for name in DEMO_QUEUES), out
        assert f"Object of type {PACKAGE}:" in out  # show 101: the first object seen
        assert re.search(r"Broker amqp://\S+ \(connected, management broker: ", out), out
        assert "Method 'purge'" in out
        assert "bogus" not in out  # after quit nothing runs

        # errors: one line each on stderr, the shell goes on, exit code of the first
        code, out, err = await _run_piped(
            "shell", "list nosuchclass\nbogus\nlist queue\n", _env(bus.url, tmp_path))
        assert code == EXIT_NOT_FOUND, (out, err)
        assert [line for line in err.splitlines() if line.startswith("error")] \
            == ["error: unknown object class 'nosuchclass'",
                "error: unknown command 'bogus' (help lists the commands)"], err
        assert f"Objects of type {PACKAGE}:queue" in out
    assert not (tmp_path / ".qmf_history").exists()  # no prompt, no history


async def test_shell_exit_code_when_the_broker_is_unreachable(tmp_path: Path) -> None:
    code, out, err = await _run_piped("shell", "list\n", _env(
        "amqp://guest:guest@127.0.0.1:1/", tmp_path))
    assert code == EXIT_UNREACHABLE
    # (aiormq may log its own line before ours)
    assert out == "" and err.splitlines()[-1].startswith("qmf shell: error: cannot connect")


async def test_shell_in_a_pseudo_terminal(bus: Bus, tmp_path: Path) -> None:
    pytest.importorskip("prompt_toolkit")
    loop = asyncio.get_running_loop()
    async with running_bus(bus):
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 132, 0, 0))
        received = bytearray()

        def on_readable() -> None:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                data = b""
            if not data:
                loop.remove_reader(master)
            received.extend(data)

        def screen(start: int = 0) -> str:
            return ANSI.sub(b"", bytes(received[start:])).decode(errors="replace")

        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "qmf_async", "shell", stdin=slave, stdout=slave,
            stderr=slave, cwd=ROOT, start_new_session=True,
            env=_env(bus.url, tmp_path, TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1"))
        os.close(slave)
        os.set_blocking(master, False)
        loop.add_reader(master, on_readable)
        try:
            # the banner is printed above the prompt, which may be drawn first
            await wait_until(lambda: re.search(r"management broker.*qmf:", screen(), re.S),
                             15, message="the banner and the prompt")
            mark = len(received)
            os.write(master, b"lis\t")  # completes to "list"
            await wait_until(lambda: "list" in screen(mark), 10, message="completion of lis")
            os.write(master, b"\r")
            await wait_until(lambda: "Management Object Types:" in screen(mark), 10,
                             message="the output of list")
            mark = len(received)
            os.write(master, b"list queue\r")
            await wait_until(lambda: re.search(r":orders\s", screen(mark)), 10,
                             message="the output of list queue")
            os.write(master, b"quit\r")
            assert await asyncio.wait_for(proc.wait(), 10) == EXIT_OK
        finally:
            loop.remove_reader(master)
            os.close(master)
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    history = (tmp_path / ".qmf_history" / "shell").read_text()
    assert "+list\n" in history and "+list queue\n" in history and "+quit\n" in history


async def test_repl_awaits_at_top_level(bus: Bus, tmp_path: Path) -> None:
    async with running_bus(bus) as (agent, _):
        code, out, err = await _run_piped(
            "repl", 'print(len(await session.get_objects(_class="queue")))\n',
            _env(bus.url, tmp_path))
        assert code == EXIT_OK, err
        count = int(out.strip())
        assert count == len(DEMO_QUEUES) if bus.isolated else count >= len(DEMO_QUEUES)
        assert "session (the connected Session)" in err  # the banner, on stderr

        script = "\n".join([
            "x = 1/0",
            "print(x)",
            f"agents = [a for a in session.get_agents() if a.label == {agent.label!r}]",
            "(b,) = await session.get_objects(_class='broker', _agent=agents[0])",
            "r = await b.echo(7, 'hi')",
            "print(r.sequence, r.body, isinstance(r, MethodResult))",
            "exit(3)",
            "print('not reached')",
        ]) + "\n"
        code, out, err = await _run_piped("repl", script, _env(bus.url, tmp_path))
        assert code == 3, err
        assert out.splitlines() == ["7 hi True"], out
        assert "ZeroDivisionError: division by zero" in err
        assert "NameError" in err  # x was never bound
        assert 'File "<qmf repl>", line 1' in err


# --------------------------------------------------------------------------- reconnection


class Piped:
    """A tool run as a subprocess with stdin kept open: lines are sent one at a time
    and stdout and stderr collected as they come, to be polled with deadlines."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.out = bytearray()
        self.err = bytearray()
        assert proc.stdout is not None and proc.stderr is not None
        self._readers = [asyncio.ensure_future(self._read(proc.stdout, self.out)),
                         asyncio.ensure_future(self._read(proc.stderr, self.err))]

    @classmethod
    async def start(cls, tool: str, env: dict[str, str], *args: str) -> Piped:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "qmf_async", tool, *args, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT, env=env)
        return cls(proc)

    @staticmethod
    async def _read(stream: asyncio.StreamReader, into: bytearray) -> None:
        while chunk := await stream.read(65536):
            into.extend(chunk)

    @property
    def stdout(self) -> str:
        return self.out.decode(errors="replace")

    @property
    def stderr(self) -> str:
        return self.err.decode(errors="replace")

    async def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        await self.proc.stdin.drain()

    async def wait_for(self, pattern: str, stream: str = "stdout", timeout: float = 15.0,
                       start: int = 0) -> re.Match[str]:
        def found() -> re.Match[str] | None:
            text = self.stdout if stream == "stdout" else self.stderr
            return re.compile(pattern, re.M).search(text, start)

        return await wait_until(found, timeout, 0.02,
                                message=f"{pattern!r} on {stream} (stdout {self.stdout!r}, "
                                        f"stderr {self.stderr!r})")

    async def finish(self, timeout: float = 15.0) -> int:
        """Close stdin and wait for the exit code."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            code = await asyncio.wait_for(self.proc.wait(), timeout)
            await asyncio.wait_for(asyncio.gather(*self._readers), timeout)
        finally:
            await self.kill()
        return code

    async def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        for reader in self._readers:
            reader.cancel()


def _queue_ids(shell: Shell) -> dict[str, int]:
    return {str(shell.values(sid).get("name")): sid for sid in shell.cached("queue")}


async def test_shell_reconnects_after_a_cut_connection(bus: Bus) -> None:
    async with running_bus(bus) as (agent, _):
        session = Session(manage_connections=True, timeout=5.0, broker_timeout=1.0,
                          agent_interval=0.3, reconnect_max_delay=0.5)
        try:
            (broker,) = [await session.add_broker(bus.url, timeout=5.0)]
            await session.wait_for_agents(label=agent.label, timeout=5.0)
            notes: list[str] = []
            shell = Shell(session, emit=notes.append)
            assert await shell.start() == []
            try:
                await shell.execute("list queue")
                before = _queue_ids(shell)
                assert set(DEMO_QUEUES) <= set(before)
                await cut_connection(broker.transport)
                lost = f"connection to {broker.where} lost; reconnecting ..."
                back = f"reconnected to {broker.where}"
                await wait_until(lambda: back in notes, 15, message="the reconnection noted")
                assert notes.index(lost) < notes.index(back) and notes.count(lost) == 1, notes
                # commands work again, the objects keep their ids
                assert (await shell.execute("list")).startswith("Management Object Types:")
                rows = {row[3].split(":")[-1]: int(row[0])
                        for row in _rows(await shell.execute("list queue"))}
                assert {name: rows[name] for name in DEMO_QUEUES} \
                    == {name: before[name] for name in DEMO_QUEUES}
                assert await shell.execute(f"call {before['orders']} purge 0") == "OK (0)"
                assert "(deleted)" not in await shell.execute(f"show {before['orders']}")
            finally:
                await shell.close()
            assert session.console is None  # the shell's watch is gone with it
        finally:
            await session.close()


@pytest.mark.parametrize("qmf_version", [None, 1], ids=["default-v2", "v1"])
async def test_shell_on_qpidd_survives_a_restart(
        qpidd_fresh: Callable[[bool], Qpidd], qmf_version: int | None) -> None:
    # the default: a stock qpidd, QMF v2 only; over v1 a restarted qpidd gives its
    # objects new object ids (its boot sequence is part of them): the short ids follow
    qpidd = qpidd_fresh(qmf_version == 1)
    session = Session(manage_connections=True, timeout=5.0, reconnect_max_delay=1.0,
                      qmf_version=qmf_version)
    try:
        broker = await session.add_broker(qpidd.url, timeout=10.0)
        assert broker.qmf_version == (qmf_version or 2)
        notes: list[str] = []
        shell = Shell(session, emit=notes.append)
        await shell.start()
        try:
            await shell.execute("list broker")
            (bid,) = shell.cached("broker")
            assert await shell.execute(f"call {bid} create queue gone-q {{}} false") \
                == "OK (0)"
            await shell.execute("list queue")
            qid = _queue_ids(shell)["gone-q"]
            await shell.execute("list exchange")
            (xid,) = [sid for sid in shell.cached("exchange")
                      if shell.values(sid).get("name") == "qpid.management"]
            xoid = shell.object_id(xid)

            await asyncio.to_thread(qpidd.stop)
            await wait_until(lambda: f"connection to {broker.where} lost; reconnecting ..."
                             in notes, 15, message="the loss noted")
            # meanwhile: one line, at once, no hanging
            with pytest.raises(ShellError) as info:
                await asyncio.wait_for(shell.execute("list queue"), 3.0)
            assert info.value.code == EXIT_UNREACHABLE
            assert str(info.value) == (f"not connected to {broker.where}; reconnecting in "
                                       "the background, try again shortly")
            # the cache still answers
            assert f"Object of type {PACKAGE}:broker" in await shell.execute(f"show {bid}")

            await asyncio.to_thread(qpidd.start_again)
            await wait_until(lambda: f"reconnected to {broker.where}" in notes, 30,
                             message="the reconnection noted")
            listing = await shell.execute("list broker")
            assert [int(row[0]) for row in _rows(listing) if row[2] == "-"] == [bid]
            rows = {int(row[0]): row for row in _rows(await shell.execute("list exchange"))}
            assert rows[xid][2] == "-" and rows[xid][3].endswith(":qpid.management")
            assert shell.describe(xid) == "exchange qpid.management"
            if qmf_version == 1:
                assert shell.object_id(xid) != xoid  # another object id, the same short id
            assert "OK (0)" in await shell.execute(f"call {bid} echo 5 back")
            # the non-durable queue did not survive the restart: its id says so
            assert f"{qid} (deleted)" in await shell.execute(f"show {qid}")
            with pytest.raises(ShellError) as info:
                await shell.execute(f"call {qid} purge 0")
            assert str(info.value) == f"object {qid} (queue gone-q) no longer exists"
            assert info.value.code == EXIT_NOT_FOUND
            assert shell.describe(qid) == "queue gone-q (deleted)"
        finally:
            await shell.close()
    finally:
        await session.close()


def _listed_queues(shell: Shell, rows: list[list[str]]) -> list[str]:
    """The names of the queues of a ``list queue`` table; none is a console's own (the
    shell leaves them out unless --console-queues)."""
    names = [str(shell.values(int(row[0])).get("name")) for row in rows]
    assert [n for n in names if is_console_queue(n)] == [], names
    return names


async def test_a_stalled_qpidd_never_fills_the_destroyed_column(
        qpidd_fresh: Callable[[bool], Qpidd]) -> None:
    # issue 33: qpidd stalled, `list queue` timed out, then qpidd's agent stopped
    # heartbeating and left: every queue was marked destroyed until the next answer
    qpidd = qpidd_fresh(False)
    session = Session(manage_connections=True, timeout=2.0, reconnect_max_delay=1.0)
    try:
        await session.add_broker(qpidd.url, timeout=10.0)
        shell = Shell(session, emit=lambda _text: None)
        await shell.start()
        # taken after the shell's own subscriptions: what reaches this one has reached
        # (and been handled by) the shell's first
        changes = session.agent_changes()
        try:
            (bid,) = shell.cached("broker")
            assert await shell.execute(f"call {bid} create queue stall-q {{}} false") \
                == "OK (0)"
            live = _rows(await shell.execute("list queue"))
            assert "stall-q" in _listed_queues(shell, live)
            assert all(row[2] == "-" for row in live)
            qid = _queue_ids(shell)["stall-q"]
            os.kill(qpidd.pid, signal.SIGSTOP)
            try:
                await wait_until(lambda: qpidd.is_stopped(), 5, message="qpidd stopped")
                timed_out = await shell.execute("list queue")  # a timed-out answer
                assert "did not finish within" in timed_out
                while (await changes.get(timeout=30))[0] != "removed":
                    pass  # qpidd's agent stopped heartbeating and left
                await asyncio.sleep(0)  # the shell's background tasks had their turn
                without_agent = await shell.execute("list queue")
                assert "no agent is known" in without_agent
            finally:
                os.kill(qpidd.pid, signal.SIGCONT)
            for listing in (timed_out, without_agent):
                rows = _rows(listing)
                _listed_queues(shell, rows)
                assert {row[0] for row in rows} >= {row[0] for row in live}
                assert all(row[2] == "-" for row in rows), listing
            assert "(deleted)" not in await shell.execute(f"show {qid}")
            await wait_until(lambda: session.get_agents(), 30, message="qpidd's agent back")
            # with manage_connections the session may have reconnected meanwhile: qpidd
            # then really deletes the queues of its first connection.  Those are the
            # consoles' own, which the listing leaves out: the rows it shows (stall-q and
            # any other queue of the broker) are never marked destroyed, in every order
            back = _rows(await shell.execute("list queue"))
            assert "stall-q" in _listed_queues(shell, back)
            assert all(row[2] == "-" for row in back), back
        finally:
            await shell.close()
    finally:
        await session.close()


async def test_piped_shell_on_qpidd_notes_the_restart_and_goes_on(
        qpidd_fresh: Callable[[bool], Qpidd], tmp_path: Path) -> None:
    qpidd = qpidd_fresh(False)
    shell = await Piped.start("shell", _env(qpidd.url, tmp_path))
    try:
        await shell.send("list broker")
        await shell.wait_for(rf"^Objects of type {PACKAGE}:broker$")
        await asyncio.to_thread(qpidd.stop)
        await shell.wait_for(r"^connection to \S+ lost; reconnecting \.\.\.$", "stderr")
        await shell.send("list queue")
        await shell.wait_for(r"^error: not connected to \S+; reconnecting in the background",
                             "stderr")
        await asyncio.to_thread(qpidd.start_again)
        await shell.wait_for(r"^reconnected to \S+$", "stderr", 30)
        mark = len(shell.stdout)
        await shell.send("list broker")
        await shell.wait_for(rf"^Objects of type {PACKAGE}:broker$", start=mark)
        code = await shell.finish()
    finally:
        await shell.kill()
    assert code == EXIT_UNREACHABLE, shell.stderr  # the first failed command's
    assert "Traceback" not in shell.stderr, shell.stderr
    # stdout carries the commands' output only
    assert "reconnect" not in shell.stdout and "error" not in shell.stdout


# --------------------------------------------------------------------------- one-line errors


async def test_internal_errors_are_one_line(env: Env, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    async def broken(args: list[str]) -> str:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setitem(env.shell._commands, "agents", broken)
    with pytest.raises(ShellError) as info:
        await env.run("agents")
    assert str(info.value) == "internal error: RuntimeError: boom"
    _report(info.value, debug=False)
    assert capsys.readouterr().out == "error: internal error: RuntimeError: boom\n"
    _report(info.value, debug=True)
    out = capsys.readouterr().out
    assert out.startswith("error: internal error: RuntimeError: boom\nTraceback")
    assert "in broken" in out


def test_log_lines_are_one_line() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(_OneLineFormatter("qmf: %(levelname)s: %(message)s"))
    log = logging.getLogger("qmf_async.test-one-line")
    log.addHandler(handler)
    log.propagate = False
    try:
        try:
            raise ValueError("bad\nvalue")
        except ValueError:
            log.exception("something failed")
    finally:
        log.removeHandler(handler)
    assert stream.getvalue() == "qmf: ERROR: something failed (ValueError: bad)\n"


async def test_completion_says_what_each_id_is(env: Env) -> None:
    from prompt_toolkit.document import Document

    from qmf_async.tools.cli.shell import _completer

    (bid,) = env.ids("broker").values()
    orders = env.ids("queue")["orders"]
    meta = dict(env.shell.complete_meta("show "))
    assert meta[str(orders)] == "queue orders"
    assert meta[str(bid)] == "broker amqp-broker"
    assert [c for c, _ in env.shell.complete_meta("show ")] == env.shell.complete("show ")
    assert dict(env.shell.complete_meta("call "))[str(orders)] == "queue orders"
    purge = dict(env.shell.complete_meta(f"call {orders} pu"))
    assert purge == {"purge": "Discard all or some messages on a queue"}
    assert env.shell.complete_meta("sh") == [("show", "")]
    # prompt_toolkit's menu shows it
    completions = list(_completer(env.shell).get_completions(
        Document(f"show {orders}"), None))
    assert [(c.text, c.display_meta_text) for c in completions] \
        == [(str(orders), "queue orders")]


async def test_repl_on_qpidd_survives_a_restart(
        qpidd_fresh: Callable[[bool], Qpidd], tmp_path: Path) -> None:
    qpidd = qpidd_fresh(False)
    count = 'print("queues", len(await session.get_objects(_class="queue")))'
    repl = await Piped.start("repl", _env(qpidd.url, tmp_path))
    try:
        await repl.send(count)
        await repl.wait_for(r"^queues \d+$")
        await asyncio.to_thread(qpidd.stop)
        await repl.wait_for(r"^connection to \S+ lost; reconnecting \.\.\.$", "stderr")
        mark = len(repl.stderr)
        await repl.send(count)
        error = await repl.wait_for(r"^error: NotConnectedError: not connected .*$", "stderr",
                                    start=mark)
        await repl.send("print('after the error')")  # the statement ended; the repl goes on
        await repl.wait_for(r"^after the error$")
        assert "Traceback" not in repl.stderr[mark:], repl.stderr
        assert repl.stderr[mark:].strip() == error[0], repl.stderr  # that one line only
        await asyncio.to_thread(qpidd.start_again)
        await repl.wait_for(r"^reconnected to \S+$", "stderr", 30)
        mark = len(repl.stdout)
        await repl.send(count)
        await repl.send("print(broker.connected, broker.reconnects)")
        await repl.wait_for(r"^queues \d+\nTrue 1$", start=mark)
        assert await repl.finish() == EXIT_OK, repl.stderr
    finally:
        await repl.kill()


async def test_repl_errors_of_the_library_are_one_line(bus: Bus, tmp_path: Path) -> None:
    async with running_bus(bus):  # a management broker answers at once
        await _check_repl_errors(bus.url, tmp_path)


async def _check_repl_errors(amqp_url: str, tmp_path: Path) -> None:
    script = "\n".join([
        "raise NotConnectedError('not connected to x\\nmore')",
        "1/0",  # the statement's own exception: as Python shows it
        "b = (await session.get_objects(_class='broker'))[0]",
        "await b.nosuch(1)",  # raised inside the library: one line too
        "print('done')",
    ]) + "\n"
    code, out, err = await _run_piped("repl", script, _env(amqp_url, tmp_path))
    assert code == EXIT_OK and out == "done\n", (out, err)
    assert "error: NotConnectedError: not connected to x\n" in err, err
    assert err.count("Traceback") == 1 and "ZeroDivisionError: division by zero" in err, err
    assert "error: AttributeError: broker object has no element or method 'nosuch'\n" in err
    # --debug: the library's exceptions with their tracebacks too
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "qmf_async", "repl", "--debug", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
        env=_env(amqp_url, tmp_path))
    out_b, err_b = await asyncio.wait_for(proc.communicate(script.encode()), 20)
    err = err_b.decode()
    assert proc.returncode == EXIT_OK and out_b == b"done\n", err
    assert err.count("Traceback") == 3 and "NotConnectedError: not connected to x" in err, err


async def test_repl_notes_land_above_the_prompt(bus: Bus, tmp_path: Path) -> None:
    """On a terminal, a background note (the connection lost, back) is written above
    the waiting prompt, which is drawn again below it with what was typed so far."""
    from .faultproxy import FaultProxy

    loop = asyncio.get_running_loop()
    parts = urlsplit(bus.url)
    proxy = FaultProxy(parts.hostname or "localhost", parts.port or 5672)
    await proxy.start()
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 132, 0, 0))
    received = bytearray()

    def on_readable() -> None:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            data = b""
        if not data:
            loop.remove_reader(master)
        received.extend(data)

    def screen(start: int = 0) -> str:
        return ANSI.sub(b"", bytes(received[start:])).decode(errors="replace")

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "qmf_async", "repl", "--wait", "0.1", stdin=slave,
        stdout=slave, stderr=slave, cwd=ROOT, start_new_session=True,
        env=_env(proxy.url(bus.url), tmp_path, TERM="xterm"))
    os.close(slave)
    os.set_blocking(master, False)
    loop.add_reader(master, on_readable)
    try:
        await wait_until(lambda: screen().endswith(">>> "), 15, message="the first prompt")
        mark = len(received)
        os.write(master, b"print(6")  # typed, not entered yet
        await wait_until(lambda: screen(mark).endswith("print(6"), 10, message="the echo")
        mark = len(received)
        proxy.cut()
        # the note on a line of its own, then the prompt again with the typed text
        note = r"(?:^|\r|\n)connection to \S+ lost; reconnecting \.\.\.\r?\n>>> print\(6$"
        await wait_until(lambda: re.search(note, screen(mark)), 15,
                         message=f"the note above the prompt: {screen(mark)!r}")
        proxy.restore()
        back = r"(?:^|\r|\n)reconnected to \S+\r?\n>>> print\(6$"
        await wait_until(lambda: re.search(back, screen(mark)), 30,
                         message=f"the second note above the prompt: {screen(mark)!r}")
        mark = len(received)
        os.write(master, b"*7)\r")  # the line typed before the notes is whole
        await wait_until(lambda: re.search(r"\n42\r?\n>>> $", screen(mark)), 10,
                         message=f"the statement's output: {screen(mark)!r}")
        os.write(master, b"exit()\r")
        assert await asyncio.wait_for(proc.wait(), 15) == EXIT_OK
    finally:
        loop.remove_reader(master)
        os.close(master)
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await proxy.close()
