"""How the Agent serves ``M`` requests, in process: deliveries go to ``Agent._dispatch``
and the ``m`` answers are read back from its outgoing queue (no broker, no sender).

Covers both paths of a method call: the handler called at once in the dispatcher when a
concurrency slot is free (a plain function answers without a task; an awaitable it
returns is awaited in a task keeping the slot), and the task waiting for a slot when
all are taken.  Either way the handler sees ``current_request``, ``method_timeout``
bounds what is awaited, and the status codes are the same.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from qmf_async import wire
from qmf_async.agent import (
    Agent,
    Arg,
    ManagedObject,
    Property,
    current_request,
    method,
    object_class,
)
from qmf_async.agent._methods import RequestContext, _Slots
from qmf_async.errors import ArgumentError, MethodError
from qmf_async.transport._aiormq import Delivery
from qmf_async.wire._values import ObjectId

from ._util import wait_until

PKG = "org.qmfasync.methods"
BB, AB = 3, 44
REPLY_KEY = "reply-key-1"

THING = object_class(
    PKG, "thing",
    properties=[Property("name", "sstr", index=True)],
    methods=[
        method("echo", Arg("text", "lstr", direction="IO")),
        method("add", Arg("a", "uint32", direction="I", max=100), Arg("b", "uint32", direction="I"),
               Arg("sum", "uint64", direction="O")),
        method("nothing"),
    ],
)
ECHO = THING.method("echo")
ADD = THING.method("add")


def make_agent(**options: Any) -> tuple[Agent, ManagedObject]:
    kw: dict[str, Any] = dict(schemas=[THING], attach=False, broker_bank=BB, agent_bank=AB,
                              method_timeout=0.2)
    kw.update(options)
    agent = Agent("amqp://guest:guest@localhost:5672/", **kw)
    return agent, agent.create_object("thing", name="t1")


def request(obj: ManagedObject, seq: int, name: str, args: dict[str, Any],
            user_id: str | None = "guest") -> Delivery:
    assert obj.object_id is not None
    body = wire.encode(wire.MethodRequest(seq, obj.object_id, THING.class_key, name, args),
                       wire.SchemaRegistry([THING]))
    return Delivery(body, "qpid.management", f"agent.{BB}.{AB}", REPLY_KEY,
                    "x-application/qmf", {}, user_id, "agent-queue")


def answers(agent: Agent, methods: dict[int, Any] | None = None) -> dict[int, wire.MethodResponse]:
    """The ``m`` answers queued so far, by sequence number (each alone in its body)."""
    out = {}
    while not agent._outgoing.empty():
        sent = agent._outgoing.get_nowait()
        assert (sent.exchange, sent.key, sent.reply_to) == ("amq.direct", REPLY_KEY, None)
        (msg,) = wire.decode(sent.body, wire.SchemaRegistry([THING]), methods=methods)
        assert isinstance(msg, wire.MethodResponse)
        out[msg.seq] = msg
    return out


async def answer(agent: Agent, seq: int, method_: Any = ECHO,
                 timeout: float = 3.0) -> wire.MethodResponse:
    found: dict[int, wire.MethodResponse] = {}

    def arrived() -> bool:
        found.update(answers(agent, {seq: (THING, method_)}))
        return seq in found

    await wait_until(arrived, timeout=timeout, message=f"answer to {seq}")
    return found[seq]


async def test_a_plain_handler_answers_in_the_dispatch_and_sees_current_request() -> None:
    agent, obj = make_agent()
    seen: list[RequestContext] = []

    @agent.method("thing", "echo")
    def echo(o: ManagedObject, text: str) -> dict[str, Any]:
        seen.append(current_request.get())
        return {"text": text.upper()}

    tasks = len(asyncio.all_tasks())
    agent._dispatch(request(obj, 5, "echo", {"text": "hi"}))
    assert len(asyncio.all_tasks()) == tasks  # answered without a task
    got = answers(agent, {5: (THING, ECHO)})
    assert (got[5].status, got[5].text, got[5].arguments) == (0, "OK", {"text": "HI"})
    assert seen == [RequestContext(5, REPLY_KEY, "guest", f"agent.{BB}.{AB}")]
    assert current_request.get(None) is None  # reset after the handler
    assert agent._methods.slots.free == 64
    # the same bytes as encoding the response message
    agent._dispatch(request(obj, 6, "echo", {"text": "x"}))
    body = agent._outgoing.get_nowait().body
    assert body == wire.encode(wire.MethodResponse(6, 0, "OK", {"text": "X"}),
                               wire.SchemaRegistry([THING]), methods={6: (THING, ECHO)})


async def test_a_coroutine_handler_sees_current_request_and_holds_a_slot() -> None:
    agent, obj = make_agent()
    seen: list[RequestContext] = []
    release = asyncio.Event()

    @agent.method("thing", "echo")
    async def echo(o: ManagedObject, text: str) -> None:
        await release.wait()
        seen.append(current_request.get())

    agent._dispatch(request(obj, 7, "echo", {"text": "a"}, user_id=None))
    assert current_request.get(None) is None
    await asyncio.sleep(0.01)
    assert agent._methods.slots.free == 63 and answers(agent) == {}
    release.set()
    got = await answer(agent, 7)
    assert (got.status, got.arguments) == (0, {"text": "a"})  # IO argument echoed
    assert seen == [RequestContext(7, REPLY_KEY, None, f"agent.{BB}.{AB}")]
    await wait_until(lambda: agent._methods.slots.free == 64, message="slot given back")


async def test_a_plain_function_returning_an_awaitable_is_awaited() -> None:
    agent, obj = make_agent()

    async def later(a: int, b: int) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"sum": a + b, "extra_is_not_allowed": 1} if a == 99 else {"sum": a + b}

    agent.set_method_handler("thing", "add", lambda o, a, b: later(a, b))
    agent._dispatch(request(obj, 8, "add", {"a": 2, "b": 40}))
    got = await answer(agent, 8, ADD)
    assert (got.status, got.arguments) == (0, {"sum": 42})
    agent._dispatch(request(obj, 9, "add", {"a": 99, "b": 1}))
    got = await answer(agent, 9, ADD)
    assert got.status == 7 and "bad output arguments" in got.text


@pytest.mark.parametrize("is_async", [False, True], ids=["plain", "coroutine"])
@pytest.mark.parametrize("raised, status, text", [
    (MethodError(42, "custom"), 42, "custom"),
    (PermissionError("ro"), 6, "Forbidden: ro"),
    (NotImplementedError("later"), 5, "FeatureNotImplemented: later"),
    (ValueError("odd"), 4, "InvalidParameter: odd"),
    (ArgumentError("bad"), 4, "InvalidParameter: bad"),
    (TimeoutError("own"), 7, "Exception: TimeoutError: own"),
    (RuntimeError("kaboom"), 7, "Exception: RuntimeError: kaboom"),
])
async def test_handler_errors_give_the_same_status_either_way(
        is_async: bool, raised: Exception, status: int, text: str) -> None:
    agent, obj = make_agent()

    def plain(o: ManagedObject, text: str) -> None:
        raise raised

    async def coroutine(o: ManagedObject, text: str) -> None:
        raise raised

    agent.set_method_handler("thing", "echo", coroutine if is_async else plain)
    agent._dispatch(request(obj, 10, "echo", {"text": "x"}))
    got = await answer(agent, 10)
    assert (got.status, got.text, got.arguments) == (status, text, None)
    await wait_until(lambda: agent._methods.slots.free == 64, message="slot given back")


async def test_status_codes_before_the_handler_and_of_its_output() -> None:
    agent, obj = make_agent()
    agent.set_method_handler("thing", "add", lambda o, a, b: {"sum": a + b})
    agent.set_method_handler("thing", "echo", lambda o, text: {"text": 300 if text else "x"})
    cases: list[tuple[Delivery, int, str]] = [
        (request(obj, 20, "add", {"a": 101, "b": 1}), 4, "above its maximum 100"),
        (request(obj, 21, "nothing", {}), 3, "NotImplemented"),
        (request(obj, 22, "echo", {"text": "y"}), 7, "bad output arguments"),
    ]
    for delivery, _, _ in cases:
        agent._dispatch(delivery)
    got = answers(agent)
    for delivery, status, text in cases:
        (msg,) = wire.decode(delivery.body, wire.SchemaRegistry([THING]))
        assert got[msg.seq].status == status and text in got[msg.seq].text
    agent.set_method_handler("thing", "echo", lambda o, text: {})  # the IO default
    agent.set_method_handler("thing", "add", lambda o, a, b: {})   # no "sum"
    agent._dispatch(request(obj, 23, "echo", {"text": "z"}))
    agent._dispatch(request(obj, 24, "add", {"a": 1, "b": 1}))
    got = answers(agent, {23: (THING, ECHO)})
    assert (got[23].status, got[23].arguments) == (0, {"text": "z"})
    assert (got[24].status, got[24].text) == (7, "Exception: handler returned no sum")
    assert agent._methods.slots.free == 64


async def test_method_timeout_bounds_a_slow_coroutine_handler() -> None:
    agent, obj = make_agent(method_timeout=0.1)

    @agent.method("thing", "echo")
    async def hang(o: ManagedObject, text: str) -> None:
        await asyncio.Event().wait()

    loop = asyncio.get_running_loop()
    start = loop.time()
    agent._dispatch(request(obj, 30, "echo", {"text": "x"}))
    got = await answer(agent, 30)
    assert (got.status, got.text) == (7, "Exception: method timed out after 0.1s")
    assert 0.09 <= loop.time() - start < 2.0
    await wait_until(lambda: agent._methods.slots.free == 64, message="slot given back")


async def test_every_slot_taken_requests_wait_and_still_see_current_request() -> None:
    agent, obj = make_agent(max_concurrency=2, method_timeout=5.0)
    running = 0
    most = 0
    release = asyncio.Event()
    seen: dict[int, RequestContext] = {}

    @agent.method("thing", "echo")
    async def slow(o: ManagedObject, text: str) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await release.wait()
        running -= 1

    @agent.method("thing", "add")
    def add(o: ManagedObject, a: int, b: int) -> dict[str, Any]:
        ctx = current_request.get()
        seen[ctx.seq] = ctx
        return {"sum": a + b}

    for seq in range(40, 45):
        agent._dispatch(request(obj, seq, "echo", {"text": str(seq)}))
    agent._dispatch(request(obj, 45, "add", {"a": 1, "b": 2}))  # a plain handler waits too
    await asyncio.sleep(0.05)
    assert (running, agent._methods.slots.free) == (2, 0)
    assert answers(agent) == {} and seen == {}
    release.set()
    found: dict[int, wire.MethodResponse] = {}

    def all_answered() -> bool:
        found.update(answers(agent, {45: (THING, ADD)}))
        return len(found) == 6

    await wait_until(all_answered, message="six answers")
    assert most == 2
    assert all(found[s].status == 0 for s in range(40, 46))
    assert found[45].arguments == {"sum": 3}
    assert seen == {45: RequestContext(45, REPLY_KEY, "guest", f"agent.{BB}.{AB}")}
    assert agent._methods.slots.free == 2


async def test_a_handler_coroutine_cancelled_before_it_ran_is_closed_and_its_slot_freed(
) -> None:
    agent, obj = make_agent()
    made: list[Any] = []

    async def never(text: str) -> None:
        raise AssertionError("must not run")

    def handler(o: ManagedObject, text: str) -> Any:
        made.append(never(text))
        return made[-1]

    agent.set_method_handler("thing", "echo", handler)
    agent._dispatch(request(obj, 50, "echo", {"text": "x"}))
    (task,) = agent._tasks
    task.cancel()  # as stop() does, before the task's first step
    await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled()
    # closed, so no "coroutine ... was never awaited" warning when it is collected
    assert inspect.getcoroutinestate(made[0]) == inspect.CORO_CLOSED
    assert agent._methods.slots.free == 64 and answers(agent) == {}


async def test_a_new_handler_replaces_the_cached_plan() -> None:
    agent, obj = make_agent()
    agent.set_method_handler("thing", "echo", lambda o, text: {"text": "first"})
    agent._dispatch(request(obj, 60, "echo", {"text": "x"}))
    agent.set_method_handler("thing", "echo", lambda o, text: {"text": "second"})
    agent._dispatch(request(obj, 61, "echo", {"text": "x"}))
    got = answers(agent, {60: (THING, ECHO), 61: (THING, ECHO)})
    assert (got[60].arguments, got[61].arguments) == ({"text": "first"}, {"text": "second"})


async def test_requests_for_unknown_objects_classes_and_methods() -> None:
    agent, obj = make_agent()
    other = ObjectId.make(sequence=1, broker_bank=BB, agent_bank=AB, object=999)
    reg = wire.SchemaRegistry([THING])

    def send(seq: int, oid: ObjectId, name: str, args: dict[str, Any] | None,
             raw: bytes = b"") -> None:
        body = wire.encode(wire.MethodRequest(seq, oid, THING.class_key, name, args, raw), reg)
        agent._dispatch(Delivery(body, "qpid.management", "k", REPLY_KEY, None, {}, None, "q"))

    assert obj.object_id is not None
    send(70, other, "echo", {"text": "x"})
    send(71, obj.object_id, "nosuch", None, b"\x00")
    send(72, obj.object_id, "echo", None, b"\x00")  # truncated arguments
    got = answers(agent)
    assert (got[70].status, got[71].status, got[72].status) == (1, 2, 4)


async def test_slots_are_first_come_first_served_and_survive_cancellation() -> None:
    slots = _Slots(1)
    assert slots.try_take() and not slots.try_take()
    order: list[str] = []

    async def waiter(name: str) -> None:
        await slots.take()
        order.append(name)

    a = asyncio.create_task(waiter("a"))
    b = asyncio.create_task(waiter("b"))
    c = asyncio.create_task(waiter("c"))
    await asyncio.sleep(0)
    b.cancel()  # waiting: leaves the line
    await asyncio.sleep(0)
    slots.give()  # to a
    await asyncio.sleep(0)
    assert order == ["a"] and not slots.try_take()
    slots.give()  # handed to c ...
    c.cancel()    # ... which is cancelled before it runs: the slot goes back
    await asyncio.gather(a, b, c, return_exceptions=True)
    assert order == ["a"] and slots.free == 1 and not slots._waiters


# --------------------------------------------------------------------------- authorization


def guarded(verdict: Any) -> tuple[Agent, ManagedObject, list[Any], list[str]]:
    """An agent whose hook records what it is asked and answers ``verdict(user)``;
    the handler of ``echo`` records that it ran."""
    asked: list[Any] = []
    ran: list[str] = []

    def authorize(user: str | None, obj: ManagedObject, name: str, args: Any) -> Any:
        asked.append((user, obj["name"], name, dict(args)))
        return verdict(user)

    agent, obj = make_agent(authorize=authorize)

    @agent.method("thing", "echo")
    def echo(o: ManagedObject, text: str) -> dict[str, Any]:
        ran.append(current_request.get().user_id or "")
        return {"text": text}

    return agent, obj, asked, ran


async def answers_to(agent: Agent, *seqs: int, method_: Any = ECHO) -> list[wire.MethodResponse]:
    """The answers to ``seqs`` (in that order), waiting for all of them."""
    found: dict[int, wire.MethodResponse] = {}

    def arrived() -> bool:
        found.update(answers(agent, {seq: (THING, method_) for seq in seqs}))
        return all(seq in found for seq in seqs)

    await wait_until(arrived, timeout=3.0, message=f"answers to {seqs}")
    return [found[seq] for seq in seqs]


async def test_the_hook_sees_the_user_and_a_refusal_is_status_6() -> None:
    agent, obj, asked, ran = guarded(lambda user: user == "alice")
    agent._dispatch(request(obj, 1, "echo", {"text": "a"}, user_id="alice"))
    agent._dispatch(request(obj, 2, "echo", {"text": "b"}, user_id="bob"))
    agent._dispatch(request(obj, 3, "echo", {"text": "c"}, user_id=None))
    ok, bob, nobody = await answers_to(agent, 1, 2, 3)
    assert (ok.status, ok.arguments) == (0, {"text": "a"})
    assert (bob.status, bob.text) == (6, "not authorized: user 'bob' may not call thing.echo")
    assert (nobody.status, nobody.text) == (
        6, "not authorized: a caller without a user id may not call thing.echo")
    assert ran == ["alice"]  # the refused calls never reached the handler
    assert asked == [("alice", "t1", "echo", {"text": "a"}), ("bob", "t1", "echo", {"text": "b"}),
                     (None, "t1", "echo", {"text": "c"})]
    assert agent._methods.slots.free == 64


async def test_invalid_requests_are_answered_before_the_hook_is_asked() -> None:
    agent, obj, asked, _ran = guarded(lambda user: True)
    agent._dispatch(request(obj, 1, "nothing", {}))  # no handler: 3
    agent._dispatch(request(obj, 2, "add", {"a": 500, "b": 1}))  # out of range: 4
    none, big = await answers_to(agent, 1, 2)  # (error answers carry no arguments)
    assert (none.status, big.status) == (3, 4)
    assert asked == []


async def test_an_awaitable_verdict_and_permission_error() -> None:
    async def later(user: str | None) -> bool:
        await asyncio.sleep(0.01)
        return user == "alice"

    def raising(user: str | None) -> bool:
        raise PermissionError("alice only")

    agent, obj, _asked, ran = guarded(later)
    agent._dispatch(request(obj, 1, "echo", {"text": "a"}, user_id="alice"))
    agent._dispatch(request(obj, 2, "echo", {"text": "b"}, user_id="bob"))
    assert [a.status for a in await answers_to(agent, 1, 2)] == [0, 6]
    assert ran == ["alice"]
    agent, obj, _asked, ran = guarded(raising)
    agent._dispatch(request(obj, 1, "echo", {"text": "a"}))
    got = await answer(agent, 1)
    assert (got.status, got.text) == (
        6, "not authorized: user 'guest' may not call thing.echo: alice only")
    assert ran == []


@pytest.mark.parametrize("verdict", [
    lambda user: 1 / 0,           # the hook's bug
    lambda user: "yes",           # not a bool
    lambda user: asyncio.sleep(5),  # longer than method_timeout (0.2 s)
], ids=["raises", "not-a-bool", "times-out"])
async def test_a_failing_hook_is_status_7_and_runs_nothing(verdict: Any) -> None:
    agent, obj, _asked, ran = guarded(verdict)
    agent._dispatch(request(obj, 1, "echo", {"text": "a"}))
    got = await answer(agent, 1)
    assert got.status == 7 and "authorization" in got.text, got
    assert ran == []
    assert agent._methods.slots.free == 64
