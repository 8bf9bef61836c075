"""``qmf route``: federation links and routes between qpidd brokers, like qpid-route.

    qmf route [OPTIONS] dynamic add <dest> <src> <exchange> [tag] [exclude-list] [mechanism]
    qmf route [OPTIONS] dynamic del <dest> <src> <exchange>

    qmf route [OPTIONS] route add   <dest> <src> <exchange> <routing-key> [tag] [exclude-list]
                                    [mechanism]
    qmf route [OPTIONS] route del   <dest> <src> <exchange> <routing-key>
    qmf route [OPTIONS] queue add   <dest> <src> <exchange> <queue> [mechanism]
    qmf route [OPTIONS] queue del   <dest> <src> <exchange> <queue>
    qmf route [OPTIONS] route list  [<dest>]
    qmf route [OPTIONS] route flush [<dest>]
    qmf route [OPTIONS] route map   [<broker>]

    qmf route [OPTIONS] link add  <dest> <src> [mechanism]
    qmf route [OPTIONS] link del  <dest> <src>
    qmf route [OPTIONS] link list [<dest>]

<dest> and <src> are the destination and source brokers, written as the qpid tools take
them (``[user[/password]@]host[:port]``) or as ``amqp://`` URLs; a listing without one
asks $QMF_URL, else localhost.  The tool
connects to the destination broker (the source broker with ``-s``), makes the link
with the broker object's ``connect`` method and the route with the link's ``bridge``
method; ``del`` closes the matching bridge (and with ``-e`` the link, once empty).

Exit codes: 0 ok; 1 duplicate route (0 with -q), link failed, other errors;
2 bad command line; 3 broker unreachable; 4 login refused; 5 no such link or route
(0 with -q); 6 a method call failed; 7 no management agent answered.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from qmf_async import MethodError, QmfObject, QmfTimeout, Session
from qmf_async.transport import (
    add_connection_arguments,
    broker_url,
    connection_arguments,
    parse_url,
)

from ._common import (
    EXIT_ERROR,
    EXIT_METHOD,
    EXIT_NOT_FOUND,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    EXPECTED_ERRORS,
    ToolError,
    print_json,
    resolve_url,
)
from ._help import RAW_DESCRIPTION
from ._render import (
    Column,
    Target,
    _positive,
    close_quietly,
    help_text,
    jsonable,
    render_table,
    setup_logging,
)

__all__ = ["add_parser", "run", "Address", "parse_address"]

#: the credit qpid-route gives a bridge by default (unlimited)
UNLIMITED_CREDIT = 0xFFFFFFFF
#: link states that are still on their way to Operational / Failed
TRANSITIONAL = ("Waiting", "Connecting", "Closing")
#: how long ``add`` waits for a new link to settle (as qpid-route does, about 3 s)
LINK_SETTLE_S = 3.0

#: group -> command -> (fewest, most) words after the command
ARITY: dict[str, dict[str, tuple[int, int]]] = {
    "link": {"add": (2, 3), "del": (2, 2), "list": (0, 1)},
    "dynamic": {"add": (3, 6), "del": (3, 3)},
    "route": {"add": (4, 7), "del": (4, 4), "list": (0, 1), "flush": (0, 1), "map": (0, 1)},
    "queue": {"add": (4, 5), "del": (4, 4)},
}


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "route", help="federation links and routes between qpidd brokers (like qpid-route)",
        description=help_text(__doc__.split("\n\n")[0]),
        epilog=help_text(__doc__.split("\n\n", 1)[1]),
        formatter_class=RAW_DESCRIPTION,
        usage="qmf route [OPTIONS] GROUP COMMAND [BROKERS ...] [ARGS ...]")
    parser.add_argument("words", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    _add_options(parser)
    parser.set_defaults(run=run)


def _add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--timeout", type=_positive, default=10.0, metavar="SECS",
                        help="seconds to wait for a broker connection and each answer "
                             "(default 10)")
    parser.add_argument("-v", "--verbose", action="store_true", help="verbose output")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="quiet: a duplicate route or a missing route/link to delete "
                             "is not an error; do not wait for a new link")
    parser.add_argument("-d", "--durable", action="store_true",
                        help="added links and routes survive a broker restart")
    parser.add_argument("-e", "--del-empty-link", action="store_true",
                        help="delete the link after deleting its last route")
    parser.add_argument("-s", "--src-local", action="store_true",
                        help="connect to the source broker and push (not for dynamic routes)")
    parser.add_argument("--ack", type=int, default=0, metavar="N",
                        help="acknowledge transfers over the bridge in batches of N")
    parser.add_argument("--credit", type=int, default=UNLIMITED_CREDIT, metavar="MSGS",
                        help="most messages a sender may have outstanding (0: unlimited)")
    parser.add_argument("-t", "--transport", default="tcp", metavar="TRANSPORT",
                        help="transport of the links (default tcp)")
    add_connection_arguments(parser, sasl_flag="--client-sasl-mechanism")
    parser.add_argument("--json", action="store_true",
                        help="machine output (link list, route list, route map)")
    parser.add_argument("--qmf-version", type=int, choices=(1, 2), default=1,
                        help="QMF version spoken to the broker (default 1, qpidd's fast path)")


class _WordsParser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, usage exit code
        raise _usage(message)


def _usage(why: str) -> ToolError:
    return ToolError(f"{why} (see qmf route --help)", EXIT_USAGE)


def _parse_words(args: argparse.Namespace) -> list[str]:
    """Options may stand anywhere among the words (``route add -d ...``): parse them
    too; return the words.

    Raises:
        ToolError: an unknown option or a bad value (usage code).
    """
    parser = _WordsParser(prog="qmf route", add_help=False)
    parser.add_argument("words", nargs="*")
    _add_options(parser)
    namespace = argparse.Namespace(**{k: v for k, v in vars(args).items() if k != "words"})
    # "--" ends the options, so a word may start with "-"
    parser.parse_intermixed_args(args.words, namespace=namespace)
    words = list(namespace.words)
    vars(args).update(vars(namespace))
    return words


def _check_usage(words: list[str], args: argparse.Namespace) -> None:
    """Raises: ToolError (usage code) for a malformed command line."""
    if len(words) < 2:
        raise _usage("give a group and a command: link|dynamic|route|queue add|del|list ...")
    group, command, rest = words[0], words[1], words[2:]
    if group not in ARITY:
        raise _usage(f"unknown group {group!r} (link, dynamic, route or queue)")
    if command not in ARITY[group]:
        raise _usage(f"unknown command {group} {command!r} "
                     f"({', '.join(ARITY[group])})")
    fewest, most = ARITY[group][command]
    if not fewest <= len(rest) <= most:
        wanted = str(fewest) if fewest == most else f"{fewest} to {most}"
        raise _usage(f"{group} {command} takes {wanted} arguments, got {len(rest)}")
    if group == "dynamic" and args.src_local:
        raise _usage("--src-local is not permitted on dynamic routes")
    if args.ack < 0 or not 0 <= args.credit <= UNLIMITED_CREDIT:
        raise _usage("--ack and --credit take a count from 0")


# --------------------------------------------------------------------------- addresses


@dataclass(frozen=True)
class Address:
    """A broker as written on the command line, with what a link to it needs."""

    text: str
    url: str
    host: str
    port: int
    user: str | None
    password: str | None

    @property
    def name(self) -> str:
        """``host:port`` (as qpid-route prints a broker)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_address(text: str) -> Address:
    """A broker address (``[user[/password]@]host[:port]`` or an ``amqp://`` URL).

    Raises:
        UsageError: not a broker address.
    """
    url = broker_url(text)
    parsed = parse_url(url)
    parts = urlsplit(url)
    user = unquote(parts.username) if parts.username is not None else None
    password = unquote(parts.password) if parts.password is not None else None
    return Address(text, url, parsed.host, parsed.port, user, password)


