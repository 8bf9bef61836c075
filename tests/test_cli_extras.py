"""``qmf`` without an extra: the subcommands that need it say which one to install, in
one line, and every other subcommand (and ``qmf --version``) keeps working."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _qmf_without(missing: list[str], *argv: str) -> subprocess.CompletedProcess[str]:
    """Run ``qmf ARGV`` in a new interpreter where the ``missing`` packages cannot be
    imported (as when their extra is not installed)."""
    code = (
        "import sys\n"
        f"for name in {missing!r}:\n"
        "    sys.modules[name] = None\n"
        "from qmf_async.tools.cli import main\n"
        f"sys.exit(main({list(argv)!r}))\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, check=False)


@pytest.mark.parametrize("missing", [["aiohttp"], ["rich", "prompt_toolkit", "aiohttp"]])
def test_version_works_without_the_extras(missing: list[str]) -> None:
    done = _qmf_without(missing, "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("qmf-async ")


def test_bridge_without_aiohttp_names_its_extra_and_stat_still_works() -> None:
    done = _qmf_without(["aiohttp"], "bridge", "rabbitmq", "--interval", "1")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "qmf bridge: needs the cli,bridge extra (pip install 'qmf-async[cli,bridge]'): "
        "no module named 'aiohttp'"]
    # the other subcommands are whole: their own usage errors, not the extra's
    done = _qmf_without(["aiohttp"], "stat", "--no-such-option")
    assert done.returncode == 2
    assert "qmf stat: error: unrecognized arguments: --no-such-option" in done.stderr
    assert "extra" not in done.stderr


def test_without_the_cli_extra_every_tool_names_it() -> None:
    for command in ("stat", "config", "events"):
        done = _qmf_without(["rich", "prompt_toolkit"], command, "-b", "localhost:5672",
                            "--help")
        assert done.returncode == 2, (command, done.stderr)
        assert done.stderr.splitlines() == [
            f"qmf {command}: needs the cli extra (pip install 'qmf-async[cli]'): "
            "no module named 'rich'"], command
    # the help lists the subcommand with what it needs
    done = _qmf_without(["rich", "prompt_toolkit"], "--help")
    assert done.returncode == 0
    assert "(needs pip install 'qmf-async[cli]')" in done.stdout


def test_a_subcommand_loads_only_its_own_module() -> None:
    """``qmf stat`` does not import the other subcommands (the bridge's aiohttp, Spark's
    helpers, the exporter): a third of its start-up time; ``qmf --help`` lists them all."""
    code = (
        "import sys\n"
        "from qmf_async.tools.cli import SUBCOMMANDS, _parser\n"
        "_parser(sys.argv[1:])\n"
        "print(sorted(n for n, m in SUBCOMMANDS.items()\n"
        "             if 'qmf_async.tools.cli.' + m in sys.modules))\n"
        "print('aiohttp' in sys.modules)\n"
    )

    def loaded(*argv: str) -> list[str]:
        done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True,
                              text=True, timeout=60, cwd=ROOT, check=True)
        return done.stdout.splitlines()

    assert loaded("stat", "-b", "localhost") == ["['stat']", "False"]
    assert loaded("queue-stats") == ["['queue-stats']", "False"]
    assert loaded("--version") == ["[]", "False"]
    everything = loaded("--help")
    assert everything[0] == repr(sorted(SUBCOMMANDS_ALL))


SUBCOMMANDS_ALL = ["bridge", "collect", "config", "events", "exporter", "pipeline",
                   "queue-stats", "repl", "route", "shell", "stat"]


def test_no_runtime_extra_installs_proton() -> None:
    """AMQP 1.0 is built in: ``amqp10`` and ``classic`` are empty aliases (old install
    lines work) and no extra pulls python-qpid-proton, not even ``test`` (the suite's
    proton_peer tier installs it aside, scripts/test.sh)."""
    import re
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert extras["amqp10"] == [] and extras["classic"] == []

    def closure(name: str) -> set[str]:
        names: set[str] = set()
        for requirement in extras[name]:
            own = re.fullmatch(r"qmf-async\[([^\]]+)\]", requirement.replace(" ", ""))
            if own:
                for other in own.group(1).split(","):
                    names |= closure(other)
            else:
                names.add(re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower())
        return names

    pulling = sorted(name for name in extras if "python-qpid-proton" in closure(name))
    assert pulling == [], pulling
