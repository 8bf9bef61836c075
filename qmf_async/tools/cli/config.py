"""``qmf config``: list and change queues, exchanges and bindings, like qpid-config.

    qmf config [-b ADDRESS]                           summary
    qmf config [-b ADDRESS] queues    [FILTER]        (-r: with bindings)
    qmf config [-b ADDRESS] exchanges [FILTER]        (-r: with bindings)
    qmf config [-b ADDRESS] add queue NAME [--durable ...]
    qmf config [-b ADDRESS] add exchange TYPE NAME [--durable --sequence --ive ...]
    qmf config [-b ADDRESS] del queue NAME [--force ...]
    qmf config [-b ADDRESS] del exchange NAME
    qmf config [-b ADDRESS] bind   EXCHANGE QUEUE [KEY]
                      headers exchange:  [KEY] all|any K1=V1 [, K2=V2 ...]
                      xml exchange:      [KEY] -f FILE|-
    qmf config [-b ADDRESS] unbind EXCHANGE QUEUE [KEY]
    qmf config [-b ADDRESS] add TYPE NAME [--argument NAME=VALUE ...]
    qmf config [-b ADDRESS] del TYPE NAME
    qmf config [-b ADDRESS] list TYPE [--show-property NAME ...]
    qmf config [-b ADDRESS] log [LEVEL]               show or set qpidd's log level
    qmf config [-b ADDRESS] reload-acl                reload qpidd's ACL file
    qmf config [-b ADDRESS] shutdown                  stop the broker

The broker is ``-b/--broker`` or ``-a/--broker-addr`` (as qpid-config), or a leading
URL or address word (``[user[/password]@]host[:port]``).  ``-r/--recursive`` shows
the bindings (``--bindings`` is the same).

Changes go through the broker object's ``create`` and ``delete`` methods, as
qpid-config makes them on qpidd (a binding is named ``exchange/queue/key``); the queue
and exchange options become the same declare arguments (``qpid.max_size``, ...).
FILTER keeps the names containing it (or matching it, when it has ``*?[``); no name
matching it is exit code 1, as qpid-config.  The consoles' own reply and topic queues
(``qmf_async.names.is_console_queue``) are left out of the listings unless
``--console-queues``.
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import sys
from collections import Counter
from typing import Any

from qmf_async import MethodError, QmfObject, QmfTimeout, TransportError
from qmf_async.names import is_console_queue
from qmf_async.wire import ObjectId, QmfType

from ._common import (
    EXIT_ERROR,
    EXIT_METHOD,
    EXIT_NO_AGENT,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    ToolError,
    add_broker_option,
    print_json,
)
from ._help import RAW_DESCRIPTION
from ._render import (
    Column,
    Target,
    add_query_options,
    help_text,
    jsonable,
    not_found,
    open_target,
    out_console,
    plain,
    render_table,
    setup_logging,
)

__all__ = ["add_parser", "run"]

PACKAGE = "org.apache.qpid.broker"
EXCHANGE_TYPES = ("direct", "topic", "fanout", "headers", "xml")
LIMIT_POLICIES = ("none", "reject", "ring", "ring-strict", "self-destruct")
REPLICATE_LEVELS = ("none", "configuration", "all")

# the declare arguments of qpidd (and of qpid-config's options)
FILE_COUNT = "qpid.file_count"
FILE_SIZE = "qpid.file_size"
EFP_PARTITION_NUM = "qpid.efp_partition_num"
EFP_POOL_FILE_SIZE = "qpid.efp_pool_file_size"
WCACHE_PAGE_SIZE = "qpid.wcache-page-size"
WCACHE_NUM_PAGES = "qpid.wcache-num-pages"
MAX_SIZE = "qpid.max_size"
MAX_COUNT = "qpid.max_count"
POLICY_TYPE = "qpid.policy_type"
LVQ_KEY = "qpid.last_value_queue_key"
MSG_SEQUENCE = "qpid.msg_sequence"
IVE = "qpid.ive"
FLOW_STOP_COUNT = "qpid.flow_stop_count"
FLOW_RESUME_COUNT = "qpid.flow_resume_count"
FLOW_STOP_SIZE = "qpid.flow_stop_size"
FLOW_RESUME_SIZE = "qpid.flow_resume_size"
GROUP_HEADER = "qpid.group_header_key"
SHARED_GROUPS = "qpid.shared_msg_group"
REPLICATE = "qpid.replicate"

#: store options: (option dest, argument), sent with --durable only, as qpid-config
STORE_OPTIONS = (("file_count", FILE_COUNT), ("file_size", FILE_SIZE),
                 ("efp_partition_num", EFP_PARTITION_NUM),
                 ("efp_pool_file_size", EFP_POOL_FILE_SIZE),
                 ("wcache_page_size", WCACHE_PAGE_SIZE), ("wcache_num_pages", WCACHE_NUM_PAGES))
#: integer queue options: (option dest, argument)
QUEUE_NUMBERS = (("max_queue_size", MAX_SIZE), ("max_queue_count", MAX_COUNT),
                 ("flow_stop_size", FLOW_STOP_SIZE), ("flow_resume_size", FLOW_RESUME_SIZE),
                 ("flow_stop_count", FLOW_STOP_COUNT), ("flow_resume_count", FLOW_RESUME_COUNT))
#: how a queue's arguments are shown, in qpid-config's order: (argument, option)
QUEUE_SHOWN = ((FILE_SIZE, "--file-size"), (FILE_COUNT, "--file-count"),
               (EFP_PARTITION_NUM, "--efp-partition-num"),
               (EFP_POOL_FILE_SIZE, "--efp-pool-file-size"),
               (WCACHE_PAGE_SIZE, "--wcache-page-size"),
               (WCACHE_NUM_PAGES, "--wcache-num-pages"), (MAX_SIZE, "--max-queue-size"),
               (MAX_COUNT, "--max-queue-count"), (POLICY_TYPE, "--limit-policy"),
               (LVQ_KEY, "--lvq-key"))
QUEUE_SHOWN_AFTER_ALT = ((FLOW_STOP_SIZE, "--flow-stop-size"),
                         (FLOW_RESUME_SIZE, "--flow-resume-size"),
                         (FLOW_STOP_COUNT, "--flow-stop-count"),
                         (FLOW_RESUME_COUNT, "--flow-resume-count"),
                         (GROUP_HEADER, "--group-header"))
#: arguments that have an option of their own (the rest show as --argument K=V)
SPECIAL = {FILE_COUNT, FILE_SIZE, EFP_PARTITION_NUM, EFP_POOL_FILE_SIZE, WCACHE_PAGE_SIZE,
           WCACHE_NUM_PAGES, MAX_SIZE, MAX_COUNT, POLICY_TYPE, LVQ_KEY, MSG_SEQUENCE, IVE,
           FLOW_STOP_COUNT, FLOW_RESUME_COUNT, FLOW_STOP_SIZE, FLOW_RESUME_SIZE, GROUP_HEADER,
           SHARED_GROUPS, REPLICATE}
#: what ``list TYPE`` shows without --show-property (as qpid-config)
DEFAULT_PROPERTIES = {"exchange": ("name", "type", "durable"),
                      "queue": ("name", "durable", "autoDelete")}


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "config", help="list and change queues, exchanges, bindings (like qpid-config)",
        description=help_text(__doc__.split("\n\n")[0]),
        epilog=help_text(__doc__.split("\n\n", 1)[1]),
        formatter_class=RAW_DESCRIPTION,
        usage="qmf config [-b ADDRESS] [COMMAND ...] [options]")
    parser.add_argument("words", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    _add_options(parser)
    parser.set_defaults(run=run)


def _add_options(parser: argparse.ArgumentParser) -> None:
    add_query_options(parser, url=False, json_help="machine output (summary, queues, "
                                                   "exchanges, list)")
    add_broker_option(parser)
    parser.add_argument("-a", "--broker-addr", dest="broker_addr", default=None,
                        metavar="ADDRESS", help="the broker, as -b (qpid-config's other name)")
    parser.add_argument("-r", "--recursive", "--bindings", dest="bindings",
                        action="store_true", help="show bindings with queues or exchanges")
    parser.add_argument("--ignore-default", action="store_true",
                        help="leave the default exchange out of the listings")
    parser.add_argument("--console-queues", action="store_true",
                        help="list the consoles' own reply and topic queues (and their "
                             "bindings) too")
    both = parser.add_argument_group("add queue / add exchange options")
    both.add_argument("--durable", action="store_true", help="the object survives a restart")
    both.add_argument("--auto-delete", action="store_true",
                      help="deleted when its last consumer / binding goes")
    both.add_argument("--alternate-exchange", metavar="EXCHANGE",
                      help="where undeliverable or rejected messages go")
    both.add_argument("--replicate", choices=REPLICATE_LEVELS,
                      help="HA replication level (qpid.replicate)")
    both.add_argument("--argument", action="append", default=[], metavar="NAME=VALUE",
                      help="another declare argument (repeatable; integers are converted, "
                           "as qpid-config); with add TYPE, the object's properties")
    q = parser.add_argument_group("add queue options")
    for flag, what in (("--file-count", "[legacystore] journal files (qpid.file_count)"),
                       ("--file-size", "[legacystore] journal file pages (qpid.file_size)"),
                       ("--efp-partition-num", "[linearstore] EFP partition"),
                       ("--efp-pool-file-size", "[linearstore] EFP file size in KiB"),
                       ("--wcache-page-size", "[linearstore] buffer page size in KiB"),
                       ("--wcache-num-pages", "[linearstore] buffer pages")):
        q.add_argument(flag, type=int, metavar="N", help=f"{what}; with --durable only")
    q.add_argument("--max-queue-size", type=int, metavar="BYTES",
                   help="queue limit in bytes (qpid.max_size)")
    q.add_argument("--max-queue-count", type=int, metavar="N",
                   help="queue limit in messages (qpid.max_count)")
    q.add_argument("--limit-policy", choices=LIMIT_POLICIES,
                   help="action at the limit (qpid.policy_type; none: the broker's default)")
    q.add_argument("--lvq-key", metavar="KEY", help="last value queue key")
    for flag, what in (("--flow-stop-size", "queued bytes that stop the senders"),
                       ("--flow-resume-size", "queued bytes that resume them"),
                       ("--flow-stop-count", "queued messages that stop the senders"),
                       ("--flow-resume-count", "queued messages that resume them")):
        q.add_argument(flag, type=int, metavar="N", help=what)
    q.add_argument("--group-header", metavar="HEADER",
                   help="message groups: the header holding the group id")
    q.add_argument("--shared-groups", action="store_true",
                   help="message groups consumed across consumers")
    q.add_argument("--start-replica", metavar="URL",
                   help="replicate the new queue from the same-named queue at URL (HA)")
    x = parser.add_argument_group("add exchange options")
    x.add_argument("--sequence", action="store_true",
                   help="the exchange numbers messages (qpid.msg_sequence)")
    x.add_argument("--ive", action="store_true",
                   help="initial value exchange: the last message goes to new bindings")
    rm = parser.add_argument_group("del queue options")
    rm.add_argument("--force", action="store_true",
                    help="delete even if the queue is in use or not empty")
    rm.add_argument("--force-if-not-empty", action="store_true",
                    help="delete even if the queue holds messages")
    rm.add_argument("--force-if-used", action="store_true",
                    help="delete even if the queue has consumers")
    b = parser.add_argument_group("bind options")
    b.add_argument("-f", "--file", metavar="FILE",
                   help="XML exchange bindings: the file holding the XQuery (- for stdin)")
    ls = parser.add_argument_group("list options")
    ls.add_argument("--show-property", dest="show_property", action="append", default=[],
                    metavar="NAME", help="a property to show (repeatable)")


class _WordsParser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, usage exit code
        raise ToolError(f"{message} (see qmf config --help)", EXIT_USAGE)


def _parse_words(args: argparse.Namespace) -> None:
    """Options may follow the command words (``queues -r``): parse those too.

    Raises:
        ToolError: a bad option (usage code), or both -b and -a.
    """
    parser = _WordsParser(prog="qmf config", add_help=False)
    parser.add_argument("words", nargs="*")
    _add_options(parser)
    namespace = argparse.Namespace(**{k: v for k, v in vars(args).items() if k != "words"})
    parser.parse_intermixed_args(args.words, namespace=namespace)
    vars(args).update(vars(namespace))
    addr = getattr(args, "broker_addr", None)
    if addr:
        if args.broker and args.broker != addr:
            raise ToolError("give the broker once: -b/--broker or -a/--broker-addr",
                            EXIT_USAGE)
        args.broker = addr


#: the first word of every command
COMMANDS = ("queues", "exchanges", "add", "del", "bind", "unbind", "list", "log",
            "reload-acl", "shutdown")


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


_INTEGER = re.compile(r"\s*[+-]?[0-9]+\s*")


def _value(text: str) -> Any:
    """An argument's value as qpid-config sends it: an integer if it reads as one,
    else the text."""
    return int(text) if _INTEGER.fullmatch(text) else text


def _parse_arguments(items: list[str]) -> dict[str, Any]:
    """``--argument NAME=VALUE`` items as a map.

    Raises:
        ToolError: an item without ``=`` (usage code).
    """
    props: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ToolError(f"--argument wants NAME=VALUE, got {item!r}", EXIT_USAGE)
        props[key] = _value(value)
    return props


def _common_arguments(args: argparse.Namespace) -> dict[str, Any]:
    props: dict[str, Any] = {}
    if args.alternate_exchange:
        props["alternate-exchange"] = args.alternate_exchange
    if args.durable:
        props["durable"] = True
    if args.auto_delete:
        props["auto-delete"] = True
    if args.replicate:
        props[REPLICATE] = args.replicate
    return props


def queue_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The declare arguments of ``add queue`` (those qpid-config sends for the same
    options).  Store options count only with ``--durable``, as in qpid-config.

    Raises:
        ToolError: ``--limit-policy ring-strict`` (qpidd has no such policy; usage code).
    """
    props = _parse_arguments(args.argument)
    ignored = [f"--{dest.replace('_', '-')}" for dest, _ in STORE_OPTIONS
               if getattr(args, dest) and not args.durable]
    if ignored:
        print(f"qmf config: note: {', '.join(ignored)} ignored without --durable "
              "(as qpid-config)", file=sys.stderr)
    if args.durable:
        for dest, key in STORE_OPTIONS:
            if getattr(args, dest):
                props[key] = getattr(args, dest)
    for dest, key in QUEUE_NUMBERS:
        if getattr(args, dest) is not None:
            props[key] = getattr(args, dest)
    if args.limit_policy == "ring-strict":
        raise ToolError("--limit-policy ring-strict: qpidd has no such policy "
                        "(use ring or reject)", EXIT_USAGE)
    if args.limit_policy and args.limit_policy != "none":
        props[POLICY_TYPE] = args.limit_policy
    if args.lvq_key:
        props[LVQ_KEY] = args.lvq_key
    if args.group_header:
        props[GROUP_HEADER] = args.group_header
    if args.shared_groups:
        props[SHARED_GROUPS] = 1
    props.update(_common_arguments(args))
    return props


