"""JMS message selectors, evaluated client-side over a mapping of names to values.

A selector is the SQL-92 conditional-expression subset of JMS 1.1 (section 3.8.1),
the language AMQP 1.0 brokers accept as the ``apache.org:selector-filter:string``
filter.  Here it filters QMF objects (names are properties and statistics) or
events (names are arguments) on the client.  The module is pure: no I/O.

Grammar, loosest binding first (keywords are case-insensitive, names are not)::

    OR  >  AND  >  NOT  >  comparisons  >  + -  >  * /  >  unary + -

    comparisons:  a = b   a <> b   a < b   a <= b   a > b   a >= b
                  x [NOT] BETWEEN lo AND hi
                  x [NOT] IN ('a', 'b', 3, ...)
                  x [NOT] LIKE 'pattern' [ESCAPE 'c']      (% any run, _ one char)
                  x IS [NOT] NULL

Literals: ``'strings'`` (``''`` is a quote), exact numbers ``42``, ``42L``,
``0x2A``, ``052`` (octal), approximate numbers ``1.5``, ``1e3``, ``.5``,
``7.``, ``2.5f``, and ``TRUE`` / ``FALSE``.  Names follow Java identifier rules
(letters, digits, ``_`` and ``$``, not starting with a digit, not a keyword);
as an extension a name may be double-quoted (``"odd-name"``, ``""`` is a quote).

Semantics (JMS three-valued logic):

* A missing name or a ``None`` value is NULL.  Comparisons and arithmetic with
  NULL are UNKNOWN; ``NOT UNKNOWN`` is UNKNOWN; ``FALSE AND UNKNOWN`` is FALSE,
  ``TRUE OR UNKNOWN`` is TRUE.  A selector *matches* only when it is TRUE.
* ``int`` and ``float`` are numbers and compare/promote freely; ``bool`` is a
  boolean, never a number (``TRUE = 1`` is UNKNOWN).  Strings compare with
  ``=`` and ``<>`` only; booleans likewise.
* Comparing values of unlike types (a string with a number, ...) is UNKNOWN.
  JMS 1.1 (and the Qpid C++ broker) make it FALSE; the two agree on whether a
  selector matches unless the comparison is negated or itself tested (``NOT``,
  ``= FALSE``, ``IS NULL``): ``NOT (x = 'a')`` with ``x = 1`` matches there
  and not here.  ``IN`` is UNKNOWN when no item matches and
  some item has the wrong type.
* Exact division truncates toward zero (Java ``long`` arithmetic); division
  by zero and float overflow are UNKNOWN.
* ``bytes`` are UTF-8 text when decodable.  Any other object (a UUID, an
  ObjectId...) is only ``=`` / ``<>`` / ``IN``-comparable with strings, via
  ``str(value)``; everything else about it is UNKNOWN.

Extensions beyond JMS: numeric ``IN`` items, LIKE / IN / IS NULL on any
expression (not only names), quoted names, hex/octal/suffixed numbers.
Mistakes visible without data (``'a' < 'b'``, ``x + 'a'``, ``5 AND x``) are
rejected by :meth:`Selector.parse`.

Parsing is an explicit-stack operator-precedence parser (no recursion); the
tree is compiled once into nested closures (LIKE patterns become anchored
segment matchers, IN lists frozensets, constant sub-expressions are folded).
Input is bounded: at most :data:`MAX_LENGTH` characters and :data:`MAX_DEPTH`
levels of nesting.
"""

from __future__ import annotations

import functools
import operator
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any, Final

from ..errors import ArgumentError, UsageError

__all__ = ["MAX_DEPTH", "MAX_LENGTH", "Selector", "SelectorError", "compile_selector"]

#: Longest accepted selector text, in characters.
MAX_LENGTH: Final = 64 * 1024
#: Deepest accepted nesting (parentheses, and operators inside operators).
MAX_DEPTH: Final = 200

_Fn = Callable[[Mapping[str, Any]], Any]


class SelectorError(UsageError, ValueError):
    """A selector text is not valid.

    Attributes: ``reason`` (the message without the location), ``text`` (the
    selector), ``position`` (0-based character offset), ``line`` and ``column``
    (1-based).  ``str()`` shows the offending line with a caret under it.
    """

    def __init__(self, reason: str, text: str, position: int) -> None:
        position = max(0, min(position, len(text)))
        self.reason = reason
        self.text = text
        self.position = position
        self.line = text.count("\n", 0, position) + 1
        line_start = text.rfind("\n", 0, position) + 1
        self.column = position - line_start + 1
        super().__init__(_format_error(reason, text, position, self.line, line_start))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.reason, self.text, self.position))


def _format_error(reason: str, text: str, position: int, line: int, line_start: int) -> str:
    end = text.find("\n", position)
    src = text[line_start:len(text) if end < 0 else end].rstrip("\r")
    col = position - line_start
    where = f"line {line}, column {col + 1}" if "\n" in text else f"column {col + 1}"
    lo, hi = max(0, col - 50), min(len(src), col + 30)
    head = "..." if lo else ""
    tail = "..." if hi < len(src) else ""
    before = src[lo:col]
    pad = " " * len(head) + "".join(c if c == "\t" else " " for c in before)
    return f"{reason} at {where}\n    {head}{src[lo:hi]}{tail}\n    {pad}^"


# --------------------------------------------------------------------------- lexer

