"""The links of the native AMQP 1.0 transport (``_native.py``): which receiving link
serves which binding of which endpoint, the one sending link per target address, and
how the broker's attach, detach and flow settle the futures and events their callers
wait on.

Bookkeeping only: it asks the sans-I/O engine to attach, flow and detach, and owns
no socket, task or timeout (the transport drives the connection and bounds the waits).
"""

from __future__ import annotations

import asyncio
import contextlib

from ..errors import TransportError, UsageError
from ._amqp10_engine import Amqp10Connection, Attached, CreditGranted, Detached, Source, Target

__all__ = ["Links", "Receiver", "Sender"]


class Receiver:
    """A receiving link: one binding ``(exchange, key, selector)`` of ``endpoint``."""

    __slots__ = ("address", "endpoint", "exchange", "handle", "key", "name", "opened",
                 "selector", "settled")

    def __init__(self, handle: int, name: str, endpoint: str, exchange: str, key: str,
                 selector: str | None, settled: bool, opened: asyncio.Future[None]) -> None:
        self.handle = handle
        #: the link's name (qpidd names a link's subscription queue
        #: ``<container id>_<link name>``)
        self.name = name
        self.endpoint = endpoint
        self.exchange = exchange
        self.key = key
        self.selector = selector
        self.settled = settled
        self.opened = opened
        self.address: str | None = None  # the source's address in the broker's attach


class Sender:
    """A sending link to ``address``; ``credit`` is set while the broker gives credit."""

    __slots__ = ("address", "credit", "handle", "opened", "tag")

    def __init__(self, handle: int, address: str, opened: asyncio.Future[None]) -> None:
        self.handle = handle
        self.address = address
        self.opened = opened
        self.credit = asyncio.Event()
        self.tag = 0


class Links:
    """Every link of one connection, by handle, and the endpoints they serve."""

    __slots__ = ("_seq", "bindings", "dynamic", "no_ack", "receivers", "sender_handles",
                 "senders")

    def __init__(self) -> None:
        self.receivers: dict[int, Receiver] = {}
        self.senders: dict[str, Sender] = {}
        self.sender_handles: dict[int, Sender] = {}
        #: endpoint -> its bindings ``(exchange, key, selector)`` -> receiving link handle
        self.bindings: dict[str, dict[tuple[str, str, str | None], int]] = {}
        self.no_ack: dict[str, bool] = {}
        self.dynamic: set[str] = set()  # addresses of dynamic nodes (open_dynamic_endpoint)
        self._seq = 0

    def add_endpoint(self, endpoint: str, no_ack: bool) -> None:
        """Name a new endpoint, with no binding yet.

        Raises:
            UsageError: the name is in use.
        """
        if endpoint in self.bindings:
            raise UsageError(f"endpoint {endpoint!r} is already open")
        self.bindings[endpoint] = {}
        self.no_ack[endpoint] = no_ack

    def attach_receiver(self, engine: Amqp10Connection, endpoint: str, source: Source,
                        binding: tuple[str, str, str | None], settled: bool,
                        credit: int) -> Receiver:
        """Attach a receiving link from ``source`` for ``binding`` of ``endpoint`` (a
        named endpoint) and give it ``credit``."""
        self._seq += 1
        link = f"{endpoint}-{self._seq}"
        handle = engine.attach_receiver(link, source, Target(address=endpoint), settled=settled)
        opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        exchange, key, selector = binding
        receiver = Receiver(handle, link, endpoint, exchange, key, selector, settled, opened)
        self.receivers[handle] = receiver
        self.bindings[endpoint][binding] = handle
        engine.flow(handle, credit)
        return receiver

    def attach_sender(self, engine: Amqp10Connection, address: str) -> Sender:
        """Attach a sending link to ``address`` (the one used from now on)."""
        self._seq += 1
        handle = engine.attach_sender(f"qmf-send-{self._seq}", Target(address=address))
        sender = Sender(handle, address, asyncio.get_running_loop().create_future())
        self.senders[address] = sender
        self.sender_handles[handle] = sender
        return sender

    def drop_receiver(self, handle: int, engine: Amqp10Connection | None) -> None:
        """Forget the receiving link ``handle`` and detach it (nothing when unknown)."""
        receiver = self.receivers.pop(handle, None)
        if receiver is None:
            return
        self.bindings.get(receiver.endpoint, {}).pop(
            (receiver.exchange, receiver.key, receiver.selector), None)
        if engine is not None:
            with contextlib.suppress(UsageError):
                engine.detach(handle)

    def credit(self, event: CreditGranted) -> None:
        """The broker's flow: wake the senders waiting for credit on that link."""
        sender = self.sender_handles.get(event.handle)
        if sender is not None and event.credit > 0:
            sender.credit.set()

    def attached(self, event: Attached) -> None:
        """The broker's attach: the link is open (unless it attached no terminus)."""
        receiver = self.receivers.get(event.handle)
        if receiver is not None:
            # qpidd attaches a missing node with a null terminus (or one with no
            # address), then detaches with the error: wait for that detach
            if event.address is not None and not receiver.opened.done():
                receiver.address = event.address
                receiver.opened.set_result(None)
            return
        sender = self.sender_handles.get(event.handle)
        if sender is not None and event.address is not None and not sender.opened.done():
            sender.opened.set_result(None)

    def detached(self, event: Detached, where: str) -> str | None:
        """The broker's detach: forget the link and fail whoever waits on its attach;
        returns why, when it was an open receiving link (the connection's QMF bus is
        then incomplete), else None."""
        why = str(event.error) if event.error is not None else "no reason given"
        receiver = self.receivers.pop(event.handle, None)
        if receiver is not None:
            self.bindings.get(receiver.endpoint, {}).pop(
                (receiver.exchange, receiver.key, receiver.selector), None)
            if not receiver.opened.done():
                receiver.opened.set_exception(TransportError(
                    f"{where} refused to bind {receiver.exchange!r} key "
                    f"{receiver.key!r}: {why}"))
                return None
            return (f"the broker detached the link from {receiver.exchange!r} key "
                    f"{receiver.key!r}: {why}")
        sender = self.sender_handles.pop(event.handle, None)
        if sender is not None:
            if self.senders.get(sender.address) is sender:
                del self.senders[sender.address]
            if not sender.opened.done():
                sender.opened.set_exception(TransportError(
                    f"{where} refused a sender to {sender.address!r}: {why}"))
            sender.credit.set()
        return None

    def fail_waiters(self, exc: BaseException) -> None:
        """Fail every wait for an attach with ``exc`` and wake every wait for credit."""
        for receiver in self.receivers.values():
            if not receiver.opened.done():
                receiver.opened.set_exception(exc)
                receiver.opened.exception()
        for sender in self.sender_handles.values():
            if not sender.opened.done():
                sender.opened.set_exception(exc)
                sender.opened.exception()
            sender.credit.set()