def exchange_arguments(args: argparse.Namespace, ex_type: str) -> dict[str, Any]:
    """The declare arguments of ``add exchange`` (as qpid-config sends them)."""
    props = {"exchange-type": ex_type, **_parse_arguments(args.argument)}
    if args.sequence:
        props[MSG_SEQUENCE] = 1
    if args.ive:
        props[IVE] = 1
    props.update(_common_arguments(args))
    return props


def headers_match(words: list[str]) -> dict[str, Any]:
    """A headers binding's arguments from ``all|any K1=V1 [, K2=V2 ...]``: the values
    as text and ``x-match``, as qpid-config sends them (commas may stand alone or
    end a pair).

    Raises:
        ToolError: no ``all``/``any``, no pair, or a pair without ``=`` (usage code).
    """
    if not words or words[0] not in ("all", "any"):
        got = repr(words[0]) if words else "nothing"
        raise ToolError(f"a headers binding wants all|any K1=V1 [K2=V2 ...] after the "
                        f"key, got {got}", EXIT_USAGE)
    pairs = [p for w in words[1:] for p in w.split(",") if p.strip()]
    if not pairs:
        raise ToolError(f"a headers binding wants at least one K=V after {words[0]!r}",
                        EXIT_USAGE)
    match: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.strip().partition("=")
        if not sep or not key:
            raise ToolError(f"headers binding condition {pair!r} is not K=V", EXIT_USAGE)
        match[key] = value
    match["x-match"] = words[0]
    return match