_KEYWORDS: Final = frozenset(
    {"NOT", "AND", "OR", "BETWEEN", "LIKE", "IN", "IS", "ESCAPE", "NULL", "TRUE", "FALSE"}
)

#: the lexer's patterns, compiled on the first selector (not at import: start-up)
_TOKEN_PATTERN: Final = (
    r"""
      (?P<ws>\s+)
    | (?P<hex>0[xX][0-9a-fA-F]+[lL]?)
    | (?P<float>(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?
               |[0-9]+(?:[eE][+-]?[0-9]+[fFdD]?|[fFdD]))
    | (?P<int>[0-9]+[lL]?)
    | (?P<str>'[^']*(?:''[^']*)*')
    | (?P<qid>"[^"]*(?:""[^"]*)*")
    | (?P<id>(?:[^\W\d]|\$)[\w$]*)
    | (?P<bad>==|!=|&&|\|\|)
    | (?P<op><>|<=|>=|[=<>+\-*/(),])
    """
)


@functools.cache
def _lexer() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The token pattern and the one that may not follow a number."""
    return re.compile(_TOKEN_PATTERN, re.VERBOSE), re.compile(r"[\w$.]")


_BAD_HINTS: Final = {
    "==": "use '=' for equality",
    "!=": "use '<>' for inequality",
    "&&": "use AND",
    "||": "use OR",
}


class _Tok:
    __slots__ = ("end", "kind", "pos", "value")

    def __init__(self, kind: str, value: Any, pos: int, end: int) -> None:
        self.kind = kind  # num, str, id, kw, op, eof
        self.value = value
        self.pos = pos
        self.end = end


def _tokenize(text: str) -> list[_Tok]:
    tokens: list[_Tok] = []
    pos, n = 0, len(text)
    token_re, after_number_re = _lexer()
    match = token_re.match
    while pos < n:
        m = match(text, pos)
        if m is None:
            ch = text[pos]
            if ch == "'":
                raise SelectorError("unterminated string literal", text, pos)
            if ch == '"':
                raise SelectorError("unterminated quoted name", text, pos)
            raise SelectorError(f"unexpected character {ch!r}", text, pos)
        kind = m.lastgroup
        s = m.group()
        end = m.end()
        if kind == "ws":
            pass
        elif kind in ("hex", "float", "int"):
            if end < n and after_number_re.match(text, end):
                raise SelectorError(f"invalid number {text[pos:end + 1]!r}", text, pos)
            tokens.append(_Tok("num", _number(kind, s, text, pos), pos, end))
        elif kind == "str":
            tokens.append(_Tok("str", s[1:-1].replace("''", "'"), pos, end))
        elif kind == "qid":
            tokens.append(_Tok("id", s[1:-1].replace('""', '"'), pos, end))
        elif kind == "id":
            upper = s.upper() if s.isascii() else ""
            if upper in _KEYWORDS:
                tokens.append(_Tok("kw", upper, pos, end))
            else:
                tokens.append(_Tok("id", s, pos, end))
        elif kind == "bad":
            raise SelectorError(f"{s!r} is not a selector operator; {_BAD_HINTS[s]}", text, pos)
        else:
            tokens.append(_Tok("op", s, pos, end))
        pos = end
    tokens.append(_Tok("eof", None, n, n))
    return tokens


def _number(kind: str, s: str, text: str, pos: int) -> int | float:
    if kind == "hex":
        return int(s[2:].rstrip("lL"), 16)
    if kind == "float":
        value = float(s.rstrip("fFdD"))
        if value in (float("inf"), float("-inf")):
            raise SelectorError(f"number out of range: {s}", text, pos)
        return value
    digits = s.rstrip("lL")
    if len(digits) > 1 and digits[0] == "0":
        if not all(c in "01234567" for c in digits):
            raise SelectorError(f"invalid octal number {s!r}", text, pos)
        return int(digits, 8)
    try:
        return int(digits)
    except ValueError:  # more digits than int() accepts
        raise SelectorError("number too large", text, pos) from None


# --------------------------------------------------------------------------- tree

_TYPE_NAMES: Final = {"num": "a number", "str": "a string", "bool": "a boolean"}


class _Node:
    """A syntax-tree node.  ``type``: num, str, bool (a condition) or any (a name)."""

    __slots__ = ("args", "const", "depth", "folded", "op", "pos", "type", "value")

    def __init__(self, op: str, args: list[_Node], pos: int, type_: str, value: Any = None) -> None:
        self.op = op
        self.args = args
        self.pos = pos
        self.type = type_
        self.value = value
        self.depth: int = 1 + max((a.depth for a in args), default=0)
        self.const: bool = op == "lit" or (op != "id" and all(a.const for a in args))
        self.folded: Any = value if op == "lit" else None


class _Entry:
    """An operator (or open parenthesis) waiting on the parser's stack."""

    __slots__ = ("kind", "pos", "prec", "value")

    def __init__(self, kind: str, prec: int, pos: int, value: Any = None) -> None:
        self.kind = kind
        self.prec = prec
        self.pos = pos
        self.value = value


