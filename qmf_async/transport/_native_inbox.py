"""The receiving side of the native AMQP 1.0 transport (``_native.py``): each message a
receiving link brings, decoded to a :class:`~qmf_async.protocol.Delivery` and handed to
the dispatcher in arrival order (held until one is set), the settlement it earns, and
the link's credit topped up as the dispatcher takes deliveries (the backpressure of
this transport)."""

from __future__ import annotations

import collections
import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import Final

from ..errors import DecodeError, UsageError
from ..logs import warn_limited
from ..wire import decode_amqp10_message
from ._amqp10_engine import Amqp10Connection, MessageReceived
from ._amqp10_qmf import to_delivery
from ._base import Delivery
from ._native_links import Receiver

__all__ = ["Inbox"]

_log: Final = logging.getLogger("qmf_async.transport.amqp10")


class Inbox:
    """The deliveries of one connection on their way to the dispatcher."""

    __slots__ = ("_live", "_where", "credit", "dispatch", "engine", "held", "low",
                 "malformed", "unsupported")

    def __init__(self, credit: int, live: Callable[[], bool], where: Callable[[], str]) -> None:
        """``credit``: each receiving link's; ``live()``: whether the connection may
        still grant credit; ``where()``: the broker, for log lines."""
        self.credit = credit
        self.low = max(1, credit // 2)  # topped up to ``credit`` below this
        self.engine: Amqp10Connection | None = None
        self.dispatch: Callable[[Delivery], None] | None = None
        self.held: collections.deque[Delivery] = collections.deque()
        self.malformed = 0
        self.unsupported = 0
        self._live = live
        self._where = where

    def receive(self, event: MessageReceived, receiver: Receiver | None,
                unsettled: list[int], rejected: list[int]) -> None:
        """Take the message of ``event`` from ``receiver`` (None: unbound meanwhile,
        released); the delivery ids to accept or reject go to ``unsettled``/``rejected``."""
        engine = self.engine
        assert engine is not None
        if receiver is None:  # unbound meanwhile
            if not event.settled:
                with contextlib.suppress(UsageError):
                    engine.settle([event.delivery_id], "released")
            return
        try:
            msg = decode_amqp10_message(event.payload)
        except DecodeError as exc:
            self.malformed += 1
            warn_limited(_log, self.malformed, "dropped a malformed AMQP 1.0 message from "
                         "%s: %s", self._where(), exc)
            if not event.settled:
                rejected.append(event.delivery_id)
            self.top_up(receiver)
            return
        if not event.settled:
            unsettled.append(event.delivery_id)
        delivery = to_delivery(msg, receiver.exchange, receiver.endpoint)
        if delivery is None:
            self.unsupported += 1
            _log.debug("dropped a message that is not QMF from %s", self._where())
            self.top_up(receiver)
            return
        dispatch = self.dispatch
        if dispatch is None or self.held:
            self.held.append(delivery)
            return
        self._deliver(dispatch, delivery)
        self.top_up(receiver)

    def set_dispatcher(self, dispatch: Callable[[Delivery], None],
                       receivers: Iterable[Receiver]) -> None:
        """Hand the held deliveries to ``dispatch``, in order, then every new one; top
        up the credit of ``receivers``."""
        self.dispatch = dispatch
        held = self.held
        while held:
            self._deliver(dispatch, held.popleft())
        for receiver in receivers:
            self.top_up(receiver)

    def top_up(self, receiver: Receiver) -> None:
        """Give ``receiver`` its full credit again once it fell below half."""
        engine = self.engine
        if engine is None or not self._live():
            return
        with contextlib.suppress(UsageError):
            if engine.link_credit(receiver.handle) < self.low:
                engine.flow(receiver.handle, self.credit)

    def _deliver(self, dispatch: Callable[[Delivery], None], delivery: Delivery) -> None:
        try:
            dispatch(delivery)
        except Exception:
            _log.exception("the dispatcher failed on a delivery from %s", self._where())
