"""How an agent runs its method handlers: :class:`MethodServer`.

One server per :class:`~qmf_async.agent.Agent`, shared by QMF v1 and v2: it finds the
object and the method a request names, checks the arguments against the method's
schema, asks the authorization hook, runs the handler in a concurrency slot within
``method_timeout`` with :data:`current_request` set, and turns what the handler
returned or raised into a status, a text and output arguments.  A QMF v1 ``M`` is
answered here too (the ``m`` is encoded by a writer compiled once per method and queued
on the agent's one outbox); the v2 side (``_v2.py``) answers its own requests with
:meth:`MethodServer.call`.

Collaborators, given explicitly: the v1 protocol core (its registry, the ``m`` bodies),
the agent's object table (read only), the outbox (the agent's peer runtime), and the
agent's task spawner (so that stopping the agent cancels what runs here).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, Protocol

import attrs

from ..errors import ArgumentError, EncodeError, MethodError
from ..frozen import frozen
from ..protocol import AgentProtocol, MethodRequested, Outgoing, validate_arguments
from ..wire import ObjectId, SchemaClass, SchemaMethod
from ._objects import ManagedObject
from ._options import Authorizer

__all__ = ["MethodHandler", "MethodServer", "Outbox", "RequestContext", "Spawn",
           "current_request"]

log = logging.getLogger("qmf_async.agent")

#: ``async def handler(obj, **in_args) -> Mapping[str, Any] | None`` (or a plain function)
MethodHandler = Callable[..., "Awaitable[Mapping[str, Any] | None] | Mapping[str, Any] | None"]
#: starts a task the agent keeps track of (and cancels when it stops)
Spawn = Callable[[Coroutine[Any, Any, None]], "asyncio.Task[None]"]
#: (status, text, output arguments): what serving a request came to (output arguments
#: only with status 0)
Outcome = tuple[int, str, "dict[str, Any] | None"]


class Outbox(Protocol):
    """Where an agent's messages go: its peer runtime's one send queue."""

    def enqueue(self, out: Outgoing) -> bool:
        """Queue ``out`` for the sender; False (counted) when the queue is full."""
        ...


@frozen
class RequestContext:
    """Who is calling: available to method handlers through :data:`current_request`."""

    seq: int
    reply_to: str
    user_id: str | None
    routing_key: str


#: The request a method handler is serving (``current_request.get()`` inside a handler).
current_request: contextvars.ContextVar[RequestContext] = contextvars.ContextVar(
    "qmf_current_request")


class MethodServer:
    """Runs the method handlers of one agent (see the module docstring)."""

    def __init__(self, core: AgentProtocol, objects: Mapping[ObjectId, ManagedObject],
                 outbox: Outbox, spawn: Spawn, *, method_timeout: float,
                 max_concurrency: int, authorize: Authorizer | None, label: str) -> None:
        """Serve the methods of the objects in ``objects`` (the agent's table, read
        when a request comes), answering QMF v1 through ``core`` and ``outbox``."""
        self._core = core
        self._registry = core.registry
        self._objects = objects
        self._outbox = outbox
        self._spawn = spawn
        self.method_timeout = method_timeout
        self._authorize = authorize
        self._label = label
        self._handlers: dict[tuple[str, str], MethodHandler] = {}
        self._plans: dict[tuple[Any, str], _MethodPlan] = {}
        #: the concurrency slots (``max_concurrency`` of them)
        self.slots = _Slots(max_concurrency)

    def set_handler(self, class_name: str, method_name: str, fn: MethodHandler) -> None:
        """Run ``fn`` for ``class_name.method_name`` from now on."""
        self._handlers[(class_name, method_name)] = fn
        self._plans.clear()

    def schemas_changed(self) -> None:
        """A schema was added: work the plans out again."""
        self._plans.clear()

    # ------------------------------------------------------------------ QMF v1

    def serve(self, msg: MethodRequested, routing_key: str) -> None:
        """Serve an ``M`` that came under ``routing_key``.

        When a concurrency slot is free the handler is called at once, here, in that
        slot, with :data:`current_request` set: a plain function's answer is encoded
        and queued without a task; an awaitable it returns (a coroutine handler's) is
        awaited in a task that keeps the slot, within ``method_timeout``.  With every
        slot taken, or an authorization hook to ask, the request is served in a task.
        """
        reply_to = msg.reply_to
        ctx = _new(RequestContext)
        _set_ctx_seq(ctx, msg.seq)
        _set_ctx_reply_to(ctx, reply_to)
        _set_ctx_user_id(ctx, msg.user_id)
        _set_ctx_routing_key(ctx, routing_key)
        slots = self.slots
        if self._authorize is not None or not slots.try_take():
            self._spawn(self._serve_later(msg, reply_to, ctx))
            return
        token = current_request.set(ctx)
        held = True
        try:
            obj, plan, error = self._target(msg)
            if error is not None:
                self._reply(msg.seq, reply_to, *error, None, None)
                return
            assert obj is not None and plan is not None and plan.handler is not None
            assert msg.arguments is not None
            try:
                result = plan.handler(obj, **msg.arguments)
            except Exception as exc:
                self._reply(msg.seq, reply_to, *self._handler_error(exc, plan), None, None)
                return
            if result is not None and type(result) is not dict and inspect.isawaitable(result):
                # the task copies the context (current_request included) and keeps the slot
                task = self._spawn(self._finish(msg.seq, reply_to, plan, msg.arguments,
                                                result))
                task.add_done_callback(functools.partial(_finished, slots, result))
                held = False
                return
            self._reply(msg.seq, reply_to, *self._output(plan, msg.arguments, result))
        finally:
            if held:
                slots.give()
            current_request.reset(token)

    async def _serve_later(self, msg: MethodRequested, reply_to: str,
                           ctx: RequestContext) -> None:
        """Serve an ``M`` in a task: wait for a concurrency slot, then run the handler."""
        current_request.set(ctx)
        await self.slots.take()
        try:
            status, text, plan, out = await self._run(msg)
        finally:
            self.slots.give()
        self._reply(msg.seq, reply_to, status, text, plan, out)

    async def _finish(self, seq: int, reply_to: str, plan: _MethodPlan,
                      args: Mapping[str, Any], awaitable: Awaitable[Any]) -> None:
        """Await what a handler returned (its slot is given back when the task ends)."""
        status, text, plan_, out = await self._awaited(plan, args, awaitable)
        self._reply(seq, reply_to, status, text, plan_, out)

    def _reply(self, seq: int, reply_to: str, status: int, text: str,
               plan: _MethodPlan | None, out: Mapping[str, Any] | None) -> None:
        """Queue the ``m`` answering request ``seq``."""
        core = self._core
        if status == 0 and plan is not None and out is not None:
            try:
                write = plan.write
                if write is None:  # compiled on the first answer
                    write = plan.write = self._registry.codec(plan.schema).response_writer(
                        plan.method)
                body = write(seq, out)
            except EncodeError as exc:
                log.error("agent %s: handler of %s returned bad output: %s", self._label,
                          plan.method.name, exc)
                sent = core.method_error(seq, reply_to, 7, f"bad output arguments: {exc}")
            else:
                sent = core.reply(reply_to, body)
        else:
            sent = core.method_error(seq, reply_to, status, text)
        self._outbox.enqueue(sent)

    # ------------------------------------------------------------------ any version

    async def call(self, request: MethodRequested) -> Outcome:
        """Run ``request`` (a v1 request, or a v2 one made into one) in a concurrency
        slot (waiting for one): its status, text and output arguments.  The caller
        sets :data:`current_request`."""
        await self.slots.take()
        try:
            status, text, _plan, out = await self._run(request)
        finally:
            self.slots.give()
        return status, text, out

    async def _run(self, msg: MethodRequested
                   ) -> tuple[int, str, _MethodPlan | None, dict[str, Any] | None]:
        """(status, text, plan, output arguments) of a request (the plan and output
        arguments only with status 0)."""
        obj, plan, error = self._target(msg)
        if error is not None:
            return error[0], error[1], None, None
        assert obj is not None and plan is not None and plan.handler is not None
        assert msg.arguments is not None
        if self._authorize is not None:
            refused = await self._refusal(msg, obj, plan)
            if refused is not None:
                return refused[0], refused[1], None, None
        try:
            result = plan.handler(obj, **msg.arguments)
        except Exception as exc:
            return *self._handler_error(exc, plan), None, None
        if inspect.isawaitable(result):
            return await self._awaited(plan, msg.arguments, result)
        return self._output(plan, msg.arguments, result)

    async def _refusal(self, msg: MethodRequested, obj: ManagedObject, plan: _MethodPlan
                       ) -> tuple[int, str] | None:
        """None when the authorization hook lets ``msg.user_id`` call the method, else
        the (status, text) to answer: 6 for a refusal, 7 for a hook that failed."""
        hook = self._authorize
        assert hook is not None and msg.arguments is not None
        user = msg.user_id
        method = f"{plan.schema.class_key.name}.{plan.method.name}"
        who = f"user {user!r}" if user is not None else "a caller without a user id"
        refused = 6, f"not authorized: {who} may not call {method}"
        label = self._label
        deadline = asyncio.timeout(self.method_timeout)
        try:
            async with deadline:
                verdict: object = hook(user, obj, plan.method.name, msg.arguments)
                if inspect.isawaitable(verdict):
                    verdict = await verdict
        except PermissionError as exc:
            log.info("agent %s: %s refused to %s: %s", label, method, who, exc)
            return refused[0], f"{refused[1]}: {exc}" if str(exc) else refused[1]
        except TimeoutError as exc:
            if deadline.expired():
                log.warning("agent %s: authorization of %s timed out after %ss", label,
                            method, self.method_timeout)
                return 7, f"Exception: authorization timed out after {self.method_timeout}s"
            log.error("agent %s: the authorization hook raised", label, exc_info=exc)
            return 7, "Exception: the authorization check failed"
        except Exception as exc:
            log.error("agent %s: the authorization hook raised", label, exc_info=exc)
            return 7, "Exception: the authorization check failed"
        if verdict is True:
            return None
        if verdict is False:
            log.info("agent %s: %s refused to %s", label, method, who)
            return refused
        log.error("agent %s: the authorization hook returned %r, not a bool", label,
                  type(verdict).__name__)
        return 7, "Exception: the authorization check failed"

    async def _awaited(self, plan: _MethodPlan, args: Mapping[str, Any],
                       awaitable: Awaitable[Any]
                       ) -> tuple[int, str, _MethodPlan | None, dict[str, Any] | None]:
        """Await a handler's awaitable within ``method_timeout``; as :meth:`_run`."""
        deadline = asyncio.timeout(self.method_timeout)
        try:
            async with deadline:
                result = await awaitable
        except TimeoutError as exc:
            if not deadline.expired():  # the handler's own timeout, not ours
                return *self._handler_error(exc, plan), None, None
            log.warning("agent %s: %s.%s timed out after %ss", self._label,
                        plan.schema.class_key.name, plan.method.name, self.method_timeout)
            return 7, f"Exception: method timed out after {self.method_timeout}s", None, None
        except Exception as exc:
            return *self._handler_error(exc, plan), None, None
        return self._output(plan, args, result)

    def _target(self, msg: MethodRequested
                ) -> tuple[ManagedObject | None, _MethodPlan | None, tuple[int, str] | None]:
        """(object, plan, None) for a request its handler may serve, else
        (None, None, (status, text)): unknown object, package, class or method, no
        arguments, an argument out of range, no handler."""
        obj = self._objects.get(msg.object_id)
        key = msg.class_key
        if obj is None or obj.deleted:
            return None, None, self._core.unknown_object(key)
        schema = obj.schema
        skey = schema.class_key
        if key is not skey and (key.package, key.name) != (skey.package, skey.name):
            return None, None, (4, f"InvalidParameter: object {msg.object_id} is a {skey.name}, "
                                   f"not a {key.name}")
        plan = self._plans.get((skey, msg.method))
        if plan is None or plan.schema is not schema:
            plan = self._plan(schema, msg.method)
            if plan is None:
                return None, None, (2, "UnknownMethod")
        args = msg.arguments
        if args is None:
            return None, None, (4, "InvalidParameter: arguments do not match the method's schema")
        if plan.checked:
            error = validate_arguments(plan.method, args)
            if error is not None:
                return None, None, (4, f"InvalidParameter: {error}")
        if plan.handler is None:
            return None, None, (3, "NotImplemented")
        return obj, plan, None

    def _plan(self, schema: SchemaClass, name: str) -> _MethodPlan | None:
        """The plan of method ``name`` of ``schema`` (cached), None when it has none."""
        method = schema.find_method(name)
        if method is None:
            return None
        plan = _MethodPlan(schema, method, self._handlers.get((schema.class_key.name, name)))
        if len(self._plans) < 4096:
            self._plans[(schema.class_key, name)] = plan
        return plan

    @staticmethod
    def _output(plan: _MethodPlan, args: Mapping[str, Any], result: Any
                ) -> tuple[int, str, _MethodPlan | None, dict[str, Any] | None]:
        out = dict(result or {})
        # IO arguments default to what came in
        for name in plan.io_names:
            if name not in out and name in args:
                out[name] = args[name]
        if len(out) < len(plan.out_names) or not all(n in out for n in plan.out_names):
            missing = [n for n in plan.out_names if n not in out]
            return 7, f"Exception: handler returned no {', '.join(missing)}", None, None
        return 0, "OK", plan, out

    def _handler_error(self, exc: Exception, plan: _MethodPlan) -> tuple[int, str]:
        """The status and text of what a handler raised."""
        if isinstance(exc, TimeoutError):
            return 7, f"Exception: {type(exc).__name__}: {exc}"
        if isinstance(exc, MethodError):
            return exc.status, exc.text
        if isinstance(exc, PermissionError):
            return 6, f"Forbidden: {exc}"
        if isinstance(exc, NotImplementedError):
            return 5, f"FeatureNotImplemented: {exc}"
        if isinstance(exc, (ValueError, TypeError, ArgumentError)):
            return 4, f"InvalidParameter: {exc}"
        # the handler's bug is the caller's status 7
        log.error("agent %s: %s.%s raised", self._label, plan.schema.class_key.name,
                  plan.method.name, exc_info=exc)
        return 7, f"Exception: {type(exc).__name__}: {exc}"


def _finished(slots: _Slots, awaitable: Awaitable[Any], task: asyncio.Task[None]) -> None:
    """Done-callback of a task awaiting a handler's awaitable: give its slot back; a
    coroutine the task never started (cancelled at once, e.g. by stop()) is closed."""
    slots.give()
    if task.cancelled() and inspect.iscoroutine(awaitable):
        awaitable.close()


class _Slots:
    """How many method handlers may run at once (``max_concurrency``): a counting
    limit like :class:`asyncio.Semaphore`, first come first served, which can also be
    taken synchronously when a slot is free (:meth:`try_take`)."""

    __slots__ = ("_waiters", "free")

    def __init__(self, count: int) -> None:
        self.free = count
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def try_take(self) -> bool:
        """Take a slot if one is free and nobody waits; True when taken."""
        if self.free > 0 and not self._waiters:
            self.free -= 1
            return True
        return False

    async def take(self) -> None:
        """Wait for a slot and take it."""
        if self.try_take():
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut  # give() hands its slot over by resolving this
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.give()  # handed a slot, then cancelled: pass it on
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(fut)
            raise

    def give(self) -> None:
        """Give a slot back: to the first waiter, else to the pool."""
        waiters = self._waiters
        while waiters:
            fut = waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return
        self.free += 1


class _MethodPlan:
    """What serving one method of one served class takes, worked out once (until a
    handler or schema is added): its schema, handler, whether its input arguments have
    limits to check, its IO and output argument names and the writer of its answer
    (compiled on first use)."""

    __slots__ = ("checked", "handler", "io_names", "method", "out_names", "schema", "write")

    def __init__(self, schema: SchemaClass, method: SchemaMethod,
                 handler: MethodHandler | None) -> None:
        self.schema = schema
        self.method = method
        self.handler = handler
        self.checked = any(a.min is not None or a.max is not None or a.maxlen is not None
                           for a in method.in_args)
        in_names = {a.name for a in method.in_args}
        self.out_names = tuple(a.name for a in method.out_args)
        self.io_names = tuple(n for n in self.out_names if n in in_names)
        self.write: Callable[[int, Mapping[str, Any]], bytes] | None = None


_new = object.__new__
_set_ctx_seq, _set_ctx_reply_to, _set_ctx_user_id, _set_ctx_routing_key = (
    RequestContext.__dict__[name].__set__ for name in ("seq", "reply_to", "user_id", "routing_key")
)
assert len(attrs.fields(RequestContext)) == 4  # every field is set by MethodServer.serve
