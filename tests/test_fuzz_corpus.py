"""The kept fuzz corpora and the defect regressions, replayed without atheris.

Every file of ``fuzz/corpus/TARGET`` and ``fuzz/regressions/TARGET`` goes once through
the target's ``one_input``: it must return (the project's typed errors are caught
inside the target) -- any other exception, a failed round trip, or an input taking
more than a few seconds of CPU time is a defect.  A few seconds for all of them.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fuzz import CORPUS, REGRESSIONS, TARGETS
from fuzz import amqp10 as amqp10_target
from fuzz import selector as selector_target
from fuzz import v1 as v1_target
from fuzz import v2 as v2_target
from qmf_async import wire
from qmf_async.protocol._selector import Selector

MODULES = {"v1": v1_target, "v2": v2_target, "selector": selector_target,
           "amqp10": amqp10_target}


class Hang(Exception):
    pass


@contextlib.contextmanager
def cpu_limit(seconds: float) -> Iterator[None]:
    """Fail instead of hanging when the block spends ``seconds`` of this process's CPU
    time (CPU time, so a machine busy with other work does not trip it)."""
    def on_alarm(signum: int, frame: Any) -> None:
        raise Hang(f"still running after {seconds} s of CPU time")

    old = signal.signal(signal.SIGVTALRM, on_alarm)
    signal.setitimer(signal.ITIMER_VIRTUAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, old)


def _files(root: Path, target: str) -> list[Path]:
    d = root / target
    return sorted(d.iterdir()) if d.is_dir() else []


def test_every_target_has_a_corpus() -> None:
    assert set(MODULES) == set(TARGETS)
    for target in TARGETS:
        files = _files(CORPUS, target)
        assert len(files) >= 20, f"fuzz/corpus/{target} has {len(files)} files"
        assert sum(f.stat().st_size for f in files) < 2 * 1024 * 1024


@pytest.mark.parametrize("target", TARGETS)
def test_corpus_and_regressions(target: str) -> None:
    one_input = MODULES[target].one_input
    for path in _files(CORPUS, target) + _files(REGRESSIONS, target):
        with cpu_limit(5.0):
            one_input(path.read_bytes())


def _raise(exc: BaseException) -> Any:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise exc
    return fail


def test_targets_let_other_errors_escape(monkeypatch: pytest.MonkeyPatch) -> None:
    """The targets are not vacuous: an exception other than the typed ones escapes."""
    body = (CORPUS / "v1").iterdir().__next__().read_bytes()
    monkeypatch.setattr(wire, "decode", _raise(IndexError("v1")))
    with pytest.raises(IndexError):
        v1_target.one_input(b"\x00" + body[1:])
    monkeypatch.setattr(v2_target, "decode_amqp10_message", _raise(KeyError("v2")))
    with pytest.raises(KeyError):
        v2_target.one_input(b"\x00\x00\x53\x77\x40")
    monkeypatch.setattr(Selector, "parse", _raise(RecursionError("sel")))
    with pytest.raises(RecursionError):
        selector_target.one_input(b"x = 1")
