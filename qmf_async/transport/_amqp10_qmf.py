"""QMF terms on AMQP 1.0 for the native transport (no I/O): the source of a binding
(qpidd's legacy binding filters and the selector filter of
``../shared/spec/amqp-1.0-legacy-filters-and-selectors.txt``), reply addresses both
ways, a received message as a :class:`~qmf_async.protocol.Delivery` and a published
one as bytes, and what the client announces when it connects."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import unquote, urlsplit

from .. import names
from ..errors import AuthenticationError, ProtocolMismatchError
from ..wire import Amqp10Message, Described, Symbol, Typed10, encode_amqp10_message
from ._amqp10_events import Source
from ._base import REPLY_EXCHANGE, Body, Delivery, client_process_properties

__all__ = ["binding_source", "connect_error", "connection_properties", "default_mechanisms",
           "outgoing_message", "outgoing_reply_to", "reply_address", "to_delivery",
           "url_password"]

DIRECT_FILTER: Final = "apache.org:legacy-amqp-direct-binding:string"
TOPIC_FILTER: Final = "apache.org:legacy-amqp-topic-binding:string"
SELECTOR_FILTER: Final = "apache.org:selector-filter:string"
#: exchanges addressed with the direct-binding filter (the others get the topic filter)
DIRECT_EXCHANGES: Final = frozenset({REPLY_EXCHANGE, names.V2_DIRECT_EXCHANGE})


def binding_source(exchange: str, key: str, selector: str | None = None) -> Source:
    """The source of a receiving link for the binding ``(exchange, key)``: the direct
    filter on the direct exchanges, the topic filter on the others, and the JMS
    ``selector`` when given."""
    descriptor = DIRECT_FILTER if exchange in DIRECT_EXCHANGES else TOPIC_FILTER
    filters: dict[str, Any] = {"qmf-binding": Described(Symbol(descriptor), key)}
    if selector is not None:
        filters["qmf-selector"] = Described(Symbol(SELECTOR_FILTER), selector)
    return Source(address=exchange, filter=filters)


def outgoing_reply_to(reply_to: str | None) -> str | None:
    """A reply key ``R`` as ``amq.direct/R``; a value with a ``/`` as it is."""
    if reply_to is not None and "/" not in reply_to:
        return f"{REPLY_EXCHANGE}/{reply_to}"
    return reply_to


def reply_address(reply_to: str | None) -> str | None:
    """A received ``reply_to`` as the agent side reads it: ``EXCHANGE/SUBJECT`` as it
    is, a bare node address ``N`` as ``N/`` (the node, no subject)."""
    if reply_to is None or "/" in reply_to or not reply_to:
        return reply_to
    return reply_to + "/"


def to_delivery(msg: Amqp10Message, exchange: str, endpoint: str) -> Delivery | None:
    """``msg`` as the cores' inbound type: a data body as ``body``, an amqp-value map or
    list (QMF v2) as ``value``; None for any other body (not QMF)."""
    body = msg.body
    value: Any = None
    if msg.body_kind != "data":
        if msg.body_kind == "value" and isinstance(body, (dict, list)):
            value, body = body, b""
        elif not (msg.body_kind == "value" and isinstance(body, bytes)):
            return None
    user = msg.user_id
    return Delivery(
        body=body, exchange=exchange, routing_key=msg.subject or "",
        reply_to=reply_address(msg.reply_to), content_type=msg.content_type,
        headers=msg.application_properties,
        user_id=user.decode("utf-8", "replace") if user is not None else None,
        endpoint=endpoint, value=value, correlation_id=msg.correlation_id)


def url_password(url: str) -> str | None:
    """The password of a broker URL, unquoted (None when it has none)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    return unquote(parts.password) if parts.password is not None else None


def connect_error(exc: BaseException, where: str, user: str | None,
                  external_only: bool) -> BaseException:
    """The error a failed connect raises, saying what to do: a broker that speaks
    another protocol, a refused SASL (naming the user, or the client certificate)."""
    if isinstance(exc, ProtocolMismatchError):
        return ProtocolMismatchError(
            f"{where} does not speak AMQP 1.0 ({exc}); RabbitMQ speaks 0-9-1: "
            "connect with protocol='auto' or protocol='0-9-1'")
    if isinstance(exc, AuthenticationError):
        if external_only:
            return AuthenticationError(
                f"authentication with the client certificate (EXTERNAL) failed at "
                f"{where}: {exc} (does the broker offer EXTERNAL?)")
        return AuthenticationError(f"authentication failed for user {user!r} at {where}: {exc}")
    return exc


def outgoing_message(body: Body, subject: str, reply_to: str | None,
                     content_type: str | None, headers: Mapping[str, Any] | None,
                     user_id: str | None, correlation_id: str | None) -> bytes:
    """A message to publish, encoded: bytes in a data section (with ``content_type``),
    a dict or list (QMF v2) as an amqp-value (no content type).

    Raises:
        EncodeError: something in it cannot be encoded.
    """
    is_value = not isinstance(body, (bytes, bytearray, memoryview))
    return encode_amqp10_message(
        body, subject=subject, reply_to=reply_to,
        content_type=None if is_value else content_type,
        application_properties=headers, correlation_id=correlation_id,
        user_id=user_id.encode("utf-8") if user_id is not None else None,
        body_kind="value" if is_value else "data")


def default_mechanisms(client_certificate: bool, password: bool) -> list[str]:
    """The SASL mechanisms tried when none are asked for, in order: EXTERNAL with a
    client certificate over TLS, PLAIN with a password, then ANONYMOUS."""
    return (["EXTERNAL"] if client_certificate else []) + (["PLAIN"] if password else []) \
        + ["ANONYMOUS"]


def connection_properties(name: str) -> dict[str, Any]:
    """The properties of the client's ``open``: product, the connection's ``name``, and
    the process's (qpidd's ``cproc``, ``cpid``; integers typed as AMQP ints)."""
    properties: dict[str, Any] = {"product": "qmf-async", "connection_name": name}
    for key, value in client_process_properties().items():
        properties[key] = Typed10("int", value) if isinstance(value, int) else value
    return properties