_CMP_OPS: Final = frozenset({"=", "<>", "<", "<=", ">", ">="})
_P_OR, _P_AND, _P_NOT, _P_CMP, _P_ADD, _P_MUL, _P_SIGN = 1, 2, 3, 4, 5, 6, 7


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.i = 0
        self.names: set[str] = set()
        self.ops: list[_Entry] = []
        self.operands: list[_Node] = []
        self.after_predicate = False  # the previous token ended an IN / LIKE / IS NULL
        self.predicate_done = False

    def error(self, reason: str, pos: int) -> SelectorError:
        return SelectorError(reason, self.text, pos)

    def describe(self, tok: _Tok) -> str:
        if tok.kind == "eof":
            return "the end of the selector"
        if tok.kind == "kw":
            return str(tok.value)
        src = self.text[tok.pos:tok.end]
        if len(src) > 24:
            src = src[:21] + "..."
        return src if tok.kind == "str" else f"'{src}'"

    def next(self) -> _Tok:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    # -- the operator-precedence loop

    def parse(self) -> _Node:
        if self.tokens[0].kind == "eof":
            raise self.error("empty selector", 0)
        ops, operands = self.ops, self.operands
        parens = 0
        want_operand = True
        while True:
            tok = self.next()
            kind, val = tok.kind, tok.value
            self.after_predicate, self.predicate_done = self.predicate_done, False
            if want_operand:
                top = ops[-1] if ops else None
                if kind == "num":
                    operands.append(_Node("lit", [], tok.pos, "num", val))
                    want_operand = False
                elif kind == "str":
                    operands.append(_Node("lit", [], tok.pos, "str", val))
                    want_operand = False
                elif kind == "id":
                    self.names.add(val)
                    operands.append(_Node("id", [], tok.pos, "any", val))
                    want_operand = False
                elif kind == "kw" and val in ("TRUE", "FALSE"):
                    operands.append(_Node("lit", [], tok.pos, "bool", val == "TRUE"))
                    want_operand = False
                elif kind == "kw" and val == "NOT":
                    if top is None or top.kind in ("(", "and", "or"):
                        ops.append(_Entry("not", _P_NOT, tok.pos, 1))
                    elif top.kind == "not":  # NOT NOT ...: keep the parity only
                        top.value += 1
                    else:
                        raise self.error("NOT is not allowed here (add parentheses)", tok.pos)
                elif kind == "kw" and val == "NULL":
                    raise self.error("NULL can only be used in IS NULL / IS NOT NULL", tok.pos)
                elif kind == "op" and val == "(":
                    parens += 1
                    if parens > MAX_DEPTH:
                        raise self.error(f"parentheses nested deeper than {MAX_DEPTH}", tok.pos)
                    ops.append(_Entry("(", 0, tok.pos))
                elif kind == "op" and val in ("+", "-"):
                    if top is not None and top.kind == "sign":  # - - x: keep the parity
                        top.value ^= val == "-"
                    else:
                        ops.append(_Entry("sign", _P_SIGN, tok.pos, val == "-"))
                elif kind == "eof":
                    raise self.error("unexpected end of the selector: expected an operand",
                                     tok.pos)
                else:
                    raise self.error(f"expected an operand, found {self.describe(tok)}", tok.pos)
                continue

            if kind == "kw":
                if val == "OR":
                    self.reduce(_P_OR, tok)
                    ops.append(_Entry("or", _P_OR, tok.pos))
                    want_operand = True
                elif val == "AND":
                    if not self.reduce(_P_AND, tok):  # else it was BETWEEN's AND
                        ops.append(_Entry("and", _P_AND, tok.pos))
                    want_operand = True
                elif val == "NOT":
                    nxt = self.next()
                    if nxt.kind != "kw" or nxt.value not in ("BETWEEN", "IN", "LIKE"):
                        raise self.error(
                            f"expected BETWEEN, IN or LIKE after NOT, found {self.describe(nxt)}",
                            nxt.pos)
                    want_operand = self.postfix(nxt, tok.pos, True)
                elif val in ("BETWEEN", "IN", "LIKE", "IS"):
                    want_operand = self.postfix(tok, tok.pos, False)
                else:
                    raise self.error(f"expected an operator, found {self.describe(tok)}", tok.pos)
            elif kind == "op":
                if val == ")":
                    self.reduce(_P_OR, tok)
                    if not ops:
                        raise self.error("unmatched ')'", tok.pos)
                    ops.pop()  # the "(" (only entry with precedence 0)
                    parens -= 1
                elif val in _CMP_OPS:
                    self.comparison_slot(tok)
                    ops.append(_Entry("cmp", _P_CMP, tok.pos, val))
                    want_operand = True
                elif val in ("+", "-"):
                    self.reduce(_P_ADD, tok)
                    ops.append(_Entry("arith", _P_ADD, tok.pos, val))
                    want_operand = True
                elif val in ("*", "/"):
                    self.reduce(_P_MUL, tok)
                    ops.append(_Entry("arith", _P_MUL, tok.pos, val))
                    want_operand = True
                else:
                    raise self.error(f"expected an operator, found {self.describe(tok)}", tok.pos)
            elif kind == "eof":
                self.reduce(_P_OR, tok)
                if ops:
                    raise self.error("unclosed '('", ops[-1].pos)
                break
            else:
                raise self.error(f"expected an operator, found {self.describe(tok)}", tok.pos)

        assert len(operands) == 1
        return self.cond(operands.pop())

    def reduce(self, min_prec: int, tok: _Tok) -> bool:
        """Apply stacked operators binding at least ``min_prec``.

        Returns True when ``tok`` (an AND) turned out to be the AND of a BETWEEN.
        """
        ops = self.ops
        while ops:
            top = ops[-1]
            if top.prec < min_prec:
                return False
            if top.kind == "between" and top.value[1] == 0:
                if tok.kind == "kw" and tok.value == "AND":
                    top.value = (top.value[0], 1)
                    return True
                raise self.error(f"expected AND in BETWEEN, found {self.describe(tok)}", tok.pos)
            ops.pop()
            self.apply(top)
        return False

    def comparison_slot(self, tok: _Tok) -> None:
        """Make the left operand of a comparison-level operator ready."""
        self.reduce(_P_ADD, tok)
        if self.after_predicate:
            raise self.error(
                f"{self.describe(tok)} cannot follow another comparison (add parentheses)", tok.pos)
        if self.ops and self.ops[-1].prec == _P_CMP:
            top = self.ops[-1]
            if top.kind == "between" and top.value[1] == 0:
                raise self.error(f"expected AND in BETWEEN, found {self.describe(tok)}", tok.pos)
            raise self.error(
                f"{self.describe(tok)} cannot follow another comparison (add parentheses)", tok.pos)

    def postfix(self, tok: _Tok, pos: int, negated: bool) -> bool:
        """BETWEEN / IN / LIKE / IS after an operand; returns whether an operand follows."""
        self.comparison_slot(tok)
        kw = tok.value
        if kw == "BETWEEN":
            self.ops.append(_Entry("between", _P_CMP, pos, (negated, 0)))
            return True
        x = self.operands.pop()
        if kw == "IN":
            node = self.in_list(x, negated, pos)
        elif kw == "LIKE":
            node = self.like(x, negated, pos)
        else:  # IS [NOT] NULL
            nxt = self.next()
            negated = nxt.kind == "kw" and nxt.value == "NOT"
            if negated:
                nxt = self.next()
            if nxt.kind != "kw" or nxt.value != "NULL":
                expected = "IS NOT" if negated else "IS"
                raise self.error(f"expected NULL after {expected}, found {self.describe(nxt)}",
                                 nxt.pos)
            node = self.node("isnull", [x], x.pos, "bool", negated, pos)
        self.operands.append(node)
        self.predicate_done = True
        return False

    def in_list(self, x: _Node, negated: bool, pos: int) -> _Node:
        tok = self.next()
        if tok.kind != "op" or tok.value != "(":
            raise self.error(f"expected '(' after IN, found {self.describe(tok)}", tok.pos)
        if self.tokens[self.i].kind == "op" and self.tokens[self.i].value == ")":
            raise self.error("empty IN list", self.tokens[self.i].pos)
        strs: set[str] = set()
        nums: set[int | float] = set()
        while True:
            tok = self.next()
            sign = None
            if tok.kind == "op" and tok.value in ("+", "-"):
                sign, tok = tok.value, self.next()
            if tok.kind == "num":
                nums.add(-tok.value if sign == "-" else tok.value)
            elif tok.kind == "str" and sign is None:
                strs.add(tok.value)
            else:
                raise self.error(
                    f"expected a string or number literal in the IN list, found "
                    f"{self.describe(tok)}", tok.pos)
            tok = self.next()
            if tok.kind == "op" and tok.value == ")":
                break
            if tok.kind != "op" or tok.value != ",":
                raise self.error(f"expected ',' or ')' in the IN list, found {self.describe(tok)}",
                                 tok.pos)
        if x.type == "bool":
            raise self.error("IN needs a string or number operand, found a boolean", x.pos)
        if (x.type == "num" and not nums) or (x.type == "str" and not strs):
            raise self.error(f"{_TYPE_NAMES[x.type]} cannot match any item of the IN list", pos)
        return self.node("in", [x], x.pos, "bool", (negated, frozenset(strs), frozenset(nums)),
                         pos)

    def like(self, x: _Node, negated: bool, pos: int) -> _Node:
        pat = self.next()
        if pat.kind != "str":
            raise self.error(f"LIKE needs a string literal pattern, found {self.describe(pat)}",
                             pat.pos)
        escape = None
        if self.tokens[self.i].kind == "kw" and self.tokens[self.i].value == "ESCAPE":
            self.i += 1
            esc = self.next()
            if esc.kind != "str" or len(esc.value) != 1:
                raise self.error(
                    f"ESCAPE needs a one-character string, found {self.describe(esc)}", esc.pos)
            escape = esc.value
        if x.type not in ("str", "any"):
            raise self.error(f"LIKE needs a string operand, found {_TYPE_NAMES[x.type]}", x.pos)
        matcher = _like_matcher(pat.value, escape)
        if matcher is None:
            raise self.error("LIKE pattern ends with the escape character", pat.pos)
        return self.node("like", [x], x.pos, "bool", (negated, matcher), pos)

    # -- building nodes (with the static type checks)

    def node(self, op: str, args: list[_Node], pos: int, type_: str, value: Any = None,
             op_pos: int | None = None) -> _Node:
        node = _Node(op, args, pos, type_, value)
        if node.depth > MAX_DEPTH:
            raise self.error(f"expression nested deeper than {MAX_DEPTH}",
                             pos if op_pos is None else op_pos)
        return node

    def cond(self, n: _Node) -> _Node:
        """``n`` used as a condition: booleans as they are, names cast, others rejected."""
        if n.type == "bool":
            return n
        if n.type == "any":
            return self.node("truth", [n], n.pos, "bool")
        raise self.error(f"expected a condition, found {_TYPE_NAMES[n.type]}", n.pos)

    def num(self, n: _Node, what: str) -> _Node:
        if n.type in ("num", "any"):
            return n
        raise self.error(f"{what} needs numbers, found {_TYPE_NAMES[n.type]}", n.pos)

    def apply(self, e: _Entry) -> None:
        st = self.operands
        kind = e.kind
        if kind in ("and", "or"):
            right = self.cond(st.pop())
            left = self.cond(st.pop())
            if left.op == kind:  # flatten chains: evaluation loops instead of recursing
                left.args.append(right)
                left.depth = max(left.depth, right.depth + 1)
                left.const = left.const and right.const
                if left.depth > MAX_DEPTH:
                    raise self.error(f"expression nested deeper than {MAX_DEPTH}", e.pos)
                st.append(left)
            else:
                st.append(self.node(kind, [left, right], left.pos, "bool", None, e.pos))
        elif kind == "not":
            x = self.cond(st.pop())
            st.append(self.node("not", [x], e.pos, "bool") if e.value % 2 else x)
        elif kind == "sign":
            x = self.num(st.pop(), "unary minus" if e.value else "unary plus")
            if not e.value:
                st.append(x if x.type == "num" else self.node("pos", [x], e.pos, "num"))
            elif x.op == "lit":
                st.append(_Node("lit", [], e.pos, "num", -x.value))
            else:
                st.append(self.node("neg", [x], e.pos, "num"))
        elif kind == "arith":
            right = self.num(st.pop(), repr(e.value))
            left = self.num(st.pop(), repr(e.value))
            if left.op == "arith" and _ARITH_GROUP[left.value[0]] == e.prec:
                left.args.append(right)
                left.value.append(e.value)
                left.depth = max(left.depth, right.depth + 1)
                left.const = left.const and right.const
                if left.depth > MAX_DEPTH:
                    raise self.error(f"expression nested deeper than {MAX_DEPTH}", e.pos)
                st.append(left)
            else:
                st.append(self.node("arith", [left, right], left.pos, "num", [e.value], e.pos))
        elif kind == "cmp":
            right, left = st.pop(), st.pop()
            op = e.value
            if op in ("=", "<>"):
                if "any" not in (left.type, right.type) and left.type != right.type:
                    raise self.error(f"cannot compare {_TYPE_NAMES[left.type]} with "
                                     f"{_TYPE_NAMES[right.type]}", e.pos)
            else:
                for side in (left, right):
                    if side.type in ("str", "bool"):
                        raise self.error(f"{op!r} compares numbers only, found "
                                         f"{_TYPE_NAMES[side.type]} (use = or <>)", side.pos)
            st.append(self.node("cmp", [left, right], left.pos, "bool", op, e.pos))
        else:  # between
            hi, lo, x = st.pop(), st.pop(), st.pop()
            for side in (x, lo, hi):
                self.num(side, "BETWEEN")
            st.append(self.node("between", [x, lo, hi], x.pos, "bool", e.value[0], e.pos))


