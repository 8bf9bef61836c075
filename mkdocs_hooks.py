"""MkDocs hooks of the documentation site (``hooks:`` in mkdocs.yml).

The docstrings use Sphinx roles (``:class:`Session```, ``:meth:`~Agent.start```), which
mkdocstrings renders literally as ``:meth:<code>start</code>``; this turns them into
plain code, as Sphinx would show them (``~`` keeps only the last name).
"""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:class|meth|func|attr|data|mod|exc|obj|const):<code>(~?)([^<]*)</code>")


def _plain(match: re.Match[str]) -> str:
    tilde, target = match.groups()
    return f"<code>{target.rsplit('.', 1)[-1] if tilde else target}</code>"


def on_page_content(html: str, **kwargs: Any) -> str:
    return _ROLE.sub(_plain, html)