async def run(args: argparse.Namespace) -> int:
    _parse_words(args)
    setup_logging(args.verbose)
    words = _split_words(args)
    command, rest = (words[0], words[1:]) if words else ("", [])
    _check_usage(command, rest)  # usage errors before connecting
    _parse_arguments(args.argument)
    if command == "add" and rest[0] == "queue":
        args.queue_properties = queue_arguments(args)  # its notes once, before connecting
    async with open_target(args) as target:
        if command == "":
            return await _summary(target, args)
        if command in ("queues", "exchanges"):
            return await _list(target, args, command, rest[0] if rest else "")
        if command == "list":
            return await _list_type(target, args, rest[0])
        if command == "add":
            return await _add(target, args, rest)
        if command == "del":
            return await _delete(target, args, rest)
        if command == "log":
            return await _log(target, rest)
        if command == "reload-acl":
            return await _reload_acl(target)
        if command == "shutdown":
            return await _shutdown(target)
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
        if n < 2:
            raise usage("add queue NAME | add exchange TYPE NAME | add TYPE NAME")
        if rest[0] == "queue" and n != 2:
            raise usage("add queue takes one NAME")
        if rest[0] == "exchange":
            if n != 3:
                raise usage("add exchange takes TYPE and NAME")
            if rest[1] not in EXCHANGE_TYPES:
                raise usage(f"exchange type {rest[1]!r} is not one of "
                            f"{', '.join(EXCHANGE_TYPES)}")
        if n != 2 and rest[0] != "exchange":
            raise usage(f"add {rest[0]} takes one NAME")
    elif command == "del":
        if n != 2:
            raise usage("del queue NAME | del exchange NAME | del TYPE NAME")
    elif command == "list":
        if n != 1:
            raise usage("list takes one TYPE (queue, exchange, binding, connection ...)")
    elif command == "log":
        if n > 1:
            raise usage("log takes at most one LEVEL (for example 'info+')")
    elif command in ("reload-acl", "shutdown"):
        if n:
            raise usage(f"{command} takes no arguments")
    elif command in ("bind", "unbind"):
        if n < 2:
            raise usage(f"{command} takes EXCHANGE QUEUE [KEY]")
        if any("/" in word for word in rest[:3]):
            raise usage("names and keys with '/' cannot be bound by name")
    else:
        raise usage(f"unknown command {command!r}")