async def _addresses_of(host: str, port: int) -> set[str]:
    loop = asyncio.get_running_loop()
    try:
        infos = await asyncio.wait_for(
            loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), timeout=5.0)
    except (TimeoutError, OSError):
        return {host}
    return {str(info[4][0]) for info in infos}


async def _same_broker(host_a: str, port_a: int, host_b: str, port_b: int) -> bool:
    """Whether two host:port pairs name the same listener (host names resolved)."""
    if port_a != port_b:
        return False
    if host_a == host_b:
        return True
    return bool(await _addresses_of(host_a, port_a) & await _addresses_of(host_b, port_b))


# --------------------------------------------------------------------------- sessions


@contextlib.asynccontextmanager
async def _open(args: argparse.Namespace, url: str) -> AsyncIterator[Target]:
    """A session with the broker at ``url``; closed on exit.

    Raises:
        ToolError: unreachable, also when connecting times out.
        TransportError, AuthenticationError, UsageError: from ``add_broker``.
    """
    session = Session(qmf_version=args.qmf_version, timeout=args.timeout,
                      broker_timeout=min(2.0, args.timeout), rcv_objects=False,
                      rcv_events=False)
    try:
        try:
            broker = await session.add_broker(url, timeout=args.timeout,
                                              **connection_arguments(args))
        except QmfTimeout as exc:
            raise ToolError(f"cannot reach the broker: {exc}", EXIT_UNREACHABLE) from exc
        yield Target(session, broker.where, label=None, timeout=args.timeout)
    finally:
        await close_quietly(session)


