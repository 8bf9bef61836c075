"""Start-up: a transport's modules (and its client library) load only when it is
picked.  ``import qmf_async``, the CLI and ``qmf --version`` load no transport;
``qmf stat -q`` on qpidd loads no aiormq once the place is known to speak AMQP 1.0
(the automatic transport's file of AMQP 1.0 places), and never proton; a stale entry
(the port now serves RabbitMQ) costs one attempt, not a
failure.  Each check runs in a fresh interpreter and reads its ``sys.modules``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from qmf_async import Session
from qmf_async.transport import _auto, parse_url

from .qpidd import Qpidd

#: runs ``qmf ARGS`` (or only imports, with no ARGS) and prints the top-level client
#: libraries it loaded on the last line of stderr
_PROBE = """
import atexit, sys
LIBS = ("aiormq", "pamqp", "proton", "_cproton")
atexit.register(lambda: sys.stderr.write("LOADED " + " ".join(
    sorted(m for m in sys.modules if m in LIBS)) + "\\n"))
import qmf_async
import qmf_async.tools.cli
if sys.argv[1:]:
    sys.argv[0] = "qmf"
    sys.exit(qmf_async.tools.cli.main(sys.argv[1:]))
"""


def loaded(*args: str, **env: str) -> tuple[set[str], str]:
    """The client libraries a fresh ``qmf ARGS`` loaded, and what it printed."""
    done = subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True,
                          text=True, timeout=60, env={**os.environ, **env}, check=False)
    last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    assert done.returncode == 0 and last.startswith("LOADED"), done.stderr
    return set(last.split()[1:]), done.stdout


def test_importing_the_package_and_the_cli_loads_no_transport() -> None:
    assert loaded()[0] == set()
    libs, out = loaded("--version")
    assert libs == set() and out.startswith("qmf-async "), out


def test_qmf_stat_on_qpidd_loads_no_aiormq_once_the_place_is_known(
        qpidd_stock: Qpidd, tmp_path: Path) -> None:
    cache = tmp_path / "places.json"
    env = {"QMF_PROTOCOL_CACHE": str(cache)}
    first, out = loaded("stat", "-q", "-b", qpidd_stock.address, **env)
    assert "aiormq" in first and "proton" not in first, first  # found by trying 0-9-1
    target = parse_url(qpidd_stock.url)
    assert json.loads(cache.read_text()) == {"1.0": [f"{target.host}:{target.port}"]}
    libs, again = loaded("stat", "-q", "-b", qpidd_stock.address, **env)
    assert libs == set(), libs
    assert again.splitlines()[:3] == out.splitlines()[:3], again
    # QMF_AMQP10=proton picked python-qpid-proton's transport once; it is not read now
    libs, _ = loaded("stat", "-q", "-b", qpidd_stock.address,
                     **{**env, "QMF_AMQP10": "proton"})
    assert libs == set(), libs


@pytest.mark.integration
async def test_a_stale_amqp10_place_falls_back_to_0_9_1_and_is_dropped(
        amqp_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = parse_url(amqp_url)
    place = f"{target.host}:{target.port}"
    cache = tmp_path / "places.json"
    cache.write_text(json.dumps({"1.0": [place, "elsewhere:5672"]}))
    monkeypatch.setenv("QMF_PROTOCOL_CACHE", str(cache))
    # (a new session finds the version for itself: nothing process-wide to forget)
    async with Session.connect(amqp_url, timeout=10.0) as session:
        (broker,) = session.brokers
        assert broker.transport is not None
        assert broker.transport.capabilities.protocol == "0-9-1"
    assert json.loads(cache.read_text()) == {"1.0": ["elsewhere:5672"]}


def test_where_the_amqp10_places_are_kept(monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    monkeypatch.delenv("QMF_PROTOCOL_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert _auto._cache_file() == tmp_path / "qmf-async" / "amqp10-places.json"
    _auto._remember(("brokerhost", 5672), "1.0")
    assert _auto._remembered(("brokerhost", 5672)) == "1.0"
    assert _auto._remembered(("brokerhost", 5673)) is None
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert _auto._cache_file() == tmp_path / "home" / ".cache" / "qmf-async" / \
        "amqp10-places.json"
    monkeypatch.setenv("QMF_PROTOCOL_CACHE", "")
    assert _auto._cache_file() is None and _auto._remembered(("brokerhost", 5672)) is None
    (tmp_path / "bad.json").write_text("not json")
    monkeypatch.setenv("QMF_PROTOCOL_CACHE", str(tmp_path / "bad.json"))
    assert _auto._remembered(("brokerhost", 5672)) is None  # a damaged file is no hint