# --------------------------------------------------------------------------- reading


def _matches(name: str, pattern: str) -> bool:
    if not pattern:
        return True
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(name, pattern)
    return pattern in name


def _queue_attributes(q: QmfObject, alt: str | None) -> str:
    """The queue's options as qpid-config lists them (same order)."""
    args = dict(q.get("arguments") or {})
    attrs = []
    if q.get("durable"):
        attrs.append("--durable")
    if REPLICATE in args:
        attrs.append(f"--replicate={args[REPLICATE]}")
    if q.get("autoDelete"):
        attrs.append("auto-del")
    if q.get("exclusive"):
        attrs.append("excl")
    for key, option in QUEUE_SHOWN:
        if key in args:
            value = str(args[key])
            attrs.append(f"{option}={value.replace('_', '-') if key == POLICY_TYPE else value}")
    if alt:
        attrs.append(f"--alternate-exchange={alt}")
    for key, option in QUEUE_SHOWN_AFTER_ALT:
        if key in args:
            attrs.append(f"{option}={args[key]}")
    if args.get(SHARED_GROUPS) == 1:
        attrs.append("--shared-groups")
    attrs += [f"--argument {k}={v}" for k, v in args.items() if k not in SPECIAL]
    return " ".join(attrs)


def _exchange_attributes(e: QmfObject, alt: str | None) -> str:
    """The exchange's options as qpid-config lists them (same order)."""
    args = dict(e.get("arguments") or {})
    attrs = []
    if e.get("durable"):
        attrs.append("--durable")
    if e.get("autoDelete"):
        attrs.append("auto-del")
    if REPLICATE in args:
        attrs.append(f"--replicate={args[REPLICATE]}")
    if args.get(MSG_SEQUENCE):
        attrs.append("--sequence")
    if args.get(IVE):
        attrs.append("--ive")
    if alt:
        attrs.append(f"--alternate-exchange={alt}")
    attrs += [f"--argument {k}={v}" for k, v in args.items() if k not in SPECIAL]
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


