"""The one exception tree of qmf-async.

Errors are split by who is at fault:

* :class:`UsageError` -- the caller misused the API (wrong argument type, unknown
  class or method name, value out of range).
* :class:`ProtocolError` -- a peer sent something malformed; :class:`DecodeError`
  is raised for bytes that are not valid QMF.
* :class:`TransportError` -- the connection to the AMQP broker failed or was lost.
* :class:`QmfTimeout` -- a wait for a reply ran out of time.
* :class:`AgentError` -- a remote agent reported an error (status code and text);
  :class:`MethodError` for a method response, :class:`CommandError` for a
  command-completion (``z``) with a non-zero code.

Every wrapper chains the original exception as ``__cause__``.
"""

from __future__ import annotations

from typing import Any

from .names import Status

__all__ = [
    "QmfError",
    "UsageError",
    "ArgumentError",
    "UnknownClassError",
    "ProtocolError",
    "DecodeError",
    "EncodeError",
    "TransportError",
    "AuthenticationError",
    "NotConnectedError",
    "ProtocolMismatchError",
    "ConnectionLostError",
    "QmfTimeout",
    "AgentGoneError",
    "ObjectGoneError",
    "QueryTimeout",
    "AgentError",
    "MethodError",
    "CommandError",
    "PartialResultError",
]


class QmfError(Exception):
    """Root of every error raised by qmf-async."""


class UsageError(QmfError):
    """The caller used the API wrongly; nothing was sent."""


class ArgumentError(UsageError, TypeError):
    """A method or request argument has the wrong type or is out of range."""


class UnknownClassError(UsageError, LookupError):
    """A package, class, method or event name is not known to the schema."""


class EncodeError(UsageError, ValueError):
    """A value cannot be encoded with the QMF or AMQP type it must have."""


class ProtocolError(QmfError):
    """A peer sent something that breaks the QMF protocol."""


class DecodeError(ProtocolError, ValueError):
    """Bytes received are not a valid QMF v1 body.

    ``offset`` is the position in the body where decoding failed (or ``-1``).
    """

    def __init__(self, message: str, offset: int = -1) -> None:
        super().__init__(message if offset < 0 else f"{message} (at offset {offset})")
        self.offset = offset


class TransportError(QmfError):
    """The AMQP connection failed, was refused, or was lost."""


class AuthenticationError(TransportError):
    """The broker refused the login (bad user or password, or no access to the vhost)."""


class ProtocolMismatchError(TransportError):
    """The broker answered with another AMQP version's protocol header (e.g. qpidd, which
    speaks 0-10 and 1.0, asked for 0-9-1); ``offered`` is the header it sent, when known."""

    def __init__(self, message: str, offered: bytes | None = None) -> None:
        super().__init__(message)
        self.offered = offered


class NotConnectedError(TransportError):
    """The broker connection is not up (yet, or any more)."""


class ConnectionLostError(TransportError):
    """The broker connection was lost while a request was pending."""


class AgentGoneError(TransportError):
    """The agent a request was addressed to left (stopped heartbeating) or was deleted."""


class QmfTimeout(QmfError, TimeoutError):
    """No (complete) reply arrived in time."""


class AgentError(QmfError):
    """A remote agent reported an error: ``status`` code and ``text``."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"{status} ({Status.name_of(status)}): {text}")
        self.status = status
        self.text = text


class MethodError(AgentError):
    """A method call returned a non-zero status."""


class CommandError(AgentError):
    """A request was completed (``z``) with a non-zero code."""


class ObjectGoneError(AgentError, LookupError):
    """The object a request was about no longer exists at its agent (status 1,
    UNKNOWN_OBJECT)."""


class PartialResultError(QmfError):
    """Part of a multi-agent query failed; ``partial`` holds what did arrive and
    ``errors`` what went wrong (one per failed agent)."""

    def __init__(self, message: str, partial: list[Any], errors: list[BaseException]) -> None:
        super().__init__(message)
        self.partial = partial
        self.errors = errors


class QueryTimeout(PartialResultError, QmfTimeout):
    """Some agents did not finish answering a query in time; ``partial`` holds
    what did arrive."""


