"""``qmf config``: list and change queues, exchanges and bindings, like qpid-config.

    qmf config [URL]                                  summary
    qmf config [URL] queues    [FILTER]               (-b: with bindings)
    qmf config [URL] exchanges [FILTER]               (-b: with bindings)
    qmf config [URL] add queue NAME [--durable ...]
    qmf config [URL] add exchange TYPE NAME [--durable ...]
    qmf config [URL] del queue NAME [--force ...]
    qmf config [URL] del exchange NAME
    qmf config [URL] bind   EXCHANGE QUEUE [KEY]
    qmf config [URL] unbind EXCHANGE QUEUE [KEY]
    qmf config [URL] log [LEVEL]                      show or set qpidd's log level
    qmf config [URL] reload-acl                       reload qpidd's ACL file

URL may also be written as the qpid tools take it (``[user[/password]@]host[:port]``),
or given with ``--broker ADDRESS``; ``-b`` means ``--bindings`` here, as in qpid-config.

Changes go through the broker object's ``create`` and ``delete`` methods, as qpidd's
(a binding is named ``exchange/queue/key``).  FILTER keeps the names containing it
(or matching it, when it has ``*?[``).
"""

from __future__ import annotations

import argparse
import fnmatch
from collections import Counter
from typing import Any

from qmf_async import MethodError, QmfObject

from ._common import (
    EXIT_METHOD,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    ToolError,
    add_broker_option,
    print_json,
)
from ._render import (
    Column,
    Target,
    add_query_options,
    help_text,
    jsonable,
    not_found,
    open_target,
    out_console,
    render_table,
    setup_logging,
)

__all__ = ["add_parser", "run"]

