"""Who may do what through the bridge: RabbitMQ's own access rules, applied to a
caller's permissions and tags as the management API reports them.

Pure (no I/O): :class:`UserAccess` is what RabbitMQ knows of one user;
the ``needs_*`` functions say which permissions an operation takes, as RabbitMQ 3.x
checks them for the same operation over AMQP 0-9-1 (``rabbit_channel``) or, for
closing a connection, through its management API (``rabbit_mgmt_util``):

=====================================  =============================================
operation                              RabbitMQ needs
=====================================  =============================================
declare a queue                        configure on the queue; with a dead-letter
                                       exchange also read on the queue and write on
                                       that exchange
declare an exchange                    configure on the exchange; with an alternate
                                       exchange also read on the exchange and write
                                       on the alternate
delete a queue / an exchange           configure on it
bind / unbind                          write on the queue, read on the exchange
purge a queue                          read on the queue
close a connection                     the ``administrator`` tag, or the caller's own
                                       connection and a tag that may use the
                                       management API (``management``,
                                       ``policymaker``, ``monitoring``)
=====================================  =============================================

A permission is a regular expression matched (searched, unanchored) against the
resource's name, as RabbitMQ's internal backend does; an empty pattern matches
nothing; the default exchange is named ``amq.default`` for these checks.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from ..frozen import frozen

__all__ = ["MANAGEMENT_TAGS", "Need", "Permissions", "UserAccess", "access_from_api",
           "close_refusal", "needs_bind", "needs_create_exchange", "needs_create_queue",
           "needs_delete", "needs_purge", "refusal"]

Perm = Literal["configure", "write", "read"]
Kind = Literal["queue", "exchange"]

#: tags that let a user log in to the management API (and so close its own connections)
MANAGEMENT_TAGS = frozenset({"management", "policymaker", "monitoring", "administrator"})


@frozen
class Permissions:
    """One user's three patterns on one vhost."""

    configure: str
    write: str
    read: str


@frozen
class UserAccess:
    """What RabbitMQ knows of a user: its tags and its permissions by vhost."""

    user: str
    tags: frozenset[str]
    permissions: Mapping[str, Permissions]

    @property
    def administrator(self) -> bool:
        return "administrator" in self.tags


@frozen
class Need:
    """One permission an operation takes: ``perm`` on the ``kind`` named ``name``."""

    perm: Perm
    kind: Kind
    name: str


@functools.lru_cache(maxsize=512)
def _pattern(regex: str) -> re.Pattern[str] | None:
    try:
        return re.compile(regex)
    except re.error:
        return None  # RabbitMQ would not have stored it; allow nothing


def _matches(regex: str, name: str) -> bool:
    if regex == "":
        return False
    pattern = _pattern(regex)
    return pattern is not None and pattern.search(name) is not None


def _exchange(name: str) -> str:
    return name or "amq.default"


def refusal(access: UserAccess | None, vhost: str, needs: Iterable[Need]) -> str | None:
    """None when ``access`` grants every need on ``vhost``, else why not (one line)."""
    if access is None:
        return "no such RabbitMQ user"
    perms = access.permissions.get(vhost)
    if perms is None:
        return f"user {access.user!r} has no permissions on vhost {vhost!r}"
    for need in needs:
        name = _exchange(need.name) if need.kind == "exchange" else need.name
        if not _matches(getattr(perms, need.perm), name):
            return (f"user {access.user!r} has no {need.perm} permission on "
                    f"{need.kind} {name!r} in vhost {vhost!r}")
    return None


def close_refusal(access: UserAccess | None, owner: str | None) -> str | None:
    """None when ``access`` may close a connection of user ``owner`` (RabbitMQ's
    management API: administrators any, a management user its own), else why not."""
    if access is None:
        return "no such RabbitMQ user"
    if access.administrator:
        return None
    if owner == access.user and access.tags & MANAGEMENT_TAGS:
        return None
    if owner == access.user:
        return (f"user {access.user!r} has no tag that may use the management API "
                f"(management, policymaker, monitoring, administrator)")
    return (f"user {access.user!r} may close only its own connections (not "
            f"{owner!r}'s) without the administrator tag")


def needs_create_queue(name: str, arguments: Mapping[str, Any]) -> list[Need]:
    needs = [Need("configure", "queue", name)]
    dlx = arguments.get("x-dead-letter-exchange")
    if dlx is not None:
        needs += [Need("read", "queue", name), Need("write", "exchange", str(dlx))]
    return needs


def needs_create_exchange(name: str, arguments: Mapping[str, Any]) -> list[Need]:
    needs = [Need("configure", "exchange", name)]
    alternate = arguments.get("alternate-exchange")
    if alternate is not None:
        needs += [Need("read", "exchange", name), Need("write", "exchange", str(alternate))]
    return needs


def needs_delete(kind: Kind, name: str) -> list[Need]:
    return [Need("configure", kind, name)]


def needs_bind(exchange: str, queue: str) -> list[Need]:
    return [Need("write", "queue", queue), Need("read", "exchange", exchange)]


def needs_purge(queue: str) -> list[Need]:
    return [Need("read", "queue", queue)]


def access_from_api(user: str, record: Mapping[str, Any],
                    permissions: Iterable[Mapping[str, Any]]) -> UserAccess:
    """A :class:`UserAccess` from the API's ``users/{user}`` and
    ``users/{user}/permissions`` answers (tags are a list since 3.9, a comma-separated
    string before)."""
    tags = record.get("tags") or ()
    if isinstance(tags, str):
        tags = tags.split(",")
    by_vhost = {str(p.get("vhost")): Permissions(str(p.get("configure") or ""),
                                                str(p.get("write") or ""),
                                                str(p.get("read") or ""))
                for p in permissions if p.get("vhost") is not None}
    return UserAccess(user, frozenset(str(t).strip() for t in tags if str(t).strip()),
                      by_vhost)