def _ref_name(names: dict[ObjectId, str], ref: Any) -> str | None:
    """The name an object reference points at (None: no reference, or unknown)."""
    if not isinstance(ref, ObjectId):
        return None
    return names.get(ref)


async def _list(target: Target, args: argparse.Namespace, what: str, pattern: str) -> int:
    """``queues`` / ``exchanges`` [FILTER], with ``-r`` their bindings.

    Raises:
        ToolError: FILTER matches nothing (exit code 1, as qpid-config).
    """
    exchanges = await target.objects("exchange")
    queues = await target.objects("queue") if what == "queues" or args.bindings else []
    if not queues and what == "queues":
        await target.require_class("queue", what=what)
    if not args.console_queues:
        queues = [q for q in queues
                  if not (isinstance(q.get("name"), str) and is_console_queue(q.get("name")))]
    objs = queues if what == "queues" else exchanges
    if not objs and what == "exchanges":
        await target.require_class(what[:-1], what=what)
    ex_names = {e.get_object_id(): str(e.get("name")) for e in exchanges}
    objs = sorted((o for o in objs if _matches(str(o.get("name")), pattern)),
                  key=lambda o: str(o.get("name")))
    if pattern and not objs:
        if args.json:
            print_json([])
        raise ToolError(f"no {what} match {pattern!r} on {target.where}", EXIT_ERROR)
    if what == "exchanges" and args.ignore_default:
        objs = [e for e in objs if e.get("name") != ""]
    bindings: list[tuple[str, str, str, dict[str, Any]]] = []
    if args.bindings:
        bindings = await _bindings(target, exchanges, queues)
        if args.ignore_default:
            bindings = [b for b in bindings if b[0] != ""]
    if what == "queues":
        rows = []
        for q in objs:
            alt = _ref_name(ex_names, q.get("altExchange"))
            rows.append({"name": q.get("name"), "durable": bool(q.get("durable")),
                         "auto_delete": bool(q.get("autoDelete")),
                         "exclusive": bool(q.get("exclusive")),
                         "alternate_exchange": alt,
                         "arguments": dict(q.get("arguments") or {}),
                         "attributes": _queue_attributes(q, alt)})
        if args.bindings:
            for row in rows:
                row["bindings"] = [{"exchange": ex, "key": key, "arguments": bargs}
                                   for ex, qn, key, bargs in bindings if qn == row["name"]]
        columns = [Column("name", "Queue Name"), Column("attributes", "Attributes")]
        if args.bindings:
            columns += [Column("exchange", "Bound to", _ex_name), Column("key", "Key"),
                        Column("match", "Arguments")]
    else:
        rows = []
        for e in objs:
            alt = _ref_name(ex_names, e.get("altExchange"))
            rows.append({"name": e.get("name"), "type": e.get("type"),
                         "durable": bool(e.get("durable")),
                         "auto_delete": bool(e.get("autoDelete")),
                         "alternate_exchange": alt,
                         "arguments": dict(e.get("arguments") or {}),
                         "attributes": _exchange_attributes(e, alt)})
        if args.bindings:
            for row in rows:
                row["bindings"] = [{"queue": qn, "key": key, "arguments": bargs}
                                   for ex, qn, key, bargs in bindings if ex == row["name"]]
        columns = [Column("type", "Type"), Column("name", "Exchange Name", _ex_name),
                   Column("attributes", "Attributes")]
        if args.bindings:
            columns += [Column("key", "Key"), Column("queue", "Queue"),
                        Column("match", "Arguments")]
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
        bindings = [{**b, "match": " ".join(f"{k}={v}" for k, v in b["arguments"].items())}
                    for b in row["bindings"]] or [{}]
        out.append({**row, **bindings[0]})
        out += bindings[1:]
    return out