EXCHANGE_TYPES = ("direct", "topic", "fanout", "headers")
LIMIT_POLICIES = ("none", "reject", "ring", "ring-strict", "flow-to-disk")


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "config", help="list and change queues, exchanges, bindings (like qpid-config)",
        description=help_text(__doc__.split("\n\n")[0]),
        epilog=help_text(__doc__.split("\n\n", 1)[1]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="qmf config [URL] [COMMAND ...] [options]")
    parser.add_argument("words", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    _add_options(parser)
    parser.set_defaults(run=run)


def _add_options(parser: argparse.ArgumentParser) -> None:
    add_query_options(parser, url=False, json_help="machine output (summary, queues, exchanges)")
    add_broker_option(parser, short=False)  # -b is --bindings here, as in qpid-config
    parser.add_argument("-b", "--bindings", action="store_true",
                        help="show bindings with queues or exchanges")
    add = parser.add_argument_group("add queue / add exchange options")
    add.add_argument("--durable", action="store_true", help="the object survives a restart")
    add.add_argument("--auto-delete", action="store_true",
                     help="deleted when its last consumer / binding goes")
    add.add_argument("--alternate-exchange", metavar="EXCHANGE",
                     help="where undeliverable messages go")
    add.add_argument("--max-queue-size", type=int, metavar="BYTES",
                     help="queue limit in bytes (qpid.max_size)")
    add.add_argument("--max-queue-count", type=int, metavar="N",
                     help="queue limit in messages (qpid.max_count)")
    add.add_argument("--limit-policy", choices=LIMIT_POLICIES,
                     help="action at the limit (qpid.policy_type)")
    add.add_argument("--argument", action="append", default=[], metavar="KEY=VALUE",
                     help="another declare argument (repeatable; ints and true/false "
                          "are converted)")
    rm = parser.add_argument_group("del queue options")
    rm.add_argument("--force", action="store_true",
                    help="delete even if the queue is in use or not empty")
    rm.add_argument("--force-if-not-empty", action="store_true",
                    help="delete even if the queue holds messages")
    rm.add_argument("--force-if-used", action="store_true",
                    help="delete even if the queue has consumers")


class _WordsParser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, usage exit code
        raise ToolError(f"{message} (see qmf config --help)", EXIT_USAGE)


def _parse_words(args: argparse.Namespace) -> None:
    """Options may follow the command words (``queues -b``): parse those too."""
    parser = _WordsParser(prog="qmf config", add_help=False)
    parser.add_argument("words", nargs="*")
    _add_options(parser)
    namespace = argparse.Namespace(**{k: v for k, v in vars(args).items() if k != "words"})
    parser.parse_intermixed_args(args.words, namespace=namespace)
    vars(args).update(vars(namespace))


#: the first word of every command
COMMANDS = ("queues", "exchanges", "add", "del", "bind", "unbind", "log", "reload-acl")


def _is_address(word: str, following: list[str]) -> bool:
    """Whether the first word is the broker: a URL, a word that looks like an address
    (``host:port``, ``user@host``, ``[ipv6]``), or any non-command before a command."""
    if "://" in word:
        return True
    if word in COMMANDS:
        return False
    return any(c in word for c in ":@[") or bool(following and following[0] in COMMANDS)


def _split_words(args: argparse.Namespace) -> list[str]:
    """Take the URL (a word with ``://``, or a qpid-style address before the command)
    out of the words; return the command."""
    words = list(args.words)
    args.url = None
    if words and _is_address(words[0], words[1:]):
        args.url = words.pop(0)
    elif len(words) > 1 and "://" in words[-1]:
        args.url = words.pop()
    return words


def _value(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(text, 0)
    except ValueError:
        return text


def _parse_arguments(items: list[str]) -> dict[str, Any]:
    """``--argument KEY=VALUE`` items as a map.

    Raises:
        ToolError: an item without ``=`` (usage code).
    """
    props: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ToolError(f"--argument wants KEY=VALUE, got {item!r}", EXIT_USAGE)
        props[key] = _value(value)
    return props


def _declare_arguments(args: argparse.Namespace) -> dict[str, Any]:
    props = _parse_arguments(args.argument)
    if args.durable:
        props["durable"] = True
    if args.auto_delete:
        props["auto-delete"] = True
    if args.alternate_exchange:
        props["alternate-exchange"] = args.alternate_exchange
    return props


async def run(args: argparse.Namespace) -> int:
    _parse_words(args)
    setup_logging(args.verbose)
    words = _split_words(args)
    command, rest = (words[0], words[1:]) if words else ("", [])
    _check_usage(command, rest)  # usage errors before connecting
    _parse_arguments(args.argument)
    async with open_target(args) as target:
        if command == "":
            return await _summary(target, args)
        if command in ("queues", "exchanges"):
            return await _list(target, args, command, rest[0] if rest else "")
        if command == "add":
            return await _add(target, args, rest)
        if command == "del":
            return await _delete(target, args, rest)
        if command == "log":
            return await _log(target, rest)
        if command == "reload-acl":
            return await _reload_acl(target)
        return await _bind(target, args, command, rest)


def _check_usage(command: str, rest: list[str]) -> None:
    """Raises: ToolError (usage code) for a malformed command."""
    def usage(why: str) -> ToolError:
        return ToolError(f"{why} (see qmf config --help)", EXIT_USAGE)

    n = len(rest)
    if command == "":
        return
    if command in ("queues", "exchanges"):
        if n > 1:
            raise usage(f"{command} takes at most one filter")
    elif command == "add":
        if not rest or rest[0] not in ("queue", "exchange"):
            raise usage("add queue NAME | add exchange TYPE NAME")
        if rest[0] == "queue" and n != 2:
            raise usage("add queue takes one NAME")
        if rest[0] == "exchange":
            if n != 3:
                raise usage("add exchange takes TYPE and NAME")
            if rest[1] not in EXCHANGE_TYPES:
                raise usage(f"exchange type {rest[1]!r} is not one of "
                            f"{', '.join(EXCHANGE_TYPES)}")
    elif command == "del":
        if n != 2 or rest[0] not in ("queue", "exchange"):
            raise usage("del queue NAME | del exchange NAME")
    elif command == "log":
        if n > 1:
            raise usage("log takes at most one LEVEL (for example 'info+')")
    elif command == "reload-acl":
        if n:
            raise usage("reload-acl takes no arguments")
    elif command in ("bind", "unbind"):
        if n not in (2, 3):
            raise usage(f"{command} takes EXCHANGE QUEUE [KEY]")
        if "/" in rest[0] or "/" in rest[1]:
            raise usage("exchange and queue names with '/' cannot be bound by name")
    else:
        raise usage(f"unknown command {command!r}")


# --------------------------------------------------------------------------- reading


def _matches(name: str, pattern: str) -> bool:
    if not pattern:
        return True
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(name, pattern)
    return pattern in name


def _queue_attributes(q: QmfObject) -> str:
    attrs = []
    if q.get("durable"):
        attrs.append("--durable")
    if q.get("autoDelete"):
        attrs.append("auto-del")
    if q.get("exclusive"):
        attrs.append("excl")
    arguments = dict(q.get("arguments") or {})
    named = {"qpid.max_size": "--max-queue-size", "qpid.max_count": "--max-queue-count",
             "qpid.policy_type": "--limit-policy"}
    for key, value in arguments.items():
        if key in named:
            attrs.append(f"{named[key]}={value}")
        else:
            attrs.append(f"--argument {key}={value}")
    return " ".join(attrs)


def _exchange_attributes(e: QmfObject) -> str:
    attrs = []
    if e.get("durable"):
        attrs.append("--durable")
    if e.get("autoDelete"):
        attrs.append("auto-del")
    for key, value in dict(e.get("arguments") or {}).items():
        attrs.append(f"--argument {key}={value}")
    return " ".join(attrs)


async def _summary(target: Target, args: argparse.Namespace) -> int:
    exchanges = await target.objects("exchange")
    queues = await target.objects("queue")
    if not exchanges and not queues:
        await target.require_class("queue", what="queues")
    types = Counter(str(e.get("type")) for e in exchanges)
    durable = sum(1 for q in queues if q.get("durable"))
    data = {"exchanges": {"total": len(exchanges), "by_type": dict(sorted(types.items()))},
            "queues": {"total": len(queues), "durable": durable,
                       "non_durable": len(queues) - durable}}
    if args.json:
        print_json(data)
        return 0
    rows = [{"what": "Total Exchanges", "count": len(exchanges)}]
    rows += [{"what": f"  {t}", "count": n} for t, n in sorted(types.items())]
    rows += [{"what": "Total Queues", "count": len(queues)},
             {"what": "  durable", "count": durable},
             {"what": "  non-durable", "count": len(queues) - durable}]
    render_table((Column("what", ""), Column("count", "", str, numeric=True)), rows,
                 console=out_console(), show_header=False)
    return 0


def _ex_name(name: Any) -> str:
    if name is None:
        return ""
    return "''" if name == "" else str(name)


async def _list(target: Target, args: argparse.Namespace, what: str, pattern: str) -> int:
    objs = await target.objects(what[:-1])
    if not objs:
        await target.require_class(what[:-1], what=what)
    objs = sorted((o for o in objs if _matches(str(o.get("name")), pattern)),
                  key=lambda o: str(o.get("name")))
    bindings: list[tuple[str, str, str]] = []
    if args.bindings:
        bindings = await _bindings(target)
    if what == "queues":
        rows = [{"name": q.get("name"), "durable": bool(q.get("durable")),
                 "auto_delete": bool(q.get("autoDelete")), "exclusive": bool(q.get("exclusive")),
                 "arguments": dict(q.get("arguments") or {}),
                 "attributes": _queue_attributes(q)} for q in objs]
        if args.bindings:
            for row in rows:
                row["bindings"] = [{"exchange": ex, "key": key}
                                   for ex, qn, key in bindings if qn == row["name"]]
        columns = [Column("name", "Queue Name"), Column("attributes", "Attributes")]
        if args.bindings:
            columns += [Column("exchange", "Bound to", _ex_name), Column("key", "Key")]
    else:
        rows = [{"name": e.get("name"), "type": e.get("type"),
                 "durable": bool(e.get("durable")), "auto_delete": bool(e.get("autoDelete")),
                 "arguments": dict(e.get("arguments") or {}),
                 "attributes": _exchange_attributes(e)} for e in objs]
        if args.bindings:
            for row in rows:
                row["bindings"] = [{"queue": qn, "key": key}
                                   for ex, qn, key in bindings if ex == row["name"]]
        columns = [Column("type", "Type"), Column("name", "Exchange Name", _ex_name),
                   Column("attributes", "Attributes")]
        if args.bindings:
            columns += [Column("key", "Key"), Column("queue", "Queue")]
    if args.json:
        print_json(jsonable(rows))
    elif args.bindings:
        render_table(columns, _one_row_per_binding(rows))
    else:
        render_table(columns, rows)
    return 0


def _one_row_per_binding(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A row per binding, the object's own columns on its first row only."""
    out: list[dict[str, Any]] = []
    for row in rows:
        bindings = row["bindings"] or [{}]
        out.append({**row, **bindings[0]})
        out += [dict(b) for b in bindings[1:]]
    return out


async def _bindings(target: Target) -> list[tuple[str, str, str]]:
    """(exchange, queue, key) of every binding, names resolved through the references."""
    exchanges = {e.get_object_id(): str(e.get("name")) for e in await target.objects("exchange")}
    queues = {q.get_object_id(): str(q.get("name")) for q in await target.objects("queue")}
    out = []
    for b in await target.objects("binding"):
        ex, qn = exchanges.get(b.get("exchangeRef")), queues.get(b.get("queueRef"))
        if ex is not None and qn is not None:
            out.append((ex, qn, str(b.get("bindingKey", ""))))
    return sorted(out)


# --------------------------------------------------------------------------- changing


async def _call(target: Target, method: str, **arguments: Any) -> None:
    broker = await target.broker_object()
    try:
        await broker.invoke(method, _timeout=target.timeout, **arguments)
    except MethodError as exc:
        code = EXIT_NOT_FOUND if exc.text.startswith("not-found") else EXIT_METHOD
        raise ToolError(f"{method} failed: {exc.text} (status {exc.status})", code) from exc


async def _log(target: Target, rest: list[str]) -> int:
    """``log``: print the broker's log level (as qpid-config: ``Log level: ...``), or
    set it (silently, as qpid-config)."""
    if rest:
        await _call(target, "setLogLevel", level=rest[0])
        return 0
    broker = await target.broker_object()
    try:
        result = await broker.invoke("getLogLevel", _timeout=target.timeout)
    except MethodError as exc:
        raise ToolError(f"getLogLevel failed: {exc.text} (status {exc.status})",
                        EXIT_METHOD) from exc
    print(f"Log level: {result.out_args.get('level', '')}")
    return 0


async def _reload_acl(target: Target) -> int:
    """``reload-acl``: the ACL module's ``reloadACLFile``.

    Raises:
        ToolError: no ACL module in the broker (not-found code), or the reload failed
            (method code, with the broker's reason).
    """
    acls = await target.objects("acl", package="org.apache.qpid.acl", what="ACL")
    if not acls:
        raise ToolError(f"no ACL module is loaded in the broker on {target.where}",
                        EXIT_NOT_FOUND)
    try:
        await acls[0].invoke("reloadACLFile", _timeout=target.timeout)
    except MethodError as exc:
        raise ToolError(f"reloadACLFile failed: {exc.text} (status {exc.status})",
                        EXIT_METHOD) from exc
    print("ACL file reloaded")
    return 0


async def _names(target: Target, cls: str) -> set[str]:
    objs = await target.objects(cls)
    if not objs:
        await target.require_class(cls, what=f"{cls}s")
    return {str(o.get("name")) for o in objs}


async def _add(target: Target, args: argparse.Namespace, rest: list[str]) -> int:
    props = _declare_arguments(args)
    if rest[0] == "queue":
        name = rest[1]
        if args.max_queue_size is not None:
            props["qpid.max_size"] = args.max_queue_size
        if args.max_queue_count is not None:
            props["qpid.max_count"] = args.max_queue_count
        if args.limit_policy:
            props["qpid.policy_type"] = args.limit_policy
        await _call(target, "create", type="queue", name=name, properties=props, strict=True)
        print(f"queue {name!r} created")
    else:
        ex_type, name = rest[1], rest[2]
        props["exchange-type"] = ex_type
        await _call(target, "create", type="exchange", name=name, properties=props,
                    strict=True)
        print(f"exchange {name!r} ({ex_type}) created")
    return 0


async def _delete(target: Target, args: argparse.Namespace, rest: list[str]) -> int:
    what, name = rest
    if name not in await _names(target, what):
        raise not_found(what, name, target.where)
    options: dict[str, Any] = {}
    if what == "queue":
        options = {"if_empty": not (args.force or args.force_if_not_empty),
                   "if_unused": not (args.force or args.force_if_used)}
    await _call(target, "delete", type=what, name=name, options=options)
    print(f"{what} {name!r} deleted")
    return 0


async def _bind(target: Target, args: argparse.Namespace, command: str, rest: list[str]
                ) -> int:
    exchange, queue = rest[0], rest[1]
    key = rest[2] if len(rest) > 2 else ""
    if exchange not in await _names(target, "exchange"):
        raise not_found("exchange", exchange, target.where)
    if queue not in await _names(target, "queue"):
        raise not_found("queue", queue, target.where)
    binding = f"{exchange}/{queue}/{key}"
    if command == "bind":
        await _call(target, "create", type="binding", name=binding,
                    properties=_parse_arguments(args.argument), strict=True)
        print(f"bound {queue!r} to {_ex_name(exchange)} with key {key!r}")
    else:
        await _call(target, "delete", type="binding", name=binding, options={})
        print(f"unbound {queue!r} from {_ex_name(exchange)} (key {key!r})")
    return 0

