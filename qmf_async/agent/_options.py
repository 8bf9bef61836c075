"""An :class:`~qmf_async.agent.Agent`'s settings as one frozen value: :class:`AgentOptions`.

An Agent takes them as ``Agent(url, options=...)`` or as keywords (``AgentKeywords``,
the names and types of the same fields, for type checkers), and shows each as a
read-only attribute of its own (``agent.interval``, ``agent.label``, ...).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypedDict

import attrs

from ..errors import UsageError
from ..frozen import frozen
from ..protocol import AgentProtocolV2
from ..transport import TlsOptions, TransportFactory, check_protocol, sasl_mechanism_list
from ._objects import ManagedObject

__all__ = ["AgentKeywords", "AgentOptions", "Authorizer"]

#: ``authorize(user_id, obj, method_name, in_args) -> bool`` (or an awaitable of one):
#: whether the caller may run the method; see :attr:`AgentOptions.authorize`
Authorizer = Callable[[str | None, ManagedObject, str, Mapping[str, Any]],
                      "bool | Awaitable[bool]"]


def _positive(_options: AgentOptions, field: attrs.Attribute[Any], value: Any) -> None:
    if not value > 0:
        raise UsageError(f"{field.name} must be positive, not {value!r}")


def _bank(bits: int) -> Callable[[AgentOptions, attrs.Attribute[Any], int | None], None]:
    def check(_options: AgentOptions, field: attrs.Attribute[Any], value: int | None) -> None:
        if value is not None and not 0 <= value < (1 << bits):
            raise UsageError(f"{field.name.replace('_', ' ')} {value} does not fit {bits} bits")
    return check


def _protocol(value: str) -> str:
    return check_protocol(value)


def _versions(value: Iterable[int]) -> frozenset[int]:
    versions = frozenset(value)
    if not versions or not versions <= {1, 2}:
        raise UsageError(f"qmf_versions must be 1, 2 or both, not {sorted(versions)}")
    return versions


def _v2_name(_options: AgentOptions, _field: attrs.Attribute[Any], value: str | None) -> None:
    if value is not None:
        AgentProtocolV2.check_name(value)


def _aliases(value: Iterable[str]) -> frozenset[str]:
    aliases = frozenset(value)
    if "" in aliases:
        raise UsageError("a QMF v2 alias must not be empty")
    return aliases


def _mechanisms(value: str | Sequence[str] | None) -> tuple[str, ...] | None:
    return sasl_mechanism_list(value)


@frozen(slots=True, kw_only=True)
class AgentOptions:
    """The settings of an :class:`~qmf_async.agent.Agent` (every time in seconds).

    ``Agent(url, options=AgentOptions(interval=5.0))`` equals ``Agent(url,
    interval=5.0)``; ``attrs.evolve(options, label="b")`` is a copy with one setting
    changed.  The options are the settings as given: the agent's own attributes say
    what it made of them (``agent.system_id``, ``agent.v2_name``, the banks a
    management broker assigned).

    Attributes:
        label: the agent's name in ``A`` (what qpid tools list), its log lines, and
            its default QMF v2 name.
        interval: the publication and heartbeat interval.
        broker_bank: the broker bank used without a management broker (20 bits).
        agent_bank: the agent bank used without a management broker (28 bits; None:
            a random one).
        attach: ask a management broker for banks (``A``) on every connection.
        attach_timeout: how long to wait for its answer (without one the agent uses
            ``broker_bank``/``agent_bank``).
        boot_sequence: the sequence of the agent's object ids (the low 12 bits) and
            its QMF v2 epoch.
        system_id: the system id sent in ``A`` (None: a random one).
        method_timeout: the bound of a coroutine method handler and of the
            authorization hook.
        max_concurrency: method handlers running at once at most (later requests
            wait for a slot).
        max_outgoing: messages waiting to be sent at most (a full queue drops what
            comes, counted in ``stats["dropped"]``).
        max_per_body: indications in one published body at most.
        max_get_per_body: records in one body of a ``G`` answer at most.
        reconnect: reconnect (with backoff) after losing the connection.
        tls: TLS settings for ``amqps://`` URLs.
        connect_timeout: the bound of connecting.
        transport_factory: builds each connection (default: ``protocol``'s).
        protocol: the AMQP version without a ``transport_factory``: ``"auto"`` (from
            the broker's answer), ``"0-9-1"`` or ``"1.0"``.
        sasl_mechanisms: SASL mechanisms to offer, as
            :meth:`Session.add_broker <qmf_async.Session.add_broker>` takes them
            (None: the transport picks).
        qmf_versions: the QMF versions spoken: 1 (banks, ``qpid.management``), 2 (map
            messages on ``qmf.default.direct`` and ``qmf.default.topic``), or both.
        v2_name: the QMF v2 name, ``vendor:product:instance`` (None:
            ``qmf-async:<label>:<system id>``).
        v2_aliases: further names the agent answers QMF v2 requests to, naming itself
            by the alias in those answers (the management-broker role answers
            ``broker``, as qpidd's own agent does).
        authorize: ``authorize(user_id, obj, method_name, in_args)``, asked before
            every method handler runs (QMF v1 and v2), once the object, method and
            arguments are known to be valid; ``user_id`` is the request message's
            user id (None when it has none).  ``True`` lets the handler run;
            ``False`` (or ``PermissionError``) answers status 6 (Forbidden, "not
            authorized: ...") without running it; it may return an awaitable
            (awaited within ``method_timeout``).  Anything else (another value, an
            exception, a timeout) answers status 7 without running the handler.
            RabbitMQ checks that a message's user id is the user its publisher
            logged in as; qpidd without authentication checks nothing, so there the
            user id is whatever the caller wrote (docs/reliability.md).

    Raises:
        UsageError: a non-positive interval, timeout or limit, a bank that does not
            fit, an unknown protocol, QMF version or SASL mechanism name, a malformed
            v2 name or an empty alias.
    """

    label: str = "qmf-async-agent"
    interval: float = attrs.field(default=10.0, validator=_positive)
    broker_bank: int = attrs.field(default=1, validator=_bank(20))
    agent_bank: int | None = attrs.field(default=None, validator=_bank(28))
    attach: bool = True
    attach_timeout: float = attrs.field(default=2.0, validator=_positive)
    boot_sequence: int = 1
    system_id: uuid.UUID | None = None
    method_timeout: float = attrs.field(default=30.0, validator=_positive)
    max_concurrency: int = attrs.field(default=64, validator=_positive)
    max_outgoing: int = attrs.field(default=10_000, validator=_positive)
    max_per_body: int = attrs.field(default=22, validator=_positive)
    max_get_per_body: int = attrs.field(default=11, validator=_positive)
    reconnect: bool = True
    tls: TlsOptions | None = None
    connect_timeout: float = attrs.field(default=10.0, validator=_positive)
    transport_factory: TransportFactory | None = None
    protocol: str = attrs.field(default="auto", converter=_protocol)
    sasl_mechanisms: tuple[str, ...] | None = attrs.field(default=None,
                                                          converter=_mechanisms)
    qmf_versions: frozenset[int] = attrs.field(default=frozenset({1, 2}),
                                               converter=_versions)
    v2_name: str | None = attrs.field(default=None, validator=_v2_name)
    v2_aliases: frozenset[str] = attrs.field(default=frozenset(), converter=_aliases)
    authorize: Authorizer | None = None


class AgentKeywords(TypedDict, total=False):
    """The settings ``Agent()`` takes as keyword arguments: the fields of
    :class:`AgentOptions` (tests/test_agent_options.py keeps the two lists equal)."""

    label: str
    interval: float
    broker_bank: int
    agent_bank: int | None
    attach: bool
    attach_timeout: float
    boot_sequence: int
    system_id: uuid.UUID | None
    method_timeout: float
    max_concurrency: int
    max_outgoing: int
    max_per_body: int
    max_get_per_body: int
    reconnect: bool
    tls: TlsOptions | None
    connect_timeout: float
    transport_factory: TransportFactory | None
    protocol: str
    sasl_mechanisms: str | Sequence[str] | None
    qmf_versions: Iterable[int]
    v2_name: str | None
    v2_aliases: Iterable[str]
    authorize: Authorizer | None