def _say(args: argparse.Namespace, text: str) -> None:
    if args.verbose:
        print(text, flush=True)


async def _invoke(obj: QmfObject, method: str, target: Target, **arguments: Any) -> None:
    """Raises: ToolError (method code) when the call returns an error status."""
    try:
        await obj.invoke(method, _timeout=target.timeout, **arguments)
    except MethodError as exc:
        raise ToolError(f"{method} failed: {exc.text} (status {exc.status})",
                        EXIT_METHOD) from exc


# --------------------------------------------------------------------------- links


async def _links(target: Target) -> list[QmfObject]:
    links = await target.objects("link")
    if not links:
        await target.require_class("link", what="links")
    return links


async def _find_link(target: Target, remote: Address) -> QmfObject | None:
    for link in await target.objects("link"):
        if await _same_broker(str(link.get("host")), int(link.get("port") or 0),
                              remote.host, remote.port):
            return link
    return None


async def _add_link(target: Target, args: argparse.Namespace, local: Address,
                    remote: Address, mechanism: str) -> None:
    """Make the link to ``remote`` unless there is one already.

    Raises:
        ToolError: the link would loop back to ``local`` (usage), the call failed.
    """
    if await _same_broker(local.host, local.port, remote.host, remote.port):
        raise ToolError(f"linking a broker to itself is not permitted ({local.name})",
                        EXIT_USAGE)
    if await _find_link(target, remote) is not None:
        _say(args, f"link to {remote.name} exists")
        return
    broker = await target.broker_object()
    await _invoke(broker, "connect", target, host=remote.host, port=remote.port,
                  durable=args.durable, authMechanism=mechanism,
                  username=remote.user or "", password=remote.password or "",
                  transport=args.transport)


async def _settled_link(target: Target, args: argparse.Namespace,
                        remote: Address) -> QmfObject:
    """The link to ``remote`` once it left its transitional states (at most about 3 s;
    at once with ``-q``).

    Raises:
        ToolError: there is no such link, or it failed.
    """
    deadline = time.monotonic() + (0.0 if args.quiet else min(LINK_SETTLE_S, args.timeout))
    link = await _find_link(target, remote)
    while (link is None or link.get("state") in TRANSITIONAL) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        link = await _find_link(target, remote)
    if link is None:
        raise ToolError(f"the link to {remote.name} was not created", EXIT_ERROR)
    state, error = link.get("state"), link.get("lastError") or ""
    if state == "Failed":
        raise ToolError(f"the link to {remote.name} failed: {error}".rstrip(": "), EXIT_ERROR)
    _say(args, f"Link state is {state}")
    if state == "Waiting" and error and not args.quiet:
        print(f"qmf route: warning: the link to {remote.name} is waiting to reconnect: "
              f"{error}", file=sys.stderr)
    return link


async def _link_add(target: Target, args: argparse.Namespace, local: Address,
                    remote: Address, mechanism: str) -> int:
    await _add_link(target, args, local, remote, mechanism)
    await _settled_link(target, args, remote)
    return 0


async def _link_del(target: Target, args: argparse.Namespace, local: Address,
                    remote: Address) -> int:
    link = await _find_link(target, remote)
    if link is None:
        raise ToolError(f"no link from {remote.name} to {local.name}", EXIT_NOT_FOUND)
    await _invoke(link, "close", target)
    _say(args, f"link to {remote.name} closed")
    return 0


def _link_row(link: QmfObject) -> dict[str, Any]:
    return {"name": link.get("name"), "host": link.get("host"), "port": link.get("port"),
            "transport": link.get("transport"), "durable": bool(link.get("durable")),
            "state": link.get("state"), "last_error": link.get("lastError") or ""}


async def _link_list(target: Target, args: argparse.Namespace) -> int:
    rows = [_link_row(link) for link in await _links(target)]
    rows.sort(key=lambda r: (str(r["host"]), int(r["port"] or 0)))
    if args.json:
        print_json(jsonable(rows))
    elif not rows:
        print("No Links Found")
    else:
        render_table((Column("host", "Host"), Column("port", "Port", numeric=True),
                      Column("transport", "Transport"),
                      Column("durable", "Durable", lambda v: "Y" if v else "N"),
                      Column("state", "State"), Column("last_error", "Last Error")), rows)
    return 0


