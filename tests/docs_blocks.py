"""The code blocks of README.md and docs/*.md, as tests/test_docs.py runs them.

Sybil's Markdown lexers find the fenced blocks and the HTML-comment markers; this
module decides, for each Python and shell block, where it runs and what its output
must look like:

* A block runs against the RabbitMQ bus of the docs (the management-broker role and
  the demo agent on a vhost of the test) unless a marker says otherwise.
* ``<!-- docs-test: qpidd -->`` (directly before the block) runs it against a stock
  qpidd instead; ``<!-- docs-test: rabbitmq qpidd -->`` against both (the output shown
  is checked against the first one); ``<!-- docs-test: none -->`` needs no broker.
  ``<!-- docs-test-default: rabbitmq qpidd -->`` anywhere in a page sets that for the
  page's blocks that follow it.
* ``<!-- skip: next "reason" -->`` (Sybil's own marker) leaves the next block out, and
  ``<!-- skip: start "reason" -->`` ... ``<!-- skip: end -->`` every block between; the
  reason is required and is shown in the test report.
* A ```` ```text ```` block right after a block (nothing but blank lines between) is
  its output: what the block prints must have the same form (:func:`shape`: numbers,
  ids, hosts and vhosts aside), line for line as a set: every printed line has the form
  of a shown one and every shown line's form is printed; ``...`` in a shown line stands
  for any text (a message whose words differ by transport).  ``output=any`` in the
  ``docs-test`` marker checks only that every printed line has a shown form (for output
  that varies with timing).
* ``broker-killed`` in a ``docs-test: qpidd`` marker is for a loop that ends only when
  its broker is lost (``except ConnectionLostError``): the block runs alone against a
  qpidd of its own (with a queue ``orders``, as the tutorial's set-up makes), which is
  killed (SIGKILL) once the block has printed its first line; the
  block must then end by itself, without an error, within the block timeout.

A block reads the broker's URL from ``QMF_URL``; the runner also points the docs'
literal default addresses (``amqp://guest:guest@localhost:5672/``,
``127.0.0.1:5673``) at the test's brokers, and the web dashboard's (``127.0.0.1:8080``,
``--port 8080``) at a free port.  Blocks run in a fresh directory in which the clone's
``examples/`` and ``scripts/`` are linked, as if given from the clone's root.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import attrs
from sybil import Document, Region
from sybil.parsers.markdown.lexers import DirectiveInHTMLCommentLexer, FencedCodeBlockLexer

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: the languages run as Python and as shell
PYTHON = frozenset({"python", "py", "python3"})
SHELL = frozenset({"sh", "bash", "shell", "console"})
BROKERS = ("rabbitmq", "qpidd", "none")


class MarkerError(ValueError):
    """A marker the runner cannot read (the message names the page and line)."""


@attrs.frozen
class Block:
    """One Python or shell block of a page."""

    page: str            # the path relative to the repository root
    line: int            # of the opening fence
    language: str        # "python" or "sh"
    source: str
    brokers: tuple[str, ...]
    skip: str | None     # the reason, when left out
    output: str | None   # the shown output (a text block right after), or None
    output_check: str    # "form" or "any"
    broker_killed: bool = False  # runs alone; its qpidd is killed after its first line

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def _regions(document: Document) -> Iterator[Region]:
    for region in FencedCodeBlockLexer(language=r"[\w+-]+")(document):
        yield Region(region.start, region.end,
                     parsed=("code", region.lexemes["language"], str(region.lexemes["source"])))
    for region in DirectiveInHTMLCommentLexer(directive=r"skip|docs-test(?:-default)?")(document):
        yield Region(region.start, region.end,
                     parsed=("marker", region.lexemes["directive"],
                             region.lexemes["arguments"].strip()))


def _parse_brokers(where: str, arguments: str) -> tuple[tuple[str, ...], str, bool]:
    brokers: list[str] = []
    check = "form"
    killed = False
    for word in arguments.replace(",", " ").split():
        if word == "broker-killed":
            killed = True
        elif word.startswith("output="):
            check = word.partition("=")[2]
            if check not in ("form", "any"):
                raise MarkerError(f"{where}: output= must be form or any, not {check!r}")
        elif word in BROKERS:
            brokers.append(word)
        else:
            raise MarkerError(f"{where}: unknown word {word!r} in a docs-test marker "
                              f"(brokers: {', '.join(BROKERS)}; output=form|any; "
                              f"broker-killed)")
    if not brokers:
        raise MarkerError(f"{where}: a docs-test marker names no broker")
    if "none" in brokers and len(brokers) > 1:
        raise MarkerError(f"{where}: 'none' goes alone")
    if killed and brokers != ["qpidd"]:
        raise MarkerError(f"{where}: broker-killed goes with qpidd alone")
    return tuple(brokers), check, killed


def _skip_reason(where: str, arguments: str) -> tuple[str, str | None]:
    action, _, reason = arguments.partition(" ")
    if action not in ("next", "start", "end"):
        raise MarkerError(f"{where}: skip: {action!r} (next, start or end)")
    if action == "end":
        return action, None
    try:
        text = ast.literal_eval(reason.strip()) if reason.strip() else None
    except (ValueError, SyntaxError):
        text = None
    if not isinstance(text, str) or not text.strip():
        raise MarkerError(f'{where}: skip: {action} needs a reason: '
                          f'<!-- skip: {action} "why it cannot run" -->')
    return action, text


def blocks(path: Path) -> list[Block]:
    """The Python and shell blocks of one page, with what their markers say.

    Raises:
        MarkerError: a marker is malformed, or a skip has no reason.
    """
    document = Document(path.read_text(), str(path))
    regions = sorted(_regions(document), key=lambda r: r.start)
    rel = str(path.relative_to(ROOT))
    default: tuple[str, ...] = ("rabbitmq",)
    pending_brokers: tuple[str, ...] | None = None
    pending_check = "form"
    pending_killed = False
    pending_skip: str | None = None
    skip_range: str | None = None
    found: list[Block] = []
    for i, region in enumerate(regions):
        kind, name, value = region.parsed
        line = document.text.count("\n", 0, region.start) + 1
        where = f"{rel}:{line}"
        if kind == "marker":
            if name == "skip":
                action, reason = _skip_reason(where, value)
                if action == "next":
                    pending_skip = reason
                elif action == "start":
                    skip_range = reason
                else:
                    if skip_range is None:
                        raise MarkerError(f"{where}: skip: end without skip: start")
                    skip_range = None
            elif name == "docs-test-default":
                default, _, killed = _parse_brokers(where, value)
                if killed:
                    raise MarkerError(f"{where}: broker-killed is for one block, "
                                      f"not a page's default")
            else:
                pending_brokers, pending_check, pending_killed = _parse_brokers(where, value)
            continue
        language = name.lower()
        if language not in PYTHON | SHELL:
            continue
        output = None
        if i + 1 < len(regions):
            after = regions[i + 1]
            if (after.parsed[0] == "code" and after.parsed[1] == "text"
                    and not document.text[region.end:after.start].strip()):
                output = after.parsed[2]
        found.append(Block(
            page=rel, line=line, language="python" if language in PYTHON else "sh",
            source=value, brokers=pending_brokers or default,
            skip=pending_skip or skip_range, output=output, output_check=pending_check,
            broker_killed=pending_killed))
        pending_brokers, pending_check, pending_skip = None, "form", None
        pending_killed = False
    if skip_range is not None:
        raise MarkerError(f"{rel}: skip: start without skip: end")
    return found


def all_blocks() -> list[Block]:
    return [b for page in PAGES for b in blocks(page)]


# --- the form of an output --------------------------------------------------------------

_FORMS = [
    # the vhost of an AMQP URL (the test bus runs on a vhost of its own)
    (re.compile(r"(amqps?://[^/\s]+)/[^\s,>')\"]*"), r"\1/<vhost>"),
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uuid>"),
    (re.compile(r"\b0x[0-9a-f]+\b"), "<hex>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b"), "<hex>"),
    (re.compile(r"\b(?:localhost|127\.0\.0\.1)\b"), "<host>"),
    (re.compile(r"\d+(?:\.\d+)?"), "0"),
]


def shape(line: str) -> str:
    """A line's form: ids, numbers, hosts and vhosts replaced by placeholders."""
    line = line.rstrip()
    for pattern, placeholder in _FORMS:
        line = pattern.sub(placeholder, line)
    return line


