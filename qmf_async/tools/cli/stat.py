"""``qmf stat``: broker statistics, like qpid-stat.

Views: ``-g`` general (the default), ``-c`` connections, ``-e`` exchanges,
``-q [QUEUE]`` queues or one queue in detail, ``-u`` subscriptions, ``-m`` memory.
Tables sort by the first column unless ``-S COL`` (decreasing; ``-I`` increasing) and
stop after ``-L`` rows (default 50, 0 for all).  ``--json`` prints the raw values.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

from qmf_async import QmfObject

from ._common import EXIT_NOT_FOUND, ToolError, print_json
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
    _num("cpid"),
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
    _num("procId"),
    Column("browse", "browse", fmt_bool),
    Column("acked", "acked", fmt_bool),
    Column("excl", "excl", fmt_bool),
    Column("creditMode", "creditMode"),
    _num("delivered"),
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
        formatter_class=argparse.RawDescriptionHelpFormatter)
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
    parser.add_argument("-S", "--sort-by", metavar="COL", default=None,
                        help="sort by this column (decreasing unless -I)")
    parser.add_argument("-I", "--increasing", action="store_true",
                        help="sort by increasing value")
    parser.add_argument("-L", "--limit", type=int, default=50, metavar="N",
                        help="show at most N rows (default 50, 0 for all)")
    parser.set_defaults(run=run, view=None)


async def run(args: argparse.Namespace) -> int:
    setup_logging(args.verbose)
    if args.queue is not None:
        if "://" in args.queue and args.url is None:  # ``stat -q URL``
            args.url, args.queue = args.queue, ""
        args.view = "queue" if args.queue else "queues"
    view = args.view or "general"
    if args.limit < 0:
        raise ToolError("--limit must be >= 0", 2)
    async with open_target(args) as target:
        if view == "general":
            return await _general(target, args)
        if view == "queue":
            return await _queue(target, args, args.queue)
        return await _listing(target, args, view)


# --------------------------------------------------------------------------- listings


async def _listing(target: Target, args: argparse.Namespace, view: str) -> int:
    columns: Sequence[Column]
    if view == "exchanges":
        objs = await target.objects("exchange")
        columns, rows, title = EXCHANGE_COLUMNS, [_exchange_row(o) for o in objs], "Exchanges"
    elif view == "queues":
        objs = await target.objects("queue")
        columns, rows, title = QUEUE_COLUMNS, [_queue_row(o) for o in objs], "Queues"
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
        return _details(args, objs, "Broker Memory Statistics")
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
    if args.sort_by:
        rows = sort_rows(rows, find_column(columns, args.sort_by), increasing=args.increasing)
    else:
        rows = sort_rows(rows, columns[0], increasing=True)
    total = len(rows)
    if args.limit:
        rows = rows[:args.limit]
    if args.json:
        print_json(jsonable(rows))
    else:
        render_table(columns, rows, title=title)
    if len(rows) < total:
        err_console().print(f"(showing {len(rows)} of {total} rows; -L 0 shows all)",
                            highlight=False)
    return 0


def _exchange_row(o: QmfObject) -> dict[str, Any]:
    return {"exchange": o.get("name"), "type": o.get("type"), "dur": o.get("durable"),
            "bind": o.get("bindingCount"), "msgIn": o.get("msgReceives"),
            "msgOut": o.get("msgRoutes"), "msgDrop": o.get("msgDrops"),
            "byteIn": o.get("byteReceives"), "byteOut": o.get("byteRoutes"),
            "byteDrop": o.get("byteDrops")}


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
            "delivered": s.get("delivered")})
    return rows


# --------------------------------------------------------------------------- details


def _describe(o: QmfObject) -> dict[str, Any]:
    updated, created, deleted = o.get_timestamps()
    agent = o.get_agent()
    return {"object_id": str(o.get_object_id()), "class": str(o.get_class_key()),
            "agent": agent.label if agent else None, "updated": updated, "created": created,
            "deleted": deleted, "properties": o.get_properties(),
            "statistics": o.get_statistics()}


def _details(args: argparse.Namespace, objs: list[QmfObject], title: str) -> int:
    if args.json:
        print_json(jsonable([_describe(o) for o in objs]))
        return 0
    console = out_console()
    for o in objs:
        agent = o.get_agent()
        console.print(f"{title}: {o.get_index() or o.get_object_id()} (agent "
                      f"{agent.label if agent else '?'}, last sample "
                      f"{fmt_time(o.get_timestamps()[0])})", highlight=False, markup=False)
        render_table(DETAIL_COLUMNS, detail_rows(o), console=console)
    return 0


async def _queue(target: Target, args: argparse.Namespace, name: str) -> int:
    found = await target.objects("queue", name=name)
    if not found:
        await target.require_class("queue", what="queues")
        raise not_found("queue", name, target.where)
    if args.json:
        data = [_describe(o) for o in found]
        print_json(jsonable(data[0] if len(data) == 1 else data))
        return 0
    console = out_console()
    for o in found:
        agent = o.get_agent()
        updated, created, _ = o.get_timestamps()
        console.print(f"Queue '{name}' (object {o.get_object_id()}, agent "
                      f"{agent.label if agent else '?'}, created {fmt_time(created)}, "
                      f"last sample {fmt_time(updated)})", highlight=False, markup=False)
        render_table(DETAIL_COLUMNS, detail_rows(o), console=console)
    return 0


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
        aggregate = [{"statistic": name, "messages": b.get(msg),
                      "bytes": b.get(byte) if byte else None}
                     for name, msg, byte in AGGREGATE if b.get(msg) is not None]
        reports.append((b, summary, aggregate))
    if args.json:
        print_json(jsonable([{**_describe(b), "summary": s,
                              "aggregate": {r["statistic"]: {"messages": r["messages"],
                                                             "bytes": r["bytes"]} for r in a}}
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
