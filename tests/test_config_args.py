"""``qmf config``'s options as qpidd declare arguments, and its headers-binding words
(no broker: the side-by-side tests on qpidd are tests/test_parity_config_qpidd.py)."""

from __future__ import annotations

import argparse

import pytest

pytest.importorskip("rich")  # a guard only: the cli extra brings it

from qmf_async.tools import cli
from qmf_async.tools.cli import config
from qmf_async.tools.cli._common import EXIT_USAGE, ToolError

PARSER = cli._parser()


def parsed(*argv: str) -> argparse.Namespace:
    args = PARSER.parse_args(["config", *argv])
    config._parse_words(args)
    return args


@pytest.mark.parametrize(
    ("words", "match"),
    [
        (["all", "a=1", "b=x"], {"a": "1", "b": "x", "x-match": "all"}),
        (["any", "a=1,", "b=2"], {"a": "1", "b": "2", "x-match": "any"}),
        (["any", "a=1", ",", "b=2"], {"a": "1", "b": "2", "x-match": "any"}),
        (["all", "a=1,b=2"], {"a": "1", "b": "2", "x-match": "all"}),
        (["all", "k=v=w"], {"k": "v=w", "x-match": "all"}),
    ],
)
def test_headers_match_words(words: list[str], match: dict[str, str]) -> None:
    assert config.headers_match(words) == match


@pytest.mark.parametrize(
    ("words", "why"),
    [([], "got nothing"), (["some", "a=1"], "got 'some'"), (["all"], "at least one"),
     (["all", "a"], "'a' is not K=V"), (["any", "=1"], "'=1' is not K=V")],
)
def test_headers_match_refusals(words: list[str], why: str) -> None:
    with pytest.raises(ToolError, match=why) as err:
        config.headers_match(words)
    assert err.value.code == EXIT_USAGE


def test_argument_values_as_qpid_config_sends_them() -> None:
    assert config._parse_arguments(["n=5", "m=-3", "s=five", "t=true", "h=0x10", "e="]) == {
        "n": 5, "m": -3, "s": "five", "t": "true", "h": "0x10", "e": ""}
    with pytest.raises(ToolError, match="NAME=VALUE"):
        config._parse_arguments(["novalue"])


def test_store_options_need_durable(capsys: pytest.CaptureFixture[str]) -> None:
    assert config.queue_arguments(parsed("add", "queue", "q", "--file-count", "4")) == {}
    assert "--file-count ignored without --durable" in capsys.readouterr().err
    assert config.queue_arguments(parsed("add", "queue", "q", "--durable", "--file-count",
                                         "4")) == {"durable": True, "qpid.file_count": 4}


def test_limit_policies() -> None:
    assert config.queue_arguments(parsed("add", "queue", "q", "--limit-policy", "none")) == {}
    assert config.queue_arguments(parsed("add", "queue", "q", "--limit-policy",
                                         "self-destruct")) == {
        "qpid.policy_type": "self-destruct"}
    with pytest.raises(ToolError, match="ring-strict"):
        config.queue_arguments(parsed("add", "queue", "q", "--limit-policy", "ring-strict"))


def test_exchange_arguments() -> None:
    args = parsed("add", "exchange", "topic", "x", "--sequence", "--ive", "--durable",
                  "--replicate", "none", "--argument", "k=v")
    assert config.exchange_arguments(args, "topic") == {
        "exchange-type": "topic", "qpid.msg_sequence": 1, "qpid.ive": 1, "durable": True,
        "qpid.replicate": "none", "k": "v"}


@pytest.mark.parametrize(
    ("words", "why"),
    [(["list"], "list takes one TYPE"), (["shutdown", "now"], "takes no arguments"),
     (["add", "link"], "add queue NAME"), (["add", "link", "a", "b"], "one NAME"),
     (["bind", "ex"], "EXCHANGE QUEUE"), (["bind", "ex", "q", "a/b"], "'/'"),
     (["add", "exchange", "bogus", "x"], "exchange type 'bogus'"), (["frob"], "unknown")],
)
def test_usage_errors_before_connecting(words: list[str], why: str) -> None:
    with pytest.raises(ToolError, match=why) as err:
        config._check_usage(words[0], words[1:])
    assert err.value.code == EXIT_USAGE