_ARITH_GROUP: Final = {"+": _P_ADD, "-": _P_ADD, "*": _P_MUL, "/": _P_MUL}


# --------------------------------------------------------------------------- LIKE

def _like_matcher(pattern: str, escape: str | None) -> Callable[[str], bool] | None:
    """A predicate for ``pattern``; None when it ends with the escape character.

    The pattern is split at ``%`` into fixed-length segments; the first is
    anchored at the start, the last at the end and the middle ones are found
    leftmost in order (which is optimal), so matching never backtracks
    exponentially whatever the pattern.
    """
    segments: list[list[str | None]] = [[]]  # chars; None is "_"
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if escape is not None and ch == escape:
            i += 1
            if i == n:
                return None
            segments[-1].append(pattern[i])
        elif ch == "%":
            segments.append([])
        elif ch == "_":
            segments[-1].append(None)
        else:
            segments[-1].append(ch)
        i += 1

    if len(segments) == 1:
        seg = segments[0]
        if None not in seg:
            literal = "".join(seg)  # type: ignore[arg-type]
            return literal.__eq__
        rx = re.compile(_segment_regex(seg), re.DOTALL)
        return lambda s: rx.fullmatch(s) is not None

    first, *middle, last = segments
    if None not in first and None not in last and not any(middle):
        prefix = "".join(first)  # type: ignore[arg-type]
        suffix = "".join(last)  # type: ignore[arg-type]
        if not suffix:
            return lambda s: s.startswith(prefix)
        if not prefix:
            return lambda s: s.endswith(suffix)
        size = len(prefix) + len(suffix)
        return lambda s: len(s) >= size and s.startswith(prefix) and s.endswith(suffix)
    if (len(segments) == 3 and not first and not last and None not in middle[0]):
        needle = "".join(middle[0])  # type: ignore[arg-type]
        return lambda s: needle in s

    def compiled(seg: list[str | None]) -> Any:
        if None in seg:
            return re.compile(_segment_regex(seg), re.DOTALL)
        return "".join(seg)  # type: ignore[arg-type]

    head, tail = compiled(first), compiled(last)
    mids = [compiled(seg) for seg in middle if seg]
    head_len, tail_len = len(first), len(last)
    minimum = sum(len(seg) for seg in segments)

    def match(s: str) -> bool:
        n = len(s)
        if n < minimum:
            return False
        if head_len and not _match_at(head, s, 0):
            return False
        stop = n - tail_len
        if tail_len and not _match_at(tail, s, stop):
            return False
        pos = head_len
        for seg in mids:
            if type(seg) is str:
                found = s.find(seg, pos, stop)
                if found < 0:
                    return False
                pos = found + len(seg)
            else:
                m = seg.search(s, pos, stop)
                if m is None:
                    return False
                pos = m.end()
        return True

    return match