async def _bindings(target: Target, exchanges: list[QmfObject], queues: list[QmfObject]
                    ) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(exchange, queue, key, arguments) of every binding, names resolved through the
    references."""
    ex_names = {e.get_object_id(): str(e.get("name")) for e in exchanges}
    q_names = {q.get_object_id(): str(q.get("name")) for q in queues}
    out = []
    for b in await target.objects("binding"):
        ex, qn = ex_names.get(b.get("exchangeRef")), q_names.get(b.get("queueRef"))
        if ex is not None and qn is not None:
            out.append((ex, qn, str(b.get("bindingKey", "")), dict(b.get("arguments") or {})))
    return sorted(out, key=lambda b: b[:3])


# --------------------------------------------------------------------------- list TYPE


async def _find_package(target: Target, cls: str) -> str | None:
    """The package serving class ``cls``: qpidd's broker package first."""
    if await target.class_known(cls):
        return PACKAGE
    for package in sorted(await target.session.get_packages(_timeout=target.timeout)):
        if package == PACKAGE:
            continue
        keys = await target.session.get_classes(package, _timeout=target.timeout)
        if any(k.name == cls for k in keys):
            return package
    return None


def _ref_class(prop: Any) -> str | None:
    """The class a reference property points at: the schema's, else ``xxxRef`` -> xxx."""
    if getattr(prop, "ref_class", None):
        return str(prop.ref_class).lower()
    name = str(prop.name)
    return name[:-3] if name.endswith("Ref") else None


def _cell(value: Any) -> str:
    """A ``list`` cell: an absent value as ``n/a``, as qpid-config."""
    return "n/a" if value is None else plain(value)


