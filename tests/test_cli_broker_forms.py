"""The ``qmf`` tools take the broker as the qpid tools do: argument parsing only."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

pytest.importorskip("rich")  # a guard only: the cli extra brings it

from qmf_async.errors import UsageError
from qmf_async.tools import cli
from qmf_async.tools.cli import _common, config

PARSER = cli._parser()
ROOT = Path(__file__).resolve().parent.parent

#: every subcommand that takes one broker (the positional URL and -b/--broker)
ONE_BROKER = ("stat", "queue-stats", "shell", "repl")
MULTI_BROKER = ("events", "collect", "exporter")
EXTRA = {"collect": ["--out", "/nonexistent-dataset"]}


def parse(*argv: str) -> argparse.Namespace:
    return PARSER.parse_args(list(argv))


def target(args: argparse.Namespace) -> str:
    """The URL the tool would connect to (as ``open_target`` / ``connect`` compute it)."""
    if args.command == "config":
        config._parse_words(args)
        config._split_words(args)
    return _common.resolve_url(args.url, args.broker)


@pytest.fixture(autouse=True)
def _no_qmf_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("QMF_URL", raising=False)


@pytest.mark.parametrize("tool", ONE_BROKER)
@pytest.mark.parametrize(
    ("given", "url"),
    [
        ("127.0.0.1:5673", "amqp://127.0.0.1:5673"),
        ("guest/guest@broker:5673", "amqp://guest:guest@broker:5673"),
        ("[::1]:5673", "amqp://[::1]:5673"),
        ("amqp://u:p@h:1/v", "amqp://u:p@h:1/v"),
    ],
)
def test_positional_and_dash_b(tool: str, given: str, url: str) -> None:
    assert target(parse(tool, given)) == url
    assert target(parse(tool, "-b", given)) == url
    assert target(parse(tool, "--broker", given)) == url


def test_stat_address_then_queues_view() -> None:
    args = parse("stat", "127.0.0.1:5673", "-q")
    assert args.queue == ""
    assert target(args) == "amqp://127.0.0.1:5673"


@pytest.mark.parametrize("tool", ONE_BROKER)
def test_url_and_broker_together_is_a_usage_error(tool: str) -> None:
    with pytest.raises(UsageError, match="not both"):
        target(parse(tool, "h1:5672", "-b", "h2:5672"))


@pytest.mark.parametrize("tool", ONE_BROKER)
def test_qmf_url_takes_qpid_forms(tool: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMF_URL", "guest/guest@host:5673")
    assert target(parse(tool)) == "amqp://guest:guest@host:5673"


def test_default_without_anything() -> None:
    assert target(parse("stat")) == _common.DEFAULT_URL


@pytest.mark.parametrize("tool", ONE_BROKER)
def test_bad_address_is_a_usage_error(tool: str) -> None:
    with pytest.raises(UsageError, match="1-65535"):
        target(parse(tool, "-b", "host:0"))
    assert _common.exit_code(UsageError("x")) == _common.EXIT_USAGE


def test_password_with_special_characters_survives() -> None:
    url = target(parse("stat", "-b", "admin/p@ss:w/rd@host:5673"))
    assert unquote(urlsplit(url).password or "") == "p@ss:w/rd"
    assert urlsplit(url).hostname == "host"


# --------------------------------------------------------------------------- config


def test_config_dash_b_is_the_broker_as_in_qpid_config() -> None:
    args = parse("config", "-b", "host:5673", "queues", "-r")
    assert target(args) == "amqp://host:5673"
    assert args.bindings is True
    # after the command words too, and -a/--broker-addr is the same
    args = parse("config", "queues", "-b", "u/p@h:9")
    assert target(args) == "amqp://u:p@h:9"
    assert args.bindings is False
    args = parse("config", "exchanges", "-a", "h:7", "--recursive")
    assert target(args) == "amqp://h:7"
    assert args.bindings is True
    # --bindings stays as a long name of -r
    args = parse("config", "queues", "--bindings")
    assert target(args) == _common.DEFAULT_URL
    assert args.bindings is True


def test_config_dash_b_and_dash_a_together_is_a_usage_error() -> None:
    args = parse("config", "-b", "h1:1", "queues", "-a", "h2:2")
    with pytest.raises(_common.ToolError, match="once") as err:
        target(args)
    assert err.value.code == _common.EXIT_USAGE


def test_config_dash_b_without_address_is_a_usage_error() -> None:
    args = parse("config", "queues", "-b")
    with pytest.raises(_common.ToolError, match="-b/--broker: expected one argument"):
        target(args)


@pytest.mark.parametrize(
    ("argv", "url", "command"),
    [
        (["config", "--broker", "127.0.0.1:5673", "queues"], "amqp://127.0.0.1:5673",
         ["queues"]),
        (["config", "queues", "-r", "--broker", "u/p@h:9"], "amqp://u:p@h:9", ["queues"]),
        (["config", "-b", "u/p@h:9", "queues", "-r"], "amqp://u:p@h:9", ["queues"]),
        (["config", "127.0.0.1:5673", "add", "queue", "q1"], "amqp://127.0.0.1:5673",
         ["add", "queue", "q1"]),
        (["config", "localhost", "queues"], "amqp://localhost:5672", ["queues"]),
        (["config", "[::1]:5673"], "amqp://[::1]:5673", []),
        (["config", "amqp://h:1/", "exchanges"], "amqp://h:1/", ["exchanges"]),
        (["config", "queues", "amqp://h:1/"], "amqp://h:1/", ["queues"]),
    ],
)
def test_config_forms(argv: list[str], url: str, command: list[str]) -> None:
    args = parse(*argv)
    config._parse_words(args)
    words = config._split_words(args)
    assert words == command
    assert _common.resolve_url(args.url, args.broker) == url


def test_config_plain_command_is_not_an_address() -> None:
    args = parse("config", "queues", "my-filter")
    config._parse_words(args)
    assert config._split_words(args) == ["queues", "my-filter"]
    assert args.url is None


# --------------------------------------------------------------------------- several brokers


@pytest.mark.parametrize("tool", MULTI_BROKER)
def test_multi_broker_tools(tool: str) -> None:
    args = parse(tool, *EXTRA.get(tool, []), "-b", "a:1", "--broker", "u/p@[::1]:3",
                 "amqp://b:2/", "c")
    assert _common.resolve_urls(args.urls, args.broker) == [
        "amqp://a:1",
        "amqp://u:p@[::1]:3",
        "amqp://b:2/",
        "amqp://c:5672",
    ]


@pytest.mark.parametrize("tool", MULTI_BROKER)
def test_multi_broker_default_and_env(tool: str, monkeypatch: pytest.MonkeyPatch) -> None:
    args = parse(tool, *EXTRA.get(tool, []))
    assert _common.resolve_urls(args.urls, args.broker) == [_common.DEFAULT_URL]
    monkeypatch.setenv("QMF_URL", "127.0.0.1:5673")
    assert _common.resolve_urls(args.urls, args.broker) == ["amqp://127.0.0.1:5673"]
    with pytest.raises(UsageError):
        _common.resolve_urls(["h:99999"])


def test_pipeline_takes_no_broker() -> None:
    with pytest.raises(SystemExit):
        PARSER.parse_args(["pipeline", "--dataset", "d", "--out", "o", "-b", "h:1"])


def test_bad_address_exits_with_the_usage_code() -> None:
    # a process of its own: main() sets up logging for a command line
    done = subprocess.run(
        [sys.executable, "-m", "qmf_async.tools.cli", "stat", "-b", "host:0"],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == _common.EXIT_USAGE
    err = done.stderr.strip().splitlines()
    assert len(err) == 1 and "1-65535" in err[0], done.stderr


# ------------------------------------------- the role, the demo agent and the dashboard

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = {
    "role": [sys.executable, "-m", "qmf_async.agent.broker"],
    "demo": [sys.executable, str(ROOT / "examples" / "demo_agent.py")],
    "dashboard": [sys.executable, str(ROOT / "examples" / "web_dashboard" / "app.py")],
}


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_without_a_broker_the_programs_say_how_to_give_one(program: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "QMF_URL"}
    proc = subprocess.run(PROGRAMS[program], capture_output=True, text=True, timeout=60,
                          env=env)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].endswith(
        "error: no broker: give -b ADDRESS, or set QMF_URL")


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_the_programs_take_b_url_and_qmf_url(program: str) -> None:
    proc = subprocess.run([*PROGRAMS[program], "--help"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0
    assert "-b ADDRESS, --broker ADDRESS, --url ADDRESS" in proc.stdout
    assert "$QMF_URL" in proc.stdout


@pytest.mark.integration
def test_the_role_starts_from_a_qpid_style_address_in_qmf_url() -> None:
    env = {**os.environ, "QMF_URL": "guest/guest@localhost:5672"}
    proc = subprocess.Popen(PROGRAMS["role"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("qmf-async management broker ready:"), proc.stderr.read()
        assert line.rstrip().endswith("on amqp://localhost:5672/%2F")
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize("command", ["stat", "config", "events", "queue-stats", "shell"])
def test_an_unknown_option_shows_the_subcommands_usage(
        command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main([command, "--no-such-option"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: qmf {command} ")
    assert err.rstrip().endswith(f"qmf {command}: error: unrecognized arguments: "
                                 f"--no-such-option")
