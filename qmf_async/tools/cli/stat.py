"""``qmf stat``: broker statistics, like qpid-stat.

Views: ``-g`` general (the default), ``-c`` connections, ``-e`` exchanges,
``-q [QUEUE]`` queues or one queue in detail, ``-u`` subscriptions, ``-m`` memory,
``--acl`` the access control list module.  As with qpid-stat, ``-q -b HOST QUEUE`` and
``-b HOST -q QUEUE`` both show one queue; the consoles' own reply and topic queues are
left out of ``-q`` unless ``--console-queues``.  Tables list every row, by the first column;
``-S COL`` sorts by COL, decreasing unless ``-I``, and keeps the first ``-L`` rows
(default 50, 0 for all).  ``--json`` prints the raw values.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from qmf_async import QmfObject
from qmf_async.names import is_console_queue

from ._common import EXIT_NOT_FOUND, ToolError, maybe_terminal, print_json
from ._help import RAW_DESCRIPTION
from ._render import (
    DETAIL_COLUMNS,
    Column,
    Target,
    add_query_options,
    detail_rows,
    err_console,
    find_column,
    fmt_bool,
    fmt_bytes,
    fmt_count,
    fmt_duration,
    fmt_time,
    help_text,
    jsonable,
    not_found,
    open_target,
    out_console,
    render_table,
    setup_logging,
    sort_rows,
)

__all__ = ["add_parser", "run"]


def _num(key: str, header: str | None = None) -> Column:
    return Column(key, header or key, fmt_count, numeric=True)


def _size(key: str, header: str | None = None) -> Column:
    return Column(key, header or key, fmt_bytes, numeric=True)


def _pid(key: str) -> Column:
    """A process id: a number, shown without thousands separators."""
    return Column(key, key, lambda v: "" if v is None else str(v), numeric=True)


EXCHANGE_COLUMNS = (
    Column("exchange", "exchange", lambda v: "(default)" if v == "" else str(v)),
    Column("type", "type"),
    Column("dur", "dur", fmt_bool),
    _num("bind"),
    _num("msgIn"),
    _num("msgOut"),
    _num("msgDrop"),
    _size("byteIn"),
    _size("byteOut"),
    _size("byteDrop"),
)

QUEUE_COLUMNS = (
    Column("queue", "queue"),
    Column("dur", "dur", fmt_bool),
    Column("autoDel", "autoDel", fmt_bool),
    Column("excl", "excl", fmt_bool),
    _num("msg"),
    _num("msgIn"),
    _num("msgOut"),
    _size("bytes"),
    _size("bytesIn"),
    _size("bytesOut"),
    _num("cons"),
    _num("bind"),
)

CONNECTION_COLUMNS = (
    Column("connection", "connection"),
    Column("cproc", "cproc"),
    _pid("cpid"),
    Column("mech", "mech"),
    Column("auth", "auth"),
    Column("connected", "connected", fmt_duration, numeric=True),
    Column("idle", "idle", fmt_duration, numeric=True),
    _num("msgIn"),
    _num("msgOut"),
)

SUBSCRIPTION_COLUMNS = (
    Column("subscr", "subscr"),
    Column("queue", "queue"),
    Column("conn", "conn"),
    Column("procName", "procName"),
    _pid("procId"),
    Column("browse", "browse", fmt_bool),
    Column("acked", "acked", fmt_bool),
    Column("excl", "excl", fmt_bool),
    Column("creditMode", "creditMode"),
    _num("delivered"),
    _num("sessUnacked"),
)

SUMMARY_COLUMNS = (
    Column("broker", "broker"),
    Column("agent", "agent"),
    Column("version", "version"),
    Column("uptime", "uptime", fmt_duration, numeric=True),
    Column("connections", "connections", lambda v: "-" if v is None else fmt_count(v),
           numeric=True),
    Column("sessions", "sessions", lambda v: "-" if v is None else fmt_count(v), numeric=True),
    _num("exchanges"),
    _num("queues"),
)

#: qpid-stat -g: (row name, message statistic, byte statistic)
AGGREGATE = (
    ("queue-depth", "msgDepth", "byteDepth"),
    ("total-enqueues", "msgTotalEnqueues", "byteTotalEnqueues"),
    ("total-dequeues", "msgTotalDequeues", "byteTotalDequeues"),
    ("persistent-enqueues", "msgPersistEnqueues", "bytePersistEnqueues"),
    ("persistent-dequeues", "msgPersistDequeues", "bytePersistDequeues"),
    ("transactional-enqueues", "msgTxnEnqueues", "byteTxnEnqueues"),
    ("transactional-dequeues", "msgTxnDequeues", "byteTxnDequeues"),
    ("flow-to-disk-depth", "msgFtdDepth", "byteFtdDepth"),
    ("flow-to-disk-enqueues", "msgFtdEnqueues", "byteFtdEnqueues"),
    ("flow-to-disk-dequeues", "msgFtdDequeues", "byteFtdDequeues"),
    ("acquires", "acquires", None),
    ("releases", "releases", None),
    ("discards-no-route", "discardsNoRoute", None),
    ("discards-ttl-expired", "discardsTtl", None),
    ("discards-limit-overflow", "discardsOverflow", None),
    ("discards-ring-overflow", "discardsRing", None),
    ("discards-lvq-replace", "discardsLvq", None),
    ("discards-subscriber-reject", "discardsSubscriber", None),
    ("discards-purged", "discardsPurge", None),
    ("reroutes", "reroutes", None),
    ("abandoned", "abandoned", None),
    ("abandoned-via-alt", "abandonedViaAlt", None),
)
AGGREGATE_COLUMNS = (
    Column("statistic", "Statistic"),
    _num("messages", "Messages"),
    _size("bytes", "Bytes"),
)


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "stat", help="broker statistics (like qpid-stat)", description=help_text(__doc__),
        formatter_class=RAW_DESCRIPTION)
    add_query_options(parser)
    views = parser.add_mutually_exclusive_group()
    views.add_argument("-g", "--general", dest="view", action="store_const", const="general",
                       help="general broker information (default)")
    views.add_argument("-c", "--connections", dest="view", action="store_const",
                       const="connections", help="connections")
    views.add_argument("-e", "--exchanges", dest="view", action="store_const",
                       const="exchanges", help="exchanges")
    views.add_argument("-q", "--queues", dest="queue", nargs="?", const="", default=None,
                       metavar="QUEUE", help="queues, or one queue in detail")
    views.add_argument("-u", "--subscriptions", dest="view", action="store_const",
                       const="subscriptions", help="subscriptions")
    views.add_argument("-m", "--memory", dest="view", action="store_const", const="memory",
                       help="broker memory statistics")
    views.add_argument("--acl", dest="view", action="store_const", const="acl",
                       help="access control list statistics")
    parser.add_argument("-S", "--sort-by", metavar="COL", default=None,
                        help="sort by this column (decreasing unless -I)")
    parser.add_argument("-I", "--increasing", action="store_true",
                        help="sort by increasing value")
    parser.add_argument("-L", "--limit", type=int, default=50, metavar="N",
                        help="with -S, show the first N rows (default 50, 0 for all)")
    parser.add_argument("--console-queues", action="store_true",
                        help="with -q, list the consoles' own reply and topic queues too")
    parser.set_defaults(run=run, view=None)


async def run(args: argparse.Namespace) -> int:
    setup_logging(args.verbose)
    if args.queue is not None:
        _queue_argument(args)
        args.view = "queue" if args.queue else "queues"
    view = args.view or "general"
    if args.limit < 0:
        raise ToolError("--limit must be >= 0", 2)
    async with open_target(args) as target:
        if view == "general":
            return await _general(target, args)
        if view == "queue":
            return await _queue(target, args, args.queue)
        if view == "acl":
            return await _acl(target, args)
        return await _listing(target, args, view)


def _queue_argument(args: argparse.Namespace) -> None:
    """Sort out ``-q``'s optional QUEUE and the broker positional, as qpid-stat's
    ``-q [options] [queue-name]``: with ``-b`` given, the positional is the queue."""
    if args.queue and "://" in args.queue and args.url is None:  # ``stat -q URL``
        args.url, args.queue = args.queue, ""
    if not args.queue and args.url is not None and args.broker is not None:
        args.queue, args.url = args.url, None  # ``stat -q -b HOST QUEUE``


# --------------------------------------------------------------------------- listings


async def _listing(target: Target, args: argparse.Namespace, view: str) -> int:
    columns: Sequence[Column]
    if view == "exchanges":
        objs = await target.objects("exchange")
        columns, rows, title = EXCHANGE_COLUMNS, [_exchange_row(o) for o in objs], "Exchanges"
    elif view == "queues":
        objs = await target.objects("queue")
        shown = objs if args.console_queues else [o for o in objs if not _console_queue(o)]
        columns, rows, title = QUEUE_COLUMNS, [_queue_row(o) for o in shown], "Queues"
    elif view == "connections":
        objs = await _required(target, "connection", "connections")
        now = time.time_ns()
        columns, rows = CONNECTION_COLUMNS, [_connection_row(o, now) for o in objs]
        title = "Connections"
    elif view == "subscriptions":
        objs = await _required(target, "subscription", "subscriptions")
        columns, rows = SUBSCRIPTION_COLUMNS, await _subscription_rows(target, objs)
        title = "Subscriptions"
    else:  # memory
        objs = await _required(target, "memory", "memory statistics")
        return _memory(args, objs)
    if not objs and view in ("exchanges", "queues"):
        await target.require_class(view[:-1], what=view)
    return _print_rows(args, columns, rows, title)


async def _required(target: Target, cls: str, what: str) -> list[QmfObject]:
    objs = await target.objects(cls)
    if not objs:
        await target.require_class(cls, what=what)
    return objs


def _print_rows(args: argparse.Namespace, columns: Sequence[Column],
                rows: list[dict[str, Any]], title: str) -> int:
    total = len(rows)
    if args.sort_by:  # as qpid-stat: -L counts only with -S
        rows = sort_rows(rows, find_column(columns, args.sort_by), increasing=args.increasing)
        if args.limit:
            rows = rows[:args.limit]
    else:
        rows = sort_rows(rows, columns[0], increasing=True)
    if args.json:
        print_json(jsonable(rows))
    elif len(rows) > RICH_MAX_ROWS or not maybe_terminal(sys.stdout) \
            or not out_console().is_terminal:
        _plain_table(columns, rows, title)
    else:
        render_table(columns, rows, title=title)
    if len(rows) < total:
        err_console().print(f"(showing {len(rows)} of {total} rows; -L 0 shows all)",
                            highlight=False)
    return 0


#: longer listings are laid out by :func:`_plain_table` also on a terminal
RICH_MAX_ROWS = 1000


def _width(text: str) -> int:
    """The cells ``text`` takes on a terminal (rich's count, loaded for non-ASCII only)."""
    if text.isascii():
        return len(text)
    from rich.cells import cell_len

    return cell_len(text)


def _plain_table(columns: Sequence[Column], rows: list[dict[str, Any]], title: str) -> None:
    """The table as ``render_table`` lays it out on a pipe (title, header, rule, cells
    three spaces apart, numbers on the right, no trailing blanks), in a fraction of its
    time: qpid-stat -q on 10,000 queues."""
    cells = [[col.fmt(row.get(col.key)) for col in columns] for row in rows]
    widths = [_width(col.header) for col in columns]
    for line in cells:
        for i, text in enumerate(line):
            w = _width(text)
            if w > widths[i]:
                widths[i] = w
    right = [col.numeric for col in columns]

    def lay(line: Sequence[str]) -> str:
        parts = []
        for text, width, numeric in zip(line, widths, right, strict=True):
            pad = " " * (width - _width(text))
            parts.append(pad + text if numeric else text + pad)
        return "   ".join(parts).rstrip()

    out = [title, lay([col.header for col in columns]),
           "\u2500" * (sum(widths) + 3 * (len(widths) - 1))]
    out.extend(lay(line) for line in cells)
    sys.stdout.write("\n".join(out) + "\n")
    sys.stdout.flush()


def _exchange_row(o: QmfObject) -> dict[str, Any]:
    return {"exchange": o.get("name"), "type": o.get("type"), "dur": o.get("durable"),
            "bind": o.get("bindingCount"), "msgIn": o.get("msgReceives"),
            "msgOut": o.get("msgRoutes"), "msgDrop": o.get("msgDrops"),
            "byteIn": o.get("byteReceives"), "byteOut": o.get("byteRoutes"),
            "byteDrop": o.get("byteDrops")}


def _console_queue(o: QmfObject) -> bool:
    """A console's own reply or topic queue (``qmf_async.names.is_console_queue``)."""
    name = o.get("name")
    return isinstance(name, str) and is_console_queue(name)


def _queue_row(o: QmfObject) -> dict[str, Any]:
    return {"queue": o.get("name"), "dur": o.get("durable"), "autoDel": o.get("autoDelete"),
            "excl": o.get("exclusive"), "msg": o.get("msgDepth"),
            "msgIn": o.get("msgTotalEnqueues"), "msgOut": o.get("msgTotalDequeues"),
            "bytes": o.get("byteDepth"), "bytesIn": o.get("byteTotalEnqueues"),
            "bytesOut": o.get("byteTotalDequeues"),
            "cons": o.get("consumerCount", o.get("consumers")),
            "bind": o.get("bindingCount", o.get("bindings"))}


def _connection_row(o: QmfObject, now: int) -> dict[str, Any]:
    updated, created, _ = o.get_timestamps()
    return {"connection": o.get("address"), "cproc": o.get("remoteProcessName"),
            "cpid": o.get("remotePid"), "mech": o.get("saslMechanism"),
            "auth": o.get("authIdentity"), "connected": max(0, now - created) if created else None,
            "idle": max(0, now - updated) if updated else None,
            "msgIn": o.get("msgsFromClient"), "msgOut": o.get("msgsToClient")}


async def _subscription_rows(target: Target, subs: list[QmfObject]) -> list[dict[str, Any]]:
    queues: dict[Any, QmfObject] = {}
    sessions: dict[Any, QmfObject] = {}
    connections: dict[Any, QmfObject] = {}
    if subs:
        queues = {q.get_object_id(): q for q in await target.objects("queue")}
        sessions = {s.get_object_id(): s for s in await target.objects("session")}
        connections = {c.get_object_id(): c for c in await target.objects("connection")}
    rows = []
    for s in subs:
        queue = queues.get(s.get("queueRef"))
        sess = sessions.get(s.get("sessionRef"))
        conn = connections.get(sess.get("connectionRef")) if sess is not None else None
        rows.append({
            "subscr": s.get("name"), "queue": queue.get("name") if queue else None,
            "conn": conn.get("address") if conn else (sess.get("name") if sess else None),
            "procName": conn.get("remoteProcessName") if conn else None,
            "procId": conn.get("remotePid") if conn else None,
            "browse": s.get("browsing"), "acked": s.get("acknowledged"),
            "excl": s.get("exclusive"), "creditMode": s.get("creditMode"),
            "delivered": s.get("delivered"),
            "sessUnacked": sess.get("unackedMessages") if sess else None})
    return rows


# --------------------------------------------------------------------------- details


def _describe(o: QmfObject) -> dict[str, Any]:
    updated, created, deleted = o.get_timestamps()
    agent = o.get_agent()
    return {"object_id": str(o.get_object_id()), "class": str(o.get_class_key()),
            "agent": agent.label if agent else None, "updated": updated, "created": created,
            "deleted": deleted, "properties": o.get_properties(),
            "statistics": o.get_statistics()}


MEMORY_COLUMNS = (Column("statistic", "Statistic"), _num("value", "Value"))


def _per_object(args: argparse.Namespace, objs: list[QmfObject], title: str,
                columns: Sequence[Column],
                rows_of: Callable[[QmfObject], list[dict[str, Any]]]) -> int:
    """One statistic/value table per object (its agent named when there are several);
    ``--json``: the objects as :func:`_describe` gives them."""
    if args.json:
        print_json(jsonable([_describe(o) for o in objs]))
        return 0
    console = out_console()
    for i, o in enumerate(objs):
        if i:
            console.print()
        agent = o.get_agent()
        named = f"{title} (agent {agent.label})" if len(objs) > 1 and agent else title
        render_table(columns, rows_of(o), title=named, console=console)
    return 0


def _memory_rows(o: QmfObject) -> list[dict[str, Any]]:
    values = {**o.get_properties(), **o.get_statistics()}
    return [{"statistic": k, "value": v} for k, v in values.items() if k != "name"]


def _memory(args: argparse.Namespace, objs: list[QmfObject]) -> int:
    """qpid-stat -m: every value of the ``memory`` object but its name."""
    return _per_object(args, objs, "Broker Memory Statistics", MEMORY_COLUMNS, _memory_rows)


#: qpid-stat -q QUEUE's statistics: (row name, message statistic, byte statistic)
QUEUE_AGGREGATE = tuple(row for row in AGGREGATE if row[0] not in (
    "discards-no-route", "abandoned", "abandoned-via-alt"))


def _aggregate(o: QmfObject, rows: Sequence[tuple[str, str, str | None]]
               ) -> list[dict[str, Any]]:
    """qpid-stat's Statistic / Messages / Bytes rows of ``o`` (those it has)."""
    return [{"statistic": name, "messages": o.get(msg), "bytes": o.get(byte) if byte else None}
            for name, msg, byte in rows if o.get(msg) is not None]


def _by_statistic(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["statistic"]: {"messages": r["messages"], "bytes": r["bytes"]} for r in rows}


async def _queue(target: Target, args: argparse.Namespace, name: str) -> int:
    """One queue: qpid-stat's statistics rows, then every property and statistic.

    Raises:
        ToolError: no such queue (not-found code), or nobody serves queues.
    """
    found = await target.objects("queue", name=name)
    if not found:
        await target.require_class("queue", what="queues")
        raise not_found("queue", name, target.where)
    if args.json:
        data = [{**_describe(o), "aggregate": _by_statistic(_aggregate(o, QUEUE_AGGREGATE))}
                for o in found]
        print_json(jsonable(data[0] if len(data) == 1 else data))
        return 0
    console = out_console()
    for i, o in enumerate(found):
        if i:
            console.print()
        agent = o.get_agent()
        updated, created, _ = o.get_timestamps()
        console.print(f"Queue '{name}' (object {o.get_object_id()}, agent "
                      f"{agent.label if agent else '?'}, created {fmt_time(created)}, "
                      f"last sample {fmt_time(updated)})", highlight=False, markup=False)
        console.print()
        render_table(AGGREGATE_COLUMNS, _aggregate(o, QUEUE_AGGREGATE), title="Statistics",
                     console=console)
        console.print()
        render_table(DETAIL_COLUMNS, detail_rows(o), title="Properties and statistics",
                     console=console)
    return 0


# --------------------------------------------------------------------------- acl

#: the package of qpidd's access control list module
ACL_PACKAGE = "org.apache.qpid.acl"
#: qpid-stat's words when the broker has no ACL module
NO_ACL = "ACL Policy Module is not installed"

ACL_COLUMNS = (Column("statistic", "Statistic"), Column("value", "Value"))


def _long_time(ns: Any) -> str:
    """An absolute time in ns as ``2024-05-01 14:02:11 UTC`` (``-`` for none)."""
    if not ns:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ns / 1e9))