# --------------------------------------------------------------------------- routes


def _on_link(bridge: QmfObject, link: QmfObject) -> bool:
    return bool(bridge.get("linkRef") == link.get_object_id())


async def _add_bridge(target: Target, args: argparse.Namespace, link: QmfObject, *,
                      src: str, dest: str, key: str, tag: str, excludes: str,
                      src_is_queue: bool, dynamic: bool) -> int:
    for bridge in await target.objects("bridge"):
        if (_on_link(bridge, link) and bridge.get("src") == src and bridge.get("dest") == dest
                and (bridge.get("key") or "") == key
                and bool(bridge.get("srcIsQueue")) == src_is_queue
                and bool(bridge.get("srcIsLocal")) == args.src_local
                and bool(bridge.get("dynamic")) == dynamic):
            if args.quiet:
                return 0
            raise ToolError(f"duplicate route - ignoring: {dest}({key or src})", EXIT_ERROR)
    _say(args, "Creating inter-broker binding...")
    await _invoke(link, "bridge", target, durable=args.durable, src=src, dest=dest, key=key,
                  tag=tag, excludes=excludes, srcIsQueue=src_is_queue,
                  srcIsLocal=args.src_local, dynamic=dynamic, sync=args.ack,
                  credit=args.credit)
    _say(args, "Bridge created")
    return 0


async def _route_add(target: Target, args: argparse.Namespace, local: Address,
                     remote: Address, *, exchange: str, key: str, tag: str, excludes: str,
                     mechanism: str, dynamic: bool) -> int:
    await _add_link(target, args, local, remote, mechanism)
    link = await _settled_link(target, args, remote)
    return await _add_bridge(target, args, link, src=exchange, dest=exchange, key=key,
                             tag=tag, excludes=excludes, src_is_queue=False, dynamic=dynamic)


async def _queue_add(target: Target, args: argparse.Namespace, local: Address,
                     remote: Address, *, exchange: str, queue: str, mechanism: str) -> int:
    await _add_link(target, args, local, remote, mechanism)
    link = await _settled_link(target, args, remote)
    return await _add_bridge(target, args, link, src=queue, dest=exchange, key="", tag="",
                             excludes="", src_is_queue=True, dynamic=False)


async def _delete_bridge(target: Target, args: argparse.Namespace, local: Address,
                         remote: Address, matches: Any) -> int:
    """Close the first bridge on the link to ``remote`` for which ``matches(bridge)``;
    with ``-e``, the link too once no bridge is left on it.

    Raises:
        ToolError: no link or no such route (not-found code; 0 with -q), a close failed.
    """
    link = await _find_link(target, remote)
    if link is None:
        if args.quiet:
            return 0
        raise ToolError(f"no link from {remote.name} to {local.name}", EXIT_NOT_FOUND)
    bridges = [b for b in await target.objects("bridge") if _on_link(b, link)]
    for bridge in bridges:
        if matches(bridge) and bool(bridge.get("srcIsLocal")) == args.src_local:
            _say(args, "Closing bridge...")
            await _invoke(bridge, "close", target)
            if args.del_empty_link and len(bridges) == 1:
                _say(args, "Last bridge on link, closing link...")
                await _invoke(link, "close", target)
            return 0
    if args.quiet:
        return 0
    raise ToolError("route not found", EXIT_NOT_FOUND)


def _route_row(local: Address, bridge: QmfObject, link: QmfObject) -> dict[str, Any]:
    return {"broker": local.name, "link": link.get("name"),
            "src_broker": f"{link.get('host')}:{link.get('port')}",
            "src_host": link.get("host"), "src_port": link.get("port"),
            "bridge": bridge.get("name"), "src": bridge.get("src"),
            "dest": bridge.get("dest"), "key": bridge.get("key") or "",
            "tag": bridge.get("tag") or "", "excludes": bridge.get("excludes") or "",
            "dynamic": bool(bridge.get("dynamic")), "src_is_queue": bool(bridge.get("srcIsQueue")),
            "src_is_local": bool(bridge.get("srcIsLocal")), "durable": bool(bridge.get("durable")),
            "credit": bridge.get("credit"), "sync": bridge.get("sync")}