def _fits(form: str, shown_form: str) -> bool:
    """Whether a printed line's form fits a shown line's form; ``...`` in a shown line
    stands for any text (a message that differs by transport or timing)."""
    if "..." not in shown_form:
        return form == shown_form
    parts = (re.escape(part) for part in shown_form.split("..."))
    return re.fullmatch(".*".join(parts), form) is not None


def form_mismatch(printed: str, shown: str, check: str = "form") -> str | None:
    """Why ``printed`` does not have the form of ``shown`` (None when it does)."""
    got = [shape(line) for line in printed.splitlines() if line.strip()]
    want = [shape(line) for line in shown.splitlines() if line.strip()]
    unknown = [line for line, form in zip(
        [x for x in printed.splitlines() if x.strip()], got, strict=True)
        if not any(_fits(form, w) for w in want)]
    problems = []
    if unknown:
        problems.append("printed lines of no form shown:\n  " + "\n  ".join(unknown[:10]))
    if check == "form":
        missing = [line for line, form in zip(
            [x for x in shown.splitlines() if x.strip()], want, strict=True)
            if not any(_fits(g, form) for g in got)]
        if missing:
            problems.append("shown lines of no form printed:\n  " + "\n  ".join(missing[:10]))
    elif want and not got:
        problems.append("nothing printed")
    return "\n".join(problems) or None
