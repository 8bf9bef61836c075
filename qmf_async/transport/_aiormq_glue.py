"""What the AMQP 0-9-1 transport (``_aiormq.py``) needs of aiormq and RabbitMQ beyond
the calls it makes: a connection with the heartbeat rule of the spec, aiormq's own log
records kept off the user's handlers, aiormq's connect failures as our typed errors, a
received message as a :class:`~qmf_async.protocol.Delivery` and the message id of a
sent one, the RabbitMQ queue arguments of an endpoint, and the two steps of a bounded
close (a round
trip that lets the broker read the last publishes, an abort of a connection that does
not close).  Loaded only with that transport.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from random import getrandbits
from types import MappingProxyType
from typing import Any, Final

import aiormq
import attrs

from ..errors import AuthenticationError, ProtocolMismatchError, TransportError
from ._base import BrokerAddress, Delivery

__all__ = ["SASL_MECHANISMS", "HeartbeatConnection", "abort", "connect_error", "message_id",
           "publishes_through", "queue_arguments", "quiet_aiormq_loggers", "retrieve",
           "to_delivery"]

#: the SASL mechanisms aiormq implements, in its spelling
SASL_MECHANISMS: Final = ("PLAIN", "EXTERNAL")

log = logging.getLogger("qmf_async.transport")

_EMPTY_HEADERS: Final[Mapping[str, Any]] = MappingProxyType({})
# A random UUID4 in hex, the message id aiormq gives a message that has none, built
# without a uuid.UUID object: clear the version and variant bits, then set them.
_UUID4_KEEP: Final = ((1 << 128) - 1) & ~((0xF000 << 64) | (0xC000 << 48))
_UUID4_SET: Final = (4 << 76) | (0x8000 << 48)

# A Delivery per received message: object.__new__ plus the slot setters skips the
# frozen class's per-field setattr lookups (same object, same fields).
_new_object = object.__new__
_set_body, _set_exchange, _set_routing_key, _set_reply_to = (
    Delivery.__dict__[name].__set__ for name in ("body", "exchange", "routing_key", "reply_to")
)
_set_content_type, _set_headers, _set_user_id, _set_endpoint = (
    Delivery.__dict__[name].__set__ for name in ("content_type", "headers", "user_id", "endpoint")
)
_set_value, _set_correlation_id = (
    Delivery.__dict__[name].__set__ for name in ("value", "correlation_id")
)
assert len(attrs.fields(Delivery)) == 10  # every field is set by to_delivery


def to_delivery(message: Any, endpoint: str) -> Delivery:
    """aiormq's ``DeliveredMessage`` from ``endpoint`` as the cores' inbound type."""
    props = message.header.properties
    deliver = message.delivery
    delivery: Delivery = _new_object(Delivery)
    _set_body(delivery, message.body)
    _set_exchange(delivery, deliver.exchange)
    _set_routing_key(delivery, deliver.routing_key)
    _set_reply_to(delivery, props.reply_to)
    _set_content_type(delivery, props.content_type)
    _set_headers(delivery, props.headers or _EMPTY_HEADERS)
    _set_user_id(delivery, props.user_id)
    _set_endpoint(delivery, endpoint)
    _set_value(delivery, None)
    _set_correlation_id(delivery, props.correlation_id)
    return delivery


def message_id() -> str:
    """A new message id: a random UUID4 in hex, as aiormq would give."""
    return f"{getrandbits(128) & _UUID4_KEEP | _UUID4_SET:032x}"


class HeartbeatConnection(aiormq.Connection):
    """aiormq's connection, declaring a silent broker lost once nothing arrived for
    two heartbeat intervals (AMQP 0-9-1, section 4.2.7: a peer silent that long is
    gone) instead of aiormq's ``3 * (heartbeat + 1)`` seconds.  aiormq checks every
    ``max(1, heartbeat // 2)`` seconds: the loss is noticed between ``2 * heartbeat``
    and that much later."""

    HEARTBEAT_GRACE_MULTIPLIER = 2

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.heartbeat_timeout > 0 and hasattr(self, _GRACE):
            setattr(self, _GRACE, 2 * self.heartbeat_timeout)

    @property
    def heartbeat_grace(self) -> float | None:
        """Seconds of silence after which the broker is declared lost (None: aiormq
        keeps it where this class cannot reach)."""
        found = getattr(self, _GRACE, None)
        return float(found) if isinstance(found, (int, float)) else None


#: where aiormq keeps the silence it tolerates (a private name of aiormq.Connection)
_GRACE: Final = "_Connection__heartbeat_grace_timeout"


#: aiormq's loggers that report connection setup and loss (records are created on each
#: of them, so each gets the filter: a logger's filters do not see its children's records)
_LOGGERS: Final = ("aiormq", "aiormq.connection", "aiormq.connection.marshall",
                          "aiormq.channel", "aiormq.base", "aiormq.tools")
#: where aiormq's own records go instead: DEBUG, under our name
aiormq_log = logging.getLogger("qmf_async.transport.aiormq")


class _AiormqRecords(logging.Filter):
    """Keeps aiormq's own warnings and tracebacks (e.g. "Unexpected connection close
    from remote ...", "reader exited abnormally") off the user's handlers.

    The transport reports what they describe once, as a :class:`TransportError` (or a
    ``ConnectionLostError`` logged at WARNING by ``qmf_async.transport``); aiormq's
    record is passed on at DEBUG to ``qmf_async.transport.aiormq`` (one line, the
    traceback only with DEBUG on) and dropped from aiormq's own loggers.  Records below
    WARNING pass unchanged.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        if aiormq_log.isEnabledFor(logging.DEBUG):
            exc = record.exc_info
            aiormq_log.debug(
                "aiormq %s (%s): %s%s",
                record.levelname.lower(),
                record.name,
                record.getMessage(),
                f" ({exc[1]!r})" if exc and exc[1] is not None else "",
            )
        return False


_FILTER: Final = _AiormqRecords()


def quiet_aiormq_loggers() -> None:
    """Install the filter of aiormq's records (idempotent; done by every transport).

    Raises:
        Nothing.
    """
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


def retrieve(task: asyncio.Future[Any]) -> None:
    """Done-callback: mark a background task's exception as retrieved."""
    if not task.cancelled():
        task.exception()


def connect_error(exc: BaseException, target: BrokerAddress,
                  mechanism: str | None) -> TransportError:
    """What a failed connect to ``target`` raises (``mechanism``: the SASL mechanism
    asked for, None for aiormq's default PLAIN)."""
    where = target.where
    user = target.user
    if isinstance(exc, aiormq.AuthenticationError) and len(exc.args) == 2:
        offered = exc.args[0] if isinstance(exc.args[0], str) else str(exc.args[0])
        asked = mechanism or "PLAIN"
        return AuthenticationError(
            f"SASL mechanism {asked} is not available at {where} over AMQP 0-9-1 "
            f"(the broker offers {offered or 'none'}; this client speaks "
            f"{', '.join(SASL_MECHANISMS)})")
    if isinstance(exc, (aiormq.ProbableAuthenticationError, aiormq.AuthenticationError)):
        if mechanism == "EXTERNAL":
            return AuthenticationError(
                f"authentication with the client certificate (EXTERNAL) failed at "
                f"{where}: {exc}")
        return AuthenticationError(f"authentication failed for user {user!r} at {where}: {exc}")
    if isinstance(exc, aiormq.ProtocolSyntaxError) and "protocol header" in str(exc):
        return ProtocolMismatchError(
            f"{where} does not speak AMQP 0-9-1 (it answered with another AMQP "
            "version's protocol header; qpidd speaks 0-10 and 1.0): connect with "
            "protocol='auto' or protocol='1.0'")
    if isinstance(exc, aiormq.ConnectionNotAllowed):
        return AuthenticationError(f"access to {where} not allowed for user {user!r}: {exc}")
    if isinstance(exc, aiormq.InvalidFrameError) and "Connection.Close" in str(exc):
        return TransportError(
            f"{where} closed the connection while opening vhost {target.vhost!r} "
            f"(unknown vhost, or no access for user {user!r}?)"
        )
    if isinstance(exc, (aiormq.AMQPConnectionError, OSError)):
        detail = exc.__cause__ if exc.__cause__ is not None else exc
        return TransportError(f"cannot connect to {where}: {detail}")
    return TransportError(f"cannot connect to {where}: {exc!r}")


def queue_arguments(max_length: int | None, dead_letter_exchange: str | None,
                    dead_letter_routing_key: str | None) -> dict[str, Any]:
    """RabbitMQ's arguments of an endpoint's queue: at most ``max_length`` ready
    messages, the oldest dropped (to ``dead_letter_exchange`` when given)."""
    arguments: dict[str, Any] = {}
    if max_length is not None:
        arguments["x-max-length"] = max_length
        arguments["x-overflow"] = "drop-head"
    if dead_letter_exchange is not None:
        arguments["x-dead-letter-exchange"] = dead_letter_exchange
        if dead_letter_routing_key is not None:
            arguments["x-dead-letter-routing-key"] = dead_letter_routing_key
    return arguments


async def publishes_through(ch: Any, timeout: float, where: str) -> None:
    """Wait (at most ``timeout``) until the broker has read every body published so
    far on the channel ``ch``: one round trip on it, answered after the publishes
    before it.  Without it, bodies still in the socket buffers when the connection is
    closed can be lost: aiormq closes the socket 2 s after its ``Connection.Close``
    even when a busy broker (flow control, a memory alarm) has not read that far.

    Raises:
        Nothing: a timeout is logged as a warning, a failure at DEBUG.
    """
    if ch is None or ch.is_closed:
        return
    try:
        await asyncio.wait_for(ch.basic_qos(prefetch_count=0), timeout)
    except TimeoutError:
        log.warning("closing %s: the broker did not read the last publishes within "
                    "%.1f s; some may be lost", where, timeout)
    except Exception as exc:  # the channel or connection went: nothing more to wait for
        log.debug("closing %s: publish round trip failed: %r", where, exc)


def abort(conn: aiormq.Connection) -> None:
    """Cancel the reader and writer tasks of a connection that did not close in time
    (private names of aiormq.Connection, when present)."""
    for name in ("_reader_task", "_writer_task"):
        task = getattr(conn, name, None)
        if task is not None and not task.done():
            task.cancel()