async def _routes(target: Target, local: Address) -> list[dict[str, Any]]:
    links = {link.get_object_id(): link for link in await target.objects("link")}
    rows = []
    for bridge in await target.objects("bridge"):
        link = links.get(bridge.get("linkRef"))
        if link is not None:
            rows.append(_route_row(local, bridge, link))
    rows.sort(key=lambda r: (r["src_broker"], r["dest"], r["key"] or r["src"]))
    return rows


async def _route_list(target: Target, args: argparse.Namespace, local: Address) -> int:
    rows = await _routes(target, local)
    if not rows:
        await target.require_class("bridge", what="routes")
    if args.json:
        print_json(jsonable(rows))
        return 0
    for row in rows:  # one line a route, as qpid-route prints it
        key = "<dynamic>" if row["dynamic"] else (row["key"] or row["src"])
        print(f"{row['broker']} {row['src_broker']} {row['dest']} {key:>10} "
              f"{row['src_is_local']}")
    return 0


async def _route_flush(target: Target, args: argparse.Namespace, local: Address) -> int:
    code = 0
    for row, bridge in await _bridges_with_rows(target, local):
        _say(args, f"Deleting bridge: {row['src_broker']} {row['dest']} "
                   f"{row['key'] or row['src']}")
        try:
            await _invoke(bridge, "close", target)
        except ToolError as exc:
            print(f"qmf route: error: {exc}", file=sys.stderr)
            code = exc.code
    if args.del_empty_link:
        for link in await target.objects("link"):
            _say(args, f"Deleting link: {link.get('host')}:{link.get('port')}")
            try:
                await _invoke(link, "close", target)
            except ToolError as exc:
                print(f"qmf route: error: {exc}", file=sys.stderr)
                code = exc.code
    return code


async def _bridges_with_rows(target: Target, local: Address
                             ) -> list[tuple[dict[str, Any], QmfObject]]:
    links = {link.get_object_id(): link for link in await target.objects("link")}
    out = []
    for bridge in await target.objects("bridge"):
        link = links.get(bridge.get("linkRef"))
        if link is not None:
            out.append((_route_row(local, bridge, link), bridge))
        else:
            out.append(({"src_broker": "?", "dest": bridge.get("dest"),
                         "key": bridge.get("key") or "", "src": bridge.get("src")}, bridge))
    return out


# --------------------------------------------------------------------------- map


async def _route_map(args: argparse.Namespace, local: Address) -> int:
    """Walk the links from ``local`` to every broker they reach; print the routes."""
    found: dict[str, list[dict[str, Any]]] = {}  # broker name -> its routes
    brokers: list[dict[str, Any]] = []
    show = not args.json
    if show:
        print()
        print("Finding Linked Brokers:")
    pending: list[Address] = [local]
    seen = {local.name}
    while pending:
        address = pending.pop(0)
        try:
            async with _open(args, address.url) as target:
                routes = await _routes(target, address)
                links = await target.objects("link")
        except EXPECTED_ERRORS as exc:
            if address is local:
                raise
            brokers.append({"broker": address.name, "ok": False, "error": str(exc)})
            if show:
                print(f"    {address.name}... failed: {exc}")
            continue
        brokers.append({"broker": address.name, "ok": True, "error": ""})
        if show:
            print(f"    {address.name}... Ok")
        found[address.name] = routes
        for link in links:
            linked = _linked_address(local, str(link.get("host")), int(link.get("port") or 0))
            if linked.name not in seen:
                seen.add(linked.name)
                pending.append(linked)
    every = [row for name in found for row in found[name]]
    dynamic = _dynamic_pairs([r for r in every if r["dynamic"]])
    static = [_static(r) for r in every if not r["dynamic"]]
    if args.json:
        print_json(jsonable({"brokers": brokers, "dynamic": dynamic, "static": static}))
        return 0
    print()
    print("Dynamic Routes:")
    if not dynamic:
        print("  none found")
    print()
    for group in dynamic:
        print(f"  Exchange {group['exchange']}:")
        for pair in group["pairs"]:
            arrow = "<=>" if pair["bidirectional"] else " =>"
            print(f"    {pair['from']} {arrow} {pair['to']}")
        print()
    print("Static Routes:")
    if not static:
        print("  none found")
    print()
    for route in static:
        print("  " + route["text"])
    if static:
        print()
    return 0


