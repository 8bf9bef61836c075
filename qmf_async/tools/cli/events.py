"""``qmf events``: print QMF events from one or more brokers, one line each, like
qpid-printevents.

Several URLs share one session.  Lost connections are re-established in the
background (noted on stderr).  ``--count N`` stops after N events, ``--duration S``
after S seconds; with both, not getting N events in time exits with code 1.
``-t/--timeout`` is the wait for each first connection, as in the other tools;
``--heartbeats`` asks for AMQP heartbeats every 5 s, as qpid-printevents does, so a
broker that goes silent is noticed within about 10 s.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from qmf_async import SEVERITY_NAMES, Event, QmfTimeout, SelectorError, Session
from qmf_async.transport import with_heartbeat

from ._common import (
    EXIT_ERROR,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    ConnectionNotes,
    ToolError,
    add_broker_option,
    connection_arguments,
    note,
    resolve_urls,
)
from ._help import RAW_DESCRIPTION
from ._render import (
    close_quietly,
    fmt_time,
    help_text,
    plain,
    print_json_line,
    setup_logging,
)

__all__ = ["add_parser", "run"]

#: seconds between AMQP heartbeats with --heartbeats (qpid-printevents uses 5)
HEARTBEAT = 5

#: accepted --severity spellings -> level (0 emerg .. 7 debug)
SEVERITY_ALIASES = {name: level for level, name in enumerate(SEVERITY_NAMES)}
SEVERITY_ALIASES.update({"err": 3, "warning": 4, "inform": 6, "critical": 2,
                         "emergency": 0})


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "events", help="print events from one or more brokers (like qpid-printevents)",
        description=help_text(__doc__), formatter_class=RAW_DESCRIPTION)
    parser.add_argument("urls", nargs="*", metavar="URL",
                        help="broker URLs or addresses (default: $QMF_URL or "
                             "amqp://guest:guest@localhost:5672/)")
    add_broker_option(parser, multiple=True)
    parser.add_argument("--severity", metavar="LEVEL", default=None,
                        help="only events at least this severe: emerg, alert, crit, error, "
                             "warn, notice, info, debug (or 0-7)")
    parser.add_argument("--where", metavar="SELECTOR", default=None,
                        help="JMS selector over the event arguments, e.g. \"qName LIKE 'a%%'\"")
    parser.add_argument("--class", dest="event_class", metavar="NAME", default=None,
                        help="only events of this class (e.g. queueDeclare)")
    parser.add_argument("--count", type=int, default=0, metavar="N",
                        help="stop after N events (default: run until interrupted)")
    parser.add_argument("--duration", type=float, default=0.0, metavar="S",
                        help="stop after S seconds (default: no limit)")
    parser.add_argument("-t", "--timeout", type=float, default=10.0, metavar="S",
                        help="seconds to wait for each first connection (default 10)")
    parser.add_argument("--connect-timeout", dest="timeout", type=float,
                        help=argparse.SUPPRESS)  # the former name of -t/--timeout
    parser.add_argument("--heartbeats", action="store_const", const=HEARTBEAT, default=None,
                        help=f"AMQP heartbeats every {HEARTBEAT} s, as qpid-printevents: a "
                             f"silent broker is noticed within about {2 * HEARTBEAT} s")
    parser.add_argument("--json", action="store_true", help="one JSON document per event")
    parser.add_argument("--quiet", action="store_true",
                        help="no notes on stderr (listening, reconnecting)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what happens")
    parser.set_defaults(run=run)


def severity_level(text: str) -> int:
    """A --severity value as a level 0..7.

    Raises:
        ToolError: unknown level (usage code).
    """
    low = text.strip().lower()
    if low.isdigit() and 0 <= int(low) <= 7:
        return int(low)
    if low in SEVERITY_ALIASES:
        return SEVERITY_ALIASES[low]
    raise ToolError(f"unknown severity {text!r} (use one of {', '.join(SEVERITY_NAMES)})",
                    EXIT_USAGE)


def _note(text: str) -> None:
    note("events", text)


def _line(ev: Event) -> str:
    agent = ev.agent
    key = ev.class_key
    parts = [fmt_time(ev.timestamp), f"{ev.severity_name:<6}", f"{key.package}:{key.name}"]
    if agent is not None:
        parts.append(f"broker={agent.broker_url}")
        parts.append(f"agent={_quote(agent.label or f'{agent.broker_bank}.{agent.agent_bank}')}")
    parts += [f"{name}={_quote(plain(value))}" for name, value in ev.arguments.items()]
    return " ".join(parts)


def _quote(text: str) -> str:
    return f'"{text}"' if (" " in text or not text) else text


def _record(ev: Event) -> dict[str, Any]:
    agent = ev.agent
    return {"timestamp": ev.timestamp, "severity": ev.severity_name,
            "class": f"{ev.class_key.package}:{ev.class_key.name}",
            "package": ev.class_key.package, "event": ev.class_key.name,
            "broker": agent.broker_url if agent else None,
            "agent": agent.label if agent else None,
            "agent_banks": f"{agent.broker_bank}.{agent.agent_bank}" if agent else None,
            "arguments": dict(ev.arguments)}


async def run(args: argparse.Namespace) -> int:
    setup_logging(args.verbose)
    severity = severity_level(args.severity) if args.severity is not None else None
    if args.count < 0 or args.duration < 0 or args.timeout <= 0:
        raise ToolError("--count and --duration must be >= 0, --timeout > 0", EXIT_USAGE)
    urls = resolve_urls(args.urls, args.broker)
    if args.heartbeats:
        urls = [with_heartbeat(url, args.heartbeats) for url in urls]
    connection = connection_arguments(args)
    notes = ConnectionNotes("events", args.quiet)
    session = Session(console=notes, manage_connections=True, rcv_objects=False,
                      timeout=args.timeout)
    try:
        try:
            events = session.events(where=args.where, _class=args.event_class,
                                    severity=severity)
        except SelectorError as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ToolError(f"bad --where selector {args.where!r}: {first}", EXIT_USAGE) from exc
        brokers = [await session.add_broker(url, timeout=args.timeout,
                                                **connection)
                   for url in urls]
        down = [b for b in brokers if not b.connected]
        if len(down) == len(brokers) and down[0].error is not None:
            error = down[0].error  # nothing to listen to: say why (unreachable, login ...)
            if isinstance(error, QmfTimeout):
                raise ToolError(f"cannot reach the broker: {error}", EXIT_UNREACHABLE)
            raise error
        for b in down:
            if not args.quiet:
                _note(f"cannot connect to {b.where} ({b.error}); retrying in the background")
        if not args.quiet:
            _note(f"listening on {', '.join(b.where for b in brokers if b.connected)}"
                  + (" (Ctrl-C to stop)" if sys.stdin.isatty() else ""))
        return await _print_events(events, args)
    finally:
        await close_quietly(session)


async def _print_events(events: Any, args: argparse.Namespace) -> int:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + args.duration if args.duration else None
    seen = 0
    while not args.count or seen < args.count:
        remaining = None if deadline is None else deadline - loop.time()
        if remaining is not None and remaining <= 0:
            break
        try:
            ev = await events.get(remaining)
        except (TimeoutError, StopAsyncIteration):
            break
        seen += 1
        if args.json:
            print_json_line(_record(ev))
        else:
            print(_line(ev), flush=True)
    if events.dropped and not args.quiet:
        _note(f"{events.dropped} events dropped (output too slow)")
    if args.count and seen < args.count:
        print(f"qmf events: error: {seen} of {args.count} events within {args.duration:g}s",
              file=sys.stderr)
        return EXIT_ERROR
    return 0
