"""The documentation site builds without a warning (``mkdocs build --strict``)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


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