async def _list_type(target: Target, args: argparse.Namespace, cls: str) -> int:
    """``list TYPE``: the objects of a class, with qpid-config's default properties
    (or the first six), or those of ``--show-property``; references as names.

    Raises:
        ToolError: no agent serves the class (not-found code).
    """
    package = await _find_package(target, cls)
    if package is None:
        raise ToolError(f"no class {cls!r} on {target.where}", EXIT_NOT_FOUND)
    objs = await target.objects(cls, package=package)
    if objs:
        schema = objs[0].get_schema()
    else:
        keys = [k for k in await target.session.get_classes(package, _timeout=target.timeout)
                if k.name == cls]
        schema = await target.session.get_schema(keys[0], _timeout=target.timeout)
    names = [p.name for p in schema.properties] + [s.name for s in schema.statistics]
    if "name" in names:
        names.remove("name")
        names.insert(0, "name")
    if args.show_property:
        shown = []
        for p in args.show_property:
            if p in names:
                shown.append(p)
            else:
                print(f"qmf config: warning: no property {p!r} for type {cls!r}",
                      file=sys.stderr)
    else:
        shown = list(DEFAULT_PROPERTIES.get(cls, names[:6]))
    # references as the names of the objects they point at
    refs = {p.name: _ref_class(p) for p in schema.properties
            if p.type == QmfType.REF and p.name in shown}
    ref_names: dict[ObjectId, str] = {}
    for ref_cls in sorted({c for c in refs.values() if c}):
        for o in await target.objects(ref_cls, package=PACKAGE):
            name = o.get("name")
            ref_names[o.get_object_id()] = str(name) if name is not None else o.get_index()
    rows = []
    for o in objs:
        row: dict[str, Any] = {}
        for p in shown:
            value = o.get(p)
            if p in refs and isinstance(value, ObjectId):
                value = ref_names.get(value, str(value))
            row[p] = value
        rows.append(row)
    if args.json:
        print_json(jsonable(rows))
        return 0
    print(f"Objects of type {cls!r}")
    render_table([Column(p, p, _cell) for p in shown], rows)
    return 0


# --------------------------------------------------------------------------- changing


async def _call(target: Target, method: str, **arguments: Any) -> None:
    broker = await target.broker_object()
    try:
        await broker.invoke(method, _timeout=target.timeout, **arguments)
    except MethodError as exc:
        code = EXIT_NOT_FOUND if exc.text.startswith("not-found") else EXIT_METHOD
        hint = ""
        if "exchange type: xml" in exc.text:
            hint = "; this broker has no XML exchange (qpidd's xml module is not loaded)"
        raise ToolError(f"{method} failed: {exc.text} (status {exc.status}){hint}",
                        code) from exc


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


async def _shutdown(target: Target) -> int:
    """``shutdown``: the broker's ``shutdown`` method (as qpid-config); the connection
    closing under the call is the expected end.

    Raises:
        ToolError: the broker refused (method code) or neither answered nor closed
            the connection in time (no-agent code).
    """
    broker = await target.broker_object()
    try:
        await broker.invoke("shutdown", _timeout=target.timeout)
    except TransportError:
        pass  # the broker closed the connection: it is going down
    except MethodError as exc:
        raise ToolError(f"shutdown failed: {exc.text} (status {exc.status})",
                        EXIT_METHOD) from exc
    except QmfTimeout as exc:
        raise ToolError(f"shutdown: no answer from {target.where} within "
                        f"{target.timeout:g}s", EXIT_NO_AGENT) from exc
    print(f"broker on {target.where} shut down")
    return 0


async def _objects_by_name(target: Target, cls: str) -> dict[str, QmfObject]:
    objs = await target.objects(cls)
    if not objs:
        await target.require_class(cls, what=f"{cls}s")
    return {str(o.get("name")): o for o in objs}


async def _add(target: Target, args: argparse.Namespace, rest: list[str]) -> int:
    if rest[0] == "queue":
        name = rest[1]
        await _call(target, "create", type="queue", name=name,
                    properties=args.queue_properties, strict=True)
        print(f"queue {name!r} created")
        if args.start_replica:
            await _start_replica(target, name, args.start_replica)
    elif rest[0] == "exchange":
        ex_type, name = rest[1], rest[2]
        await _call(target, "create", type="exchange", name=name,
                    properties=exchange_arguments(args, ex_type), strict=True)
        print(f"exchange {name!r} ({ex_type}) created")
    else:
        what, name = rest
        await _call(target, "create", type=what, name=name,
                    properties=_parse_arguments(args.argument), strict=False)
        print(f"{what} {name!r} created")
    return 0