def _segment_regex(seg: list[str | None]) -> str:
    return "".join("." if ch is None else re.escape(ch) for ch in seg)


def _match_at(seg: Any, s: str, pos: int) -> bool:
    if type(seg) is str:
        return s.startswith(seg, pos)
    return seg.match(s, pos) is not None


# --------------------------------------------------------------------------- values

class _Opaque:
    """A value of no selector type: equal-comparable with strings through ``str()``."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def text(self) -> str | None:
        v = self.value
        if isinstance(v, (bytes, bytearray, memoryview)):  # not UTF-8
            return None
        try:
            return str(v)
        except Exception:
            return None


def _normalize(v: Any) -> Any:
    """A looked-up value outside the fast path, as None/bool/int/float/str/_Opaque."""
    if isinstance(v, str):
        return str.__str__(v)
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return float(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        try:
            return bytes(v).decode("utf-8")
        except UnicodeDecodeError:
            return _Opaque(bytes(v))
    # a Decimal exists only once decimal is imported, and a number of another type
    # (numpy's, a Fraction) only once ``numbers`` is, where its type is registered
    numbers = sys.modules.get("numbers")
    if numbers is not None and isinstance(v, numbers.Integral):
        return int(v)
    decimal = sys.modules.get("decimal")
    if (numbers is not None and isinstance(v, numbers.Real)) \
            or (decimal is not None and isinstance(v, decimal.Decimal)):
        try:
            return float(v)
        except (OverflowError, ValueError):
            return _Opaque(v)
    return _Opaque(v)


def _eq(a: Any, b: Any) -> bool | None:
    """``a = b`` in three-valued logic."""
    ta, tb = type(a), type(b)
    if ta is tb:
        if ta is str or ta is int or ta is float or ta is bool:
            return bool(a == b)
        return None
    if (ta is int or ta is float) and (tb is int or tb is float):
        return bool(a == b)
    if ta is _Opaque and tb is str:
        text = a.text()
        return None if text is None else text == b
    if tb is _Opaque and ta is str:
        text = b.text()
        return None if text is None else text == a
    return None


# --------------------------------------------------------------------------- compiler

_ORDER: Final = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_MIRROR: Final = {"=": "=", "<>": "<>", "<": ">", ">": "<", "<=": ">=", ">=": "<="}


def _div(a: int | float, b: int | float) -> int | float | None:
    if not b:
        return None
    if type(a) is int and type(b) is int:
        q = abs(a) // abs(b)
        return q if (a < 0) == (b < 0) else -q
    return a / b


_ARITH: Final = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": _div}
_EMPTY: Final[Mapping[str, Any]] = {}


def _const(v: Any) -> _Fn:
    return lambda env: v


def _compile(node: _Node) -> _Fn:
    op = node.op
    if op == "lit":
        return _const(node.value)
    if op == "id":
        fn = _ident(node.value)
    else:
        fn = _BUILDERS[op](node, [_compile(a) for a in node.args])
    if node.const:
        node.folded = fn(_EMPTY)
        return _const(node.folded)
    return fn


def _ident(name: str) -> _Fn:
    def ident(env: Mapping[str, Any]) -> Any:
        v = env.get(name)
        t = type(v)
        if t is int or t is str or t is float or t is bool or v is None:
            return v
        return _normalize(v)
    return ident


def _b_truth(node: _Node, fns: list[_Fn]) -> _Fn:
    (f,) = fns

    def truth(env: Mapping[str, Any]) -> bool | None:
        v = f(env)
        return v if v is True or v is False else None
    return truth


def _b_not(node: _Node, fns: list[_Fn]) -> _Fn:
    (f,) = fns

    def not_(env: Mapping[str, Any]) -> bool | None:
        r = f(env)
        return None if r is None else not r
    return not_


def _b_and(node: _Node, fns: list[_Fn]) -> _Fn:
    if len(fns) == 2:
        f1, f2 = fns

        def and2(env: Mapping[str, Any]) -> bool | None:
            r = f1(env)
            if r is False:
                return False
            s = f2(env)
            if s is False:
                return False
            return None if r is None or s is None else True
        return and2

    def and_n(env: Mapping[str, Any]) -> bool | None:
        unknown = False
        for f in fns:
            r = f(env)
            if r is False:
                return False
            if r is None:
                unknown = True
        return None if unknown else True
    return and_n


def _b_or(node: _Node, fns: list[_Fn]) -> _Fn:
    if len(fns) == 2:
        f1, f2 = fns

        def or2(env: Mapping[str, Any]) -> bool | None:
            r = f1(env)
            if r is True:
                return True
            s = f2(env)
            if s is True:
                return True
            return None if r is None or s is None else False
        return or2

    def or_n(env: Mapping[str, Any]) -> bool | None:
        unknown = False
        for f in fns:
            r = f(env)
            if r is True:
                return True
            if r is None:
                unknown = True
        return None if unknown else False
    return or_n


def _b_cmp(node: _Node, fns: list[_Fn]) -> _Fn:
    op = node.value
    left, right = node.args
    lf, rf = fns
    if right.const and not left.const:
        return _cmp_const(op, lf, right.folded)
    if left.const and not right.const:
        return _cmp_const(_MIRROR[op], rf, left.folded)
    if op == "=":
        return lambda env: _eq(lf(env), rf(env))
    if op == "<>":
        def ne(env: Mapping[str, Any]) -> bool | None:
            r = _eq(lf(env), rf(env))
            return None if r is None else not r
        return ne
    order = _ORDER[op]

    def cmp(env: Mapping[str, Any]) -> bool | None:
        a = lf(env)
        ta = type(a)
        if ta is int or ta is float:
            b = rf(env)
            tb = type(b)
            if tb is int or tb is float:
                return order(a, b)  # type: ignore[no-any-return]
        return None
    return cmp


def _cmp_const(op: str, f: _Fn, c: Any) -> _Fn:
    """``f(env) <op> c`` for a constant ``c`` (the common ``name = literal`` case)."""
    tc = type(c)
    if op in ("=", "<>"):
        ne = op == "<>"
        if tc is int or tc is float:
            def eq_num(env: Mapping[str, Any]) -> bool | None:
                v = f(env)
                t = type(v)
                if t is int or t is float:
                    return (v == c) is not ne
                return None
            return eq_num
        if tc is str:
            def eq_str(env: Mapping[str, Any]) -> bool | None:
                v = f(env)
                t = type(v)
                if t is str:
                    return (v == c) is not ne
                if t is _Opaque:
                    text = v.text()
                    return None if text is None else (text == c) is not ne
                return None
            return eq_str
        if tc is bool:
            def eq_bool(env: Mapping[str, Any]) -> bool | None:
                v = f(env)
                return (v is c) is not ne if type(v) is bool else None
            return eq_bool
        return _const(None)  # a constant NULL (such as 1/0): always UNKNOWN
    if tc is not int and tc is not float:
        return _const(None)
    order = _ORDER[op]

    def cmp_num(env: Mapping[str, Any]) -> bool | None:
        v = f(env)
        t = type(v)
        if t is int or t is float:
            return order(v, c)  # type: ignore[no-any-return]
        return None
    return cmp_num


def _b_arith(node: _Node, fns: list[_Fn]) -> _Fn:
    ops = [_ARITH[o] for o in node.value]
    if len(fns) == 2:
        f1, f2 = fns
        (o,) = ops

        def arith2(env: Mapping[str, Any]) -> int | float | None:
            a = f1(env)
            ta = type(a)
            if ta is not int and ta is not float:
                return None
            b = f2(env)
            tb = type(b)
            if tb is not int and tb is not float:
                return None
            try:
                return o(a, b)  # type: ignore[no-any-return]
            except OverflowError:
                return None
        return arith2

    first, rest = fns[0], list(zip(ops, fns[1:], strict=True))

    def arith_n(env: Mapping[str, Any]) -> int | float | None:
        acc: Any = first(env)
        t = type(acc)
        if t is not int and t is not float:
            return None
        try:
            for o, f in rest:
                v = f(env)
                t = type(v)
                if t is not int and t is not float:
                    return None
                acc = o(acc, v)
                if acc is None:
                    return None
        except OverflowError:
            return None
        return acc  # type: ignore[no-any-return]
    return arith_n


def _b_neg(node: _Node, fns: list[_Fn]) -> _Fn:
    (f,) = fns

    def neg(env: Mapping[str, Any]) -> int | float | None:
        v = f(env)
        t = type(v)
        return -v if t is int or t is float else None
    return neg


def _b_pos(node: _Node, fns: list[_Fn]) -> _Fn:
    (f,) = fns

    def pos(env: Mapping[str, Any]) -> int | float | None:
        v = f(env)
        t = type(v)
        return v if t is int or t is float else None
    return pos


def _b_between(node: _Node, fns: list[_Fn]) -> _Fn:
    negated: bool = node.value
    xf, lof, hif = fns

    def between(env: Mapping[str, Any]) -> bool | None:
        x = xf(env)
        t = type(x)
        if t is not int and t is not float:
            return None
        lo = lof(env)
        t = type(lo)
        low = (x >= lo) if t is int or t is float else None
        if low is False:
            return negated
        hi = hif(env)
        t = type(hi)
        high = (x <= hi) if t is int or t is float else None
        if high is False:
            return negated
        if low is None or high is None:
            return None
        return not negated
    return between


def _b_in(node: _Node, fns: list[_Fn]) -> _Fn:
    (f,) = fns
    negated, strs, nums = node.value

    def in_(env: Mapping[str, Any]) -> bool | None:
        v = f(env)
        t = type(v)
        if t is str:
            r = True if v in strs else (None if nums else False)
        elif t is int or t is float:
            r = True if v in nums else (None if strs else False)
        elif t is _Opaque:
            text = v.text()
            if text is None:
                return None
            r = True if text in strs else (None if nums else False)
        else:  # NULL or a boolean
            return None
        return r if r is None or not negated else not r
    return in_


def _b_like(node: _Node, fns: list[_Fn]) -> _Fn:
    (f,) = fns
    negated, matcher = node.value

    def like(env: Mapping[str, Any]) -> bool | None:
        v = f(env)
        if type(v) is not str:
            return None
        return matcher(v) is not negated
    return like


def _b_isnull(node: _Node, fns: list[_Fn]) -> _Fn:
    (f,) = fns
    negated = node.value
    return lambda env: (f(env) is None) is not negated


_BUILDERS: Final[dict[str, Callable[[_Node, list[_Fn]], _Fn]]] = {
    "truth": _b_truth, "not": _b_not, "and": _b_and, "or": _b_or, "cmp": _b_cmp,
    "arith": _b_arith, "neg": _b_neg, "pos": _b_pos, "between": _b_between, "in": _b_in,
    "like": _b_like, "isnull": _b_isnull,
}


# --------------------------------------------------------------------------- API

class Selector:
    """A parsed and compiled selector; immutable, hashable, thread-safe.

    ``Selector(text)`` is the same as ``Selector.parse(text)``; equality and hash
    go by the text.

    ``selector(values)`` is True only when the expression is TRUE for the mapping
    ``values`` (FALSE and UNKNOWN both give False); :meth:`evaluate` returns the
    three-valued result (True, False or None for UNKNOWN).
    """

    __slots__ = ("_fn", "_names", "_text", "_tree")

    def __init__(self, text: str) -> None:
        if not isinstance(text, str):
            raise ArgumentError(f"a selector must be a str, not {type(text).__name__}")
        if len(text) > MAX_LENGTH:
            raise SelectorError(f"selector longer than {MAX_LENGTH} characters", text,
                                MAX_LENGTH)
        parser = _Parser(text)
        tree = parser.parse()
        try:
            fn = _compile(tree)
        except RecursionError:  # only when called with little stack left
            raise SelectorError("expression nested too deeply for the available stack",
                                text, tree.pos) from None
        self._text = text
        self._names = frozenset(parser.names)
        self._fn = fn
        self._tree = tree

    @classmethod
    def parse(cls, text: str) -> Selector:
        """Parse and compile ``text``.

        Raises:
            SelectorError: the text is not a valid selector (with its position).
            ArgumentError: ``text`` is not a string.
        """
        return cls(text)

    @property
    def text(self) -> str:
        """The selector as written."""
        return self._text

    @property
    def names(self) -> frozenset[str]:
        """The names the selector refers to (to check against a schema)."""
        return self._names

    def qmf_where(self) -> list[Any] | None:
        """A QMF v2 ``_where`` predicate that every match of this selector satisfies
        (None when no part of it translates safely).

        An agent that applies it drops only what the selector would drop too; the
        console still evaluates the selector on what arrives.  Translated: ``=`` and
        ``<>`` of a name with a string or boolean, string ``IN`` lists, ``IS [NOT]
        NULL``, and AND/OR of those (an AND keeps the conjuncts that translate, an
        OR needs all of its terms).  Left out, because v2 agents evaluate them
        differently from JMS (the C++ agents compare an integer with a float as
        unequal, never match ``re_match``): number comparisons, LIKE, BETWEEN, NOT
        and arithmetic.
        """
        return _where_of(self._tree)

    def __call__(self, values: Mapping[str, Any]) -> bool:
        """True only when the selector is TRUE for ``values`` (UNKNOWN is False)."""
        return self._fn(values) is True

    def evaluate(self, values: Mapping[str, Any]) -> bool | None:
        """The three-valued result for ``values``: True, False or None (UNKNOWN)."""
        return self._fn(values)  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"Selector({self._text!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Selector):
            return self._text == other._text
        return NotImplemented

    def __hash__(self) -> int:
        return hash((Selector, self._text))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self._text,))


_WHERE_OPS: Final = {"=": "eq", "<>": "ne"}


def _where_of(node: _Node) -> list[Any] | None:
    """The v2 predicate implied by ``node`` (see :meth:`Selector.qmf_where`)."""
    op = node.op
    if op == "and":
        parts = [p for p in (_where_of(a) for a in node.args) if p is not None]
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else ["and", *parts]
    if op == "or":
        terms = [_where_of(a) for a in node.args]
        if any(t is None for t in terms):
            return None
        return ["or", *terms]
    if op == "cmp" and node.value in _WHERE_OPS:
        left, right = node.args
        if left.op == "lit" and right.op == "id":
            left, right = right, left
        if left.op == "id" and right.op == "lit" and isinstance(right.value, (str, bool)):
            # an unquoted string operand is a name: every literal is quoted
            return [_WHERE_OPS[node.value], left.value, ["quote", right.value]]
        return None
    if op == "isnull" and node.args[0].op == "id":
        exists = ["exists", node.args[0].value]
        return exists if node.value else ["not", exists]
    if op == "in" and node.args[0].op == "id":
        negated, strs, nums = node.value
        if negated or nums or not strs:
            return None
        name = node.args[0].value
        return ["or", *(["eq", name, ["quote", s]] for s in sorted(strs))]
    return None


@functools.lru_cache(maxsize=256)
def _cached(text: str) -> Selector:
    return Selector(text)


def compile_selector(text: str | Selector | None) -> Selector | None:
    """A :class:`Selector` for ``text``; None and Selectors pass through.

    Parsed selectors are cached by text.

    Raises:
        SelectorError: ``text`` is not a valid selector.
        ArgumentError: ``text`` is of another type.
    """
    if text is None or isinstance(text, Selector):
        return text
    if isinstance(text, str):
        return _cached(text)
    raise ArgumentError(f"a selector must be a str, Selector or None, not {type(text).__name__}")
