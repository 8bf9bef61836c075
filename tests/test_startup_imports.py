"""Start-up: a transport's modules (and its client library) load only when it is
picked.  ``import qmf_async``, the CLI and ``qmf --version`` load no transport;
``qmf stat -q`` on qpidd loads no aiormq once the place is known to speak AMQP 1.0
(the automatic transport's file of AMQP 1.0 places), and never proton; a stale entry
(the port now serves RabbitMQ) costs one attempt, not a failure.  Each check runs in
a fresh interpreter and reads its ``sys.modules``.

The packages are lazy (PEP 562): ``import qmf_async`` loads none of its layers, a public
name loads the module that defines it on first use, and ``qmf stat -q`` on qpidd loads
neither QMF v2's modules (it speaks v1 there), nor the agent side, nor rich (on a pipe),
nor anything an error path needs only (docs/benchmarks.md, "Start-up").  Each lazy
``__init__`` lists its names twice, as ``if TYPE_CHECKING`` imports for type checkers and
as the ``_LAZY`` table read at run time: :func:`test_each_lazy_package_lists_its_names_once`
holds them to the same names."""

from __future__ import annotations

import argparse
import ast
import importlib
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


#: runs the code of argv[1] (then ``qmf ARGS`` with any more arguments) and prints every
#: module it loaded on the last line of stderr
_MODULES_PROBE = """
import atexit, sys
atexit.register(lambda: sys.stderr.write("MODULES " + " ".join(sorted(sys.modules)) + "\\n"))
exec(sys.argv[1])
if sys.argv[2:]:
    import qmf_async.tools.cli
    sys.argv[0] = "qmf"
    sys.exit(qmf_async.tools.cli.main(sys.argv[2:]))
"""


def modules(code: str, *args: str, **env: str) -> tuple[set[str], str]:
    """Every module a fresh interpreter loaded running ``code`` (then ``qmf ARGS`` when
    any are given), and what it printed on stdout."""
    done = subprocess.run([sys.executable, "-c", _MODULES_PROBE, code, *args],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, **env}, check=False)
    last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    assert done.returncode == 0 and last.startswith("MODULES"), done.stderr
    return set(last.split()[1:]), done.stdout


def ours(names: set[str]) -> set[str]:
    return {n for n in names if n == "qmf_async" or n.startswith("qmf_async.")}


#: what ``qmf stat -q`` on qpidd must not load: QMF v2 (the tool speaks v1 to qpidd),
#: the agent side, the other transports, rich on a pipe, and modules that only an error
#: path or a file write needs
NOT_FOR_STAT = frozenset({
    "qmf_async.wire._v2", "qmf_async.wire._v2records",
    "qmf_async.protocol._console_v2", "qmf_async.protocol._agent",
    "qmf_async.protocol._agent_v2", "qmf_async.protocol._role", "qmf_async.console._v2",
    "qmf_async.console._v2parts",
    "qmf_async.agent", "qmf_async.classic", "qmf_async.exporter",
    "qmf_async.transport._aiormq", "qmf_async.transport._aiormq_glue", "aiormq", "pamqp",
    "proton",
    "rich", "difflib", "tempfile", "decimal",
    # argparse's width (shutil, with bz2 and lzma), a timestamp's format, the sequence
    # numbers' and the reconnect jitter's randomness, the selectors' number types
    "shutil", "bz2", "lzma", "datetime", "dataclasses", "random", "numbers",
})


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


# --------------------------------------------------------------------------- lazy packages

ROOT = Path(__file__).resolve().parent.parent
#: the packages whose ``__init__`` imports on first use (PEP 562 ``__getattr__``)
LAZY_PACKAGES = ("qmf_async", "qmf_async.wire", "qmf_async.protocol", "qmf_async.runtime",
                 "qmf_async.console", "qmf_async.agent", "qmf_async.classic",
                 "qmf_async.exporter", "qmf_async.tools.pipeline")


def _type_checking_imports(package: str) -> dict[str, str]:
    """public name -> ``module`` or ``module:name`` of the ``if TYPE_CHECKING:`` imports
    of ``package``'s ``__init__``, written as its ``_LAZY`` table writes them."""
    path = ROOT / package.replace(".", "/") / "__init__.py"
    out: dict[str, str] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) \
                and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom), ast.dump(stmt)
                module = "." * stmt.level + (stmt.module or "")
                for alias in stmt.names:
                    public = alias.asname or alias.name
                    out[public] = module if public == alias.name else f"{module}:{alias.name}"
    return out


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_each_lazy_package_lists_its_names_once(package: str) -> None:
    mod = importlib.import_module(package)
    table: dict[str, str] = mod._LAZY
    assert _type_checking_imports(package) == table
    # every public name resolves, to the object of the module that defines it
    for name in mod.__all__:
        value = getattr(mod, name)
        if name in table:
            where, _, attribute = table[name].partition(":")
            source = importlib.import_module(where, package)
            assert value is getattr(source, attribute or name), name
    assert set(mod.__all__) <= set(dir(mod))
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        _ = mod.no_such_name


