"""The bridge's access rules (qmf_async/bridge/_access.py): RabbitMQ's own rules for
the same operations, with no broker."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from qmf_async.bridge._access import (
    Permissions,
    UserAccess,
    access_from_api,
    close_refusal,
    needs_bind,
    needs_create_exchange,
    needs_create_queue,
    needs_delete,
    needs_purge,
    refusal,
)

#: the issue's limited user: QMF's own names configurable, read and write on all
LOW = UserAccess("low", frozenset(), {"v": Permissions(r"^(qpid\..*|qmf.*|amq\..*)$",
                                                       ".*", ".*")})


def test_configure_rules_follow_the_pattern() -> None:
    assert refusal(LOW, "v", needs_delete("queue", "qmf-reply-1")) is None
    why = refusal(LOW, "v", needs_delete("queue", "important-q"))
    assert why == "user 'low' has no configure permission on queue 'important-q' in vhost 'v'"
    assert refusal(LOW, "v", needs_create_queue("important-q", {})) is not None
    assert refusal(LOW, "v", needs_create_exchange("qpid.management", {})) is None
    assert refusal(LOW, "v", needs_delete("exchange", "my-ex")) is not None
    # another vhost: no permissions at all
    assert "no permissions on vhost 'w'" in str(refusal(LOW, "w", needs_purge("qmf.q")))
    assert refusal(None, "v", needs_purge("q")) == "no such RabbitMQ user"


def test_read_write_rules_and_the_default_exchange() -> None:
    reader = UserAccess("r", frozenset(), {"/": Permissions("", "^app\\.", "^amq\\.default$")})
    assert refusal(reader, "/", needs_purge("app.q")) is not None  # read only amq.default
    # binding: write on the queue, read on the exchange ("" is amq.default)
    assert refusal(reader, "/", needs_bind("", "app.q")) is None
    assert "read permission on exchange 'x'" in str(refusal(reader, "/", needs_bind("x", "app.q")))
    assert "write permission on queue 'q'" in str(refusal(reader, "/", needs_bind("", "q")))
    # an empty pattern allows nothing, not even the empty name
    assert refusal(reader, "/", needs_delete("queue", "app.q")) is not None
    # a dead-letter exchange takes read on the queue and write on that exchange
    full = UserAccess("f", frozenset(), {"/": Permissions(".*", "^app\\.", ".*")})
    assert refusal(full, "/", needs_create_queue("q", {})) is None
    assert "write permission on exchange 'dlx'" in str(
        refusal(full, "/", needs_create_queue("q", {"x-dead-letter-exchange": "dlx"})))
    assert "write permission on exchange 'ae'" in str(
        refusal(full, "/", needs_create_exchange("x", {"alternate-exchange": "ae"})))
    # unanchored search, as RabbitMQ's re:run; a broken pattern allows nothing
    part = UserAccess("p", frozenset(), {"/": Permissions("tmp", "(", ".*")})
    assert refusal(part, "/", needs_delete("queue", "my-tmp-q")) is None
    assert refusal(part, "/", needs_bind("amq.direct", "q")) is not None


def test_closing_connections_as_the_management_api_rules() -> None:
    admin = UserAccess("root", frozenset({"administrator"}), {})
    monitor = UserAccess("mon", frozenset({"monitoring"}), {})
    plain = UserAccess("app", frozenset(), {})
    assert close_refusal(admin, "someone") is None
    assert close_refusal(monitor, "mon") is None  # its own
    assert "only its own connections" in str(close_refusal(monitor, "someone"))
    assert "no tag that may use the management API" in str(close_refusal(plain, "app"))
    assert close_refusal(None, "app") == "no such RabbitMQ user"


def test_access_from_both_api_forms() -> None:
    perms = [{"user": "u", "vhost": "/", "configure": ".*", "write": "", "read": "x"}]
    new = access_from_api("u", {"name": "u", "tags": ["administrator", "monitoring"]}, perms)
    old = access_from_api("u", {"name": "u", "tags": "administrator,monitoring"}, perms)
    assert new == old and new.administrator
    assert new.permissions["/"] == Permissions(".*", "", "x")
    assert not access_from_api("u", {"tags": ""}, []).tags


async def test_permission_lookups_are_cached_for_access_cache_seconds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The bridge reads a caller's permissions once per ``access_cache`` seconds (a
    clock of the test's), an unknown user too; 0 reads them for every request."""
    from qmf_async.agent import Agent
    from qmf_async.bridge import _agent
    from qmf_async.bridge._http import ApiError
    from qmf_async.bridge.rabbitmq import RabbitBridge

    clock = [100.0]
    monkeypatch.setattr(_agent, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    gets: list[str] = []

    class Api:
        async def get(self, path: str, **params: str) -> Any:
            gets.append(path)
            if "nobody" in path:
                raise ApiError(404, "Object Not Found", path)
            if path.endswith("/permissions"):
                return [{"vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}]
            return {"name": "u", "tags": ["monitoring"]}

    bridge = RabbitBridge(Agent("amqp://localhost/"), Api(), access_cache=5.0)  # type: ignore[arg-type]
    first = await bridge.access_of("u")
    assert first is not None and first.tags == {"monitoring"} and len(gets) == 2
    clock[0] += 4.9
    assert await bridge.access_of("u") == first and len(gets) == 2
    clock[0] += 0.2  # past 5 s: read again
    assert await bridge.access_of("u") == first and len(gets) == 4
    assert await bridge.access_of("nobody") is None and len(gets) == 6
    assert await bridge.access_of("nobody") is None and len(gets) == 6
    bridge.access_cache = 0
    await bridge.access_of("v")
    await bridge.access_of("v")
    assert len(gets) == 10