async def _start_replica(target: Target, queue: str, url: str) -> None:
    """``--start-replica``: the HA module's ``replicate`` for the new queue.

    Raises:
        ToolError: no HA module (not-found code), or the call failed (method code).
    """
    ha = await target.objects("habroker", package="org.apache.qpid.ha", what="HA broker")
    if not ha:
        raise ToolError(f"queue {queue!r} created, but --start-replica needs the HA module, "
                        f"which the broker on {target.where} has not loaded", EXIT_NOT_FOUND)
    try:
        await ha[0].invoke("replicate", broker=url, queue=queue, _timeout=target.timeout)
    except MethodError as exc:
        raise ToolError(f"replicate failed: {exc.text} (status {exc.status})",
                        EXIT_METHOD) from exc
    print(f"queue {queue!r} replicating from {url}")


async def _delete(target: Target, args: argparse.Namespace, rest: list[str]) -> int:
    what, name = rest
    options: dict[str, Any] = {}
    if what in ("queue", "exchange"):
        if name not in await _objects_by_name(target, what):
            raise not_found(what, name, target.where)
    elif await _named_class(target, what):
        # qpidd deletes a link or bridge it does not have silently: say so
        if name not in {str(o.get("name")) for o in await target.objects(what)}:
            raise not_found(what, name, target.where)
    if what == "queue":
        options = {"if_empty": not (args.force or args.force_if_not_empty),
                   "if_unused": not (args.force or args.force_if_used)}
    await _call(target, "delete", type=what, name=name, options=options)
    print(f"{what} {name!r} deleted")
    return 0


async def _named_class(target: Target, cls: str) -> bool:
    """Whether qpidd's broker package has class ``cls`` with a ``name`` property."""
    if not await target.class_known(cls):
        return False
    keys = [k for k in await target.session.get_classes(PACKAGE, _timeout=target.timeout)
            if k.name == cls]
    schema = await target.session.get_schema(keys[0], _timeout=target.timeout)
    return any(p.name == "name" for p in schema.properties)


def _read_xquery(path: str) -> str:
    """Raises: ToolError: the file cannot be read (usage code)."""
    if path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise ToolError(f"cannot read the XQuery file {path!r}: {exc.strerror}",
                        EXIT_USAGE) from exc


async def _bind(target: Target, args: argparse.Namespace, command: str, rest: list[str]
                ) -> int:
    """``bind`` / ``unbind`` EXCHANGE QUEUE [KEY] (headers: ``all|any K=V ...`` after
    the key; XML: ``-f FILE``).

    Raises:
        ToolError: no such exchange or queue (not-found code), words or ``-f`` that do
            not fit the exchange's type (usage code), the broker refused (method code).
    """
    exchange, queue = rest[0], rest[1]
    key = rest[2] if len(rest) > 2 else ""
    extra = rest[3:]
    exchanges = await _objects_by_name(target, "exchange")
    if exchange not in exchanges:
        raise not_found("exchange", exchange, target.where)
    if queue not in await _objects_by_name(target, "queue"):
        raise not_found("queue", queue, target.where)
    ex_type = str(exchanges[exchange].get("type"))
    if extra and ex_type != "headers":
        raise ToolError(f"{' '.join(extra)!r} after the key: only headers exchanges take "
                        f"match conditions ({exchange!r} is {ex_type})", EXIT_USAGE)
    if args.file and (command != "bind" or ex_type != "xml"):
        raise ToolError(f"-f is for binding to an XML exchange ({exchange!r} is {ex_type})",
                        EXIT_USAGE)
    binding = f"{exchange}/{queue}/{key}"
    if command == "unbind":
        await _call(target, "delete", type="binding", name=binding, options={})
        print(f"unbound {queue!r} from {_ex_name(exchange)} (key {key!r})")
        return 0
    properties = _parse_arguments(args.argument)
    if ex_type == "headers" and (extra or "x-match" not in properties):
        properties.update(headers_match(extra))
    if ex_type == "xml":
        if not args.file:
            raise ToolError("binding to an XML exchange wants -f FILE (or -f - for stdin)",
                            EXIT_USAGE)
        properties["xquery"] = _read_xquery(args.file)
    await _call(target, "create", type="binding", name=binding, properties=properties,
                strict=True)
    print(f"bound {queue!r} to {_ex_name(exchange)} with key {key!r}")
    return 0