def test_importing_the_package_loads_no_layer() -> None:
    names, _ = modules("import qmf_async; qmf_async.__version__")
    assert ours(names) == {"qmf_async", "qmf_async.lazy"}, sorted(ours(names))
    assert "asyncio" not in names and "attrs" not in names
    # a name loads what defines it, and only that
    # (errors reads the status table from names, the one home of the bus's facts)
    names, _ = modules("from qmf_async import QmfError, UsageError")
    assert ours(names) == {"qmf_async", "qmf_async.lazy", "qmf_async.errors",
                           "qmf_async.names"}, sorted(ours(names))
    names, _ = modules("from qmf_async.wire import ClassKey")
    assert ours(names) == {"qmf_async", "qmf_async.lazy", "qmf_async.wire",
                           "qmf_async.wire._values", "qmf_async.errors",
                           "qmf_async.names", "qmf_async.frozen"}, sorted(ours(names))
    names, _ = modules("from qmf_async import Session")
    assert not ours(names) & NOT_FOR_STAT, sorted(ours(names) & NOT_FOR_STAT)


def test_qmf_version_loads_neither_asyncio_nor_the_library() -> None:
    names, out = modules("pass", "--version")
    assert out.startswith("qmf-async "), out
    assert ours(names) == {"qmf_async", "qmf_async.lazy", "qmf_async.tools",
                           "qmf_async.tools.cli", "qmf_async.tools.cli._help"}, \
        sorted(ours(names))
    assert "asyncio" not in names and "logging" not in names


def test_qmf_stat_on_qpidd_loads_only_what_it_needs(qpidd_stock: Qpidd,
                                                    tmp_path: Path) -> None:
    cache = tmp_path / "places.json"
    target = parse_url(qpidd_stock.url)
    cache.write_text(json.dumps({"1.0": [f"{target.host}:{target.port}"]}))
    names, out = modules("pass", "stat", "-q", "-b", qpidd_stock.address,
                         QMF_PROTOCOL_CACHE=str(cache), QMF_AMQP10="")
    assert out.startswith("Queues\n"), out
    assert not names & NOT_FOR_STAT, sorted(names & NOT_FOR_STAT)
    assert "qmf_async.transport._native" in names


@pytest.mark.parametrize("own_command_line", [True, False])
def test_qmf_freezes_its_imports_only_as_the_program(own_command_line: bool) -> None:
    """``qmf`` as the program (``main()``: the script, ``python -m qmf_async``) keeps the
    collector off while it imports and freezes what it imported; ``main(argv)`` from a
    caller (tests, embedding) leaves the collector as it was."""
    call = "main()" if own_command_line else "main(['--version'])"
    code = ("import atexit, gc, sys\n"
            "atexit.register(lambda: sys.stderr.write("
            "f'GC {gc.isenabled()} {gc.get_freeze_count()}\\n'))\n"
            "sys.argv = ['qmf', '--version']\n"
            "from qmf_async.tools.cli import main\n"
            f"{call}\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0 and done.stdout.startswith("qmf-async "), done.stderr
    enabled, frozen = done.stderr.split()[-2:]
    assert enabled == "True"
    assert (int(frozen) > 0) == own_command_line, done.stderr


def test_qmf_stat_ends_its_process_at_once(qpidd_stock: Qpidd, tmp_path: Path) -> None:
    """``qmf stat`` as the program ends with ``os._exit`` once done (its output and log
    handlers flushed): no interpreter teardown, so no atexit handler runs; the output
    and the exit codes are whole.  ``qmf --version`` ends as usual."""
    cache = tmp_path / "places.json"
    target = parse_url(qpidd_stock.url)
    cache.write_text(json.dumps({"1.0": [f"{target.host}:{target.port}"]}))
    code = ("import atexit, sys\n"
            "atexit.register(lambda: sys.stderr.write('ATEXIT\\n'))\n"
            "sys.argv = ['qmf', *sys.argv[1:]]\n"
            "from qmf_async.tools.cli import main\n"
            "sys.exit(main())\n")
    env = {**os.environ, "QMF_PROTOCOL_CACHE": str(cache)}

    def qmf(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                              text=True, timeout=60, env=env, check=False)

    done = qmf("stat", "-q", "-b", qpidd_stock.address)
    assert done.returncode == 0 and "ATEXIT" not in done.stderr, done.stderr
    assert done.stdout.startswith("Queues\nqueue ") and done.stdout.endswith("\n"), done.stdout
    done = qmf("stat", "-q", "no-such-queue", "-b", qpidd_stock.address)
    assert done.returncode == 5 and "ATEXIT" not in done.stderr, done.stderr
    assert "no queue named 'no-such-queue'" in done.stderr
    done = qmf("--version")
    assert done.returncode == 0 and done.stderr == "ATEXIT\n", done.stderr


@pytest.mark.parametrize("columns", [None, "37", "0", "wide"])
def test_the_help_width_is_shutils(monkeypatch: pytest.MonkeyPatch, columns: str | None) -> None:
    """The tools' help formatters read the terminal's width as argparse does (through
    shutil), without importing shutil."""
    import shutil

    from qmf_async.tools.cli._help import RAW_DESCRIPTION, terminal_columns

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert terminal_columns() == shutil.get_terminal_size().columns
    made = RAW_DESCRIPTION(prog="qmf stat")
    assert isinstance(made, argparse.RawDescriptionHelpFormatter)
    assert made._width == argparse.RawDescriptionHelpFormatter(prog="qmf stat")._width