def _linked_address(local: Address, host: str, port: int) -> Address:
    """The broker at the far end of a link, reached with ``local``'s credentials."""
    shown = f"[{host}]" if ":" in host else host
    creds = ""
    if local.user is not None:
        creds = local.user + (f"/{local.password}" if local.password is not None else "") + "@"
    url = broker_url(f"{creds}{shown}:{port}")
    return Address(f"{shown}:{port}", url, host, port, local.user, local.password)


def _dynamic_pairs(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Dynamic routes by exchange: (source broker => destination broker) pairs, one
    pair marked bidirectional where routes run both ways."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        pairs = groups.setdefault(str(row["src"]), [])
        src, dst = row["src_broker"], row["broker"]
        for pair in pairs:
            if (pair["from"], pair["to"]) == (src, dst):
                break
            if (pair["from"], pair["to"]) == (dst, src):
                pair["bidirectional"] = True
                break
        else:
            pairs.append({"from": src, "to": dst, "bidirectional": False})
    return [{"exchange": ex, "pairs": pairs} for ex, pairs in groups.items()]


def _static(row: dict[str, Any]) -> dict[str, Any]:
    """A static route, and its line as qpid-route's map shows it."""
    here, there = row["broker"], row["src_broker"]
    if row["src_is_local"]:  # pushed from here to there
        arrow, left, right = "=>", row["src"], row["dest"]
        left_type, right_type = ("queue" if row["src_is_queue"] else "ex"), "ex"
    else:  # pulled from there to here
        arrow, left, right = "<=", row["dest"], row["src"]
        left_type, right_type = "ex", ("queue" if row["src_is_queue"] else "ex")
    text = f"{here}({left_type}={left}) {arrow} {there}({right_type}={right})"
    if not row["src_is_queue"]:
        text += f" key={row['key']}"
    return {"broker": here, "src_broker": there, "src": row["src"], "dest": row["dest"],
            "key": row["key"], "src_is_queue": row["src_is_queue"],
            "src_is_local": row["src_is_local"], "text": text}


# --------------------------------------------------------------------------- run


def _local_and_remote(args: argparse.Namespace, rest: list[str]
                      ) -> tuple[Address, Address | None]:
    """The broker to connect to and the one the link reaches (``-s`` swaps them).

    Raises:
        UsageError: a malformed address.
    """
    if not rest:
        return parse_address(resolve_url(None)), None
    if len(rest) == 1:
        return parse_address(rest[0]), None
    dest, src = parse_address(rest[0]), parse_address(rest[1])
    return (src, dest) if args.src_local else (dest, src)


async def run(args: argparse.Namespace) -> int:
    words = _parse_words(args)
    setup_logging(args.verbose)
    _check_usage(words, args)
    group, command, rest = words[0], words[1], words[2:]
    listing = command in ("list", "flush", "map")
    local, remote = _local_and_remote(args, rest[:1] if listing else rest[:2])
    extra = rest[2:]

    def opt(i: int) -> str:
        return extra[i] if len(extra) > i else ""

    if (group, command) == ("route", "map"):
        return await _route_map(args, local)
    async with _open(args, local.url) as target:
        if command == "list":
            if group == "link":
                return await _link_list(target, args)
            return await _route_list(target, args, local)
        if command == "flush":
            return await _route_flush(target, args, local)
        assert remote is not None
        if group == "link":
            if command == "add":
                return await _link_add(target, args, local, remote, opt(0))
            return await _link_del(target, args, local, remote)
        if group == "dynamic":
            if command == "add":
                return await _route_add(target, args, local, remote, exchange=extra[0],
                                        key="", tag=opt(1), excludes=opt(2),
                                        mechanism=opt(3), dynamic=True)
            return await _delete_bridge(
                target, args, local, remote,
                lambda b: (b.get("dest") == extra[0] and bool(b.get("dynamic"))
                           and not b.get("srcIsQueue")))
        if group == "route":
            if command == "add":
                return await _route_add(target, args, local, remote, exchange=extra[0],
                                        key=extra[1], tag=opt(2), excludes=opt(3),
                                        mechanism=opt(4), dynamic=False)
            return await _delete_bridge(
                target, args, local, remote,
                lambda b: (b.get("dest") == extra[0] and (b.get("key") or "") == extra[1]
                           and not b.get("dynamic") and not b.get("srcIsQueue")))
        if command == "add":
            return await _queue_add(target, args, local, remote, exchange=extra[0],
                                    queue=extra[1], mechanism=opt(2))
        return await _delete_bridge(
            target, args, local, remote,
            lambda b: (b.get("dest") == extra[0] and b.get("src") == extra[1]
                       and bool(b.get("srcIsQueue"))))