def _acl_rows(o: QmfObject) -> list[dict[str, Any]]:
    """qpid-stat --acl's rows (then the module's limits and other denials)."""
    return [
        {"statistic": "policy-file", "value": o.get("policyFile") or ""},
        {"statistic": "enforcing", "value": "Y" if o.get("enforcingAcl") else "N"},
        {"statistic": "has-transfer-acls", "value": "Y" if o.get("transferAcl") else "N"},
        {"statistic": "last-acl-load", "value": _long_time(o.get("lastAclLoad"))},
        {"statistic": "acl-denials", "value": fmt_count(o.get("aclDenyCount"))},
        {"statistic": "connection-denials", "value": fmt_count(o.get("connectionDenyCount"))},
        {"statistic": "queue-quota-denials", "value": fmt_count(o.get("queueQuotaDenyCount"))},
        {"statistic": "max-connections", "value": fmt_count(o.get("maxConnections"))},
        {"statistic": "max-connections-per-ip",
         "value": fmt_count(o.get("maxConnectionsPerIp"))},
        {"statistic": "max-connections-per-user",
         "value": fmt_count(o.get("maxConnectionsPerUser"))},
        {"statistic": "max-queues-per-user", "value": fmt_count(o.get("maxQueuesPerUser"))},
    ]


