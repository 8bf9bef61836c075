"""``qmf stat``'s command lines as qpid-stat takes them (argument parsing only):
``-q [options] [queue-name]``, ``--acl``, and ``-L`` with ``-S``."""

from __future__ import annotations

import argparse

import pytest

pytest.importorskip("rich")  # a guard only: the cli extra brings it

from qmf_async.errors import UsageError
from qmf_async.tools import cli
from qmf_async.tools.cli import _common, stat

PARSER = cli._parser()


@pytest.fixture(autouse=True)
def _no_qmf_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("QMF_URL", raising=False)


def resolved(*argv: str) -> tuple[str | None, str]:
    """(the view's queue after ``run`` sorted the positionals out, the broker URL)."""
    args: argparse.Namespace = PARSER.parse_args(["stat", *argv])
    if args.queue is not None:
        stat._queue_argument(args)
    return args.queue, _common.resolve_url(args.url, args.broker)


@pytest.mark.parametrize("argv", [
    ("-q", "-b", "h:5673", "orders"),   # qpid-stat -q [options] [queue-name]
    ("-b", "h:5673", "-q", "orders"),
    ("-q", "orders", "-b", "h:5673"),
    ("-q", "orders", "h:5673"),
    ("h:5673", "-q", "orders"),
])
def test_one_queue_forms(argv: tuple[str, ...]) -> None:
    assert resolved(*argv) == ("orders", "amqp://h:5673")


@pytest.mark.parametrize("argv", [
    ("-q", "-b", "h:5673"),
    ("-b", "h:5673", "-q"),
    ("h:5673", "-q"),
    ("-q", "amqp://h:5673"),
])
def test_queue_listing_forms(argv: tuple[str, ...]) -> None:
    assert resolved(*argv) == ("", "amqp://h:5673")


def test_url_and_broker_without_q_stay_a_usage_error() -> None:
    with pytest.raises(UsageError, match="not both"):
        resolved("h1:5672", "-b", "h2:5672")


def test_acl_view_and_its_exclusivity() -> None:
    assert PARSER.parse_args(["stat", "--acl"]).view == "acl"
    with pytest.raises(SystemExit):
        PARSER.parse_args(["stat", "--acl", "-q"])


def test_limit_counts_only_with_sort(capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{"queue": f"q{i}", "msg": i} for i in range(5)]
    args = argparse.Namespace(sort_by=None, increasing=False, limit=2, json=True)
    stat._print_rows(args, stat.QUEUE_COLUMNS, rows, "Queues")
    listed = capsys.readouterr().out
    assert all(f'"q{i}"' in listed for i in range(5))  # as qpid-stat: every row
    args.sort_by = "msg"
    stat._print_rows(args, stat.QUEUE_COLUMNS, rows, "Queues")
    captured = capsys.readouterr()
    assert '"q4"' in captured.out and '"q3"' in captured.out and '"q2"' not in captured.out
    assert "showing 2 of 5" in captured.err


def test_plain_table_is_laid_out_as_the_rich_one(capsys: pytest.CaptureFixture[str]) -> None:
    from qmf_async.tools.cli._render import render_table

    rows = [{"queue": "a-long-queue-name", "dur": True, "msg": 1234, "bytes": 2048},
            {"queue": "b", "dur": False, "msg": 5, "bytes": 12}]
    stat._plain_table(stat.QUEUE_COLUMNS, rows, "Queues")
    plain = capsys.readouterr().out
    render_table(stat.QUEUE_COLUMNS, rows, title="Queues")  # on a pipe here
    assert plain == capsys.readouterr().out