async def _acl(target: Target, args: argparse.Namespace) -> int:
    """The ACL module's statistics; qpid-stat's note (exit 0, ``[]`` with --json) when
    the broker has no ACL module.

    Raises:
        ToolError: no management agent answers at all (no-agent code).
    """
    objs = await target.objects("acl", package=ACL_PACKAGE, what="acl")
    if not objs:
        # a broker answers but has no ACL module: qpid-stat says so and exits 0
        await target.require_class("broker", what="brokers")
        if args.json:
            print_json([])
        else:
            out_console().print(NO_ACL, highlight=False, markup=False)
        return 0
    return _per_object(args, objs, "ACL Policy Statistics", ACL_COLUMNS, _acl_rows)


# --------------------------------------------------------------------------- general


async def _count(target: Target, cls: str, by_agent: dict[Any, int]) -> bool:
    """Count ``cls`` objects per agent into ``by_agent``; False when nobody serves it."""
    objs = await target.objects(cls)
    for o in objs:
        agent = o.get_agent()
        key = (agent.broker_bank, agent.agent_bank) if agent else None
        by_agent[key] = by_agent.get(key, 0) + 1
    return bool(objs) or await target.class_known(cls)


async def _general(target: Target, args: argparse.Namespace) -> int:
    brokers = await target.objects("broker")
    if not brokers:
        await target.require_class("broker", what="brokers")
        raise ToolError(f"no broker object on {target.where}", EXIT_NOT_FOUND)
    counts: dict[str, dict[Any, int]] = {}
    served: dict[str, bool] = {}
    for cls in ("connection", "session", "exchange", "queue"):
        counts[cls] = {}
        served[cls] = await _count(target, cls, counts[cls])
    reports = []
    for b in sorted(brokers, key=lambda o: str(o.get("name"))):
        agent = b.get_agent()
        key = (agent.broker_bank, agent.agent_bank) if agent else None
        summary = {"broker": b.get("name"), "agent": agent.label if agent else None,
                   "version": b.get("version"), "uptime": b.get("uptime"),
                   **{f"{cls}s": counts[cls].get(key, 0) if served[cls] else None
                      for cls in ("connection", "session", "exchange", "queue")}}
        aggregate = _aggregate(b, AGGREGATE)
        reports.append((b, summary, aggregate))
    if args.json:
        print_json(jsonable([{**_describe(b), "summary": s, "aggregate": _by_statistic(a)}
                             for b, s, a in reports]))
        return 0
    console = out_console()
    for i, (_b, summary, aggregate) in enumerate(reports):
        if i:
            console.print()
        render_table(SUMMARY_COLUMNS, [summary], title="Broker Summary", console=console)
        console.print()
        render_table(AGGREGATE_COLUMNS, aggregate, title="Aggregate Broker Statistics",
                     console=console)
    return 0
