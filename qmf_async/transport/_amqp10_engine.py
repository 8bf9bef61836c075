"""A sans-I/O AMQP 1.0 client connection: bytes in, events and bytes out (no asyncio).

:class:`Amqp10Connection` is the state of one client connection with one session
(channel 0), in the style of h11: the caller feeds the bytes read from the socket to
:meth:`~Amqp10Connection.receive_data` with the current time and gets
:data:`Event` values back; every call that acts (attach, flow, send, settle, detach,
close) queues frames that :meth:`~Amqp10Connection.data_to_send` hands out; and
:meth:`~Amqp10Connection.tick` keeps the idle timeouts (an empty frame when half the
peer's idle time-out has passed without output; the peer declared lost after twice our
own idle time-out without input).

Handshake: the SASL header (when SASL is wanted), the mechanism chosen from the server's
list (ANONYMOUS, PLAIN, EXTERNAL; GSSAPI and SCRAM are not supported), its outcome; then
the AMQP header, ``open`` and ``begin``, pipelined.

Errors: bytes that are not AMQP 1.0 raise :class:`~qmf_async.errors.ProtocolMismatchError`;
malformed frames :class:`~qmf_async.errors.DecodeError`; frames over our max-frame-size
:class:`FrameSizeError`; a frame the state does not allow (a transfer on an unknown
handle, an attach before the session, ...) :class:`~qmf_async.errors.ProtocolError`; a
refused SASL :class:`~qmf_async.errors.AuthenticationError`.  After any of these the
connection is dead; a close frame with the error is queued for the peer.  Calls made in
the wrong state (a send without credit, an attach before ``open``) raise
:class:`~qmf_async.errors.UsageError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from ..errors import (
    AuthenticationError,
    DecodeError,
    ProtocolError,
    ProtocolMismatchError,
    UsageError,
)
from ..wire import Described, Symbol
from ._amqp10_events import (
    DELIVERY_STATES,
    Attached,
    Closed,
    CreditGranted,
    Detached,
    Event,
    Lost,
    MessageReceived,
    Opened,
    SessionBegun,
    SessionEnded,
    Settled,
    Source,
    Target,
    terminus_address,
)
from ._amqp10_frames import (
    AMQP_HEADER,
    FRAME_AMQP,
    FRAME_SASL,
    SASL_HEADER,
    ErrorCondition,
    Frame,
    Performative,
    decode_frames,
    encode_frame,
    symbols,
    transfer_frames,
)

__all__ = [
    "SUPPORTED_MECHANISMS",
    "Amqp10Connection",
    "Attached",
    "Closed",
    "CreditGranted",
    "Detached",
    "Event",
    "Lost",
    "MessageReceived",
    "Opened",
    "SessionBegun",
    "SessionEnded",
    "Settled",
    "Source",
    "Target",
]

#: the SASL mechanisms this client speaks
SUPPORTED_MECHANISMS: Final = ("EXTERNAL", "PLAIN", "ANONYMOUS")
#: the outcomes :meth:`Amqp10Connection.settle` sends, by name: their descriptor codes
_OUTCOMES: Final = {name: code for code, name in DELIVERY_STATES.items()
                    if name in ("accepted", "rejected", "released")}
_UINT: Final = 1 << 32
SND_UNSETTLED, SND_SETTLED, SND_MIXED = 0, 1, 2


class _Link:
    __slots__ = ("credit", "delivery_count", "handle", "incoming", "name", "partial",
                 "partial_id", "partial_settled", "receiver", "remote_handle", "state")

    def __init__(self, handle: int, name: str, receiver: bool) -> None:
        self.handle = handle
        self.name = name
        self.receiver = receiver
        self.remote_handle: int | None = None
        self.delivery_count = 0
        self.credit = 0
        self.state = "attaching"  # attached, detaching
        self.partial: list[bytes] | None = None
        self.partial_id = 0
        self.partial_settled = False
        self.incoming = 0


# ---------------------------------------------------------------------------- connection

class Amqp10Connection:
    """The client side of one AMQP 1.0 connection and its one session (see the module
    docstring)."""

    def __init__(
        self,
        *,
        container_id: str,
        hostname: str | None = None,
        properties: Mapping[str, Any] | None = None,
        sasl_mechanisms: Sequence[str] | None = ("ANONYMOUS",),
        user: str | None = None,
        password: str | None = None,
        idle_timeout: float = 0.0,
        max_frame_size: int = 1 << 20,
        incoming_window: int = 1 << 16,
    ) -> None:
        """Prepare a connection; nothing is queued before :meth:`start`.
        ``sasl_mechanisms`` is the client's choice in order of preference (None: no
        SASL layer); ``idle_timeout`` (seconds) is what we announce.

        Raises:
            UsageError: an unsupported SASL mechanism or bad limits.
        """
        if sasl_mechanisms is not None:
            bad = [m for m in sasl_mechanisms if m not in SUPPORTED_MECHANISMS]
            if bad or not sasl_mechanisms:
                raise UsageError(f"unsupported SASL mechanism(s) {', '.join(bad) or '(none)'}; "
                                 f"this AMQP 1.0 client speaks {', '.join(SUPPORTED_MECHANISMS)}")
        if max_frame_size < 512 or incoming_window < 2 or idle_timeout < 0:
            raise UsageError("max_frame_size >= 512, incoming_window >= 2, idle_timeout >= 0")
        self._container_id = container_id
        self._hostname = hostname
        self._properties = {Symbol(k): v for k, v in (properties or {}).items()}
        self._mechanisms = list(sasl_mechanisms) if sasl_mechanisms is not None else None
        self._user, self._password = user, password
        self._idle = idle_timeout
        self._max_frame = max_frame_size
        self._window = incoming_window
        self._out: list[bytes] = []
        self._in = bytearray()
        # header states: "new", "sasl-header", "sasl", "amqp-header", "open", "dead"
        self._phase = "new"
        self._expect_header: bytes | None = None
        self._remote_max_frame = 512
        self._remote_idle = 0.0
        self._opened = False
        self._closing = False
        self._remote_closed = False
        self.mechanism: str | None = None
        self.remote_properties: dict[str, Any] = {}
        # session
        self._begun = False
        self._ended = False
        self._next_outgoing_id = 0
        self._next_incoming_id = 0
        self._incoming_left = incoming_window
        self._remote_incoming = 0
        self._next_delivery_id = 0
        self._links: dict[int, _Link] = {}
        self._remote_links: dict[int, _Link] = {}
        self._unsettled_out: set[int] = set()
        self._last_in = self._last_out = self._now = 0.0

    # -------------------------------------------------------------- state

    @property
    def is_open(self) -> bool:
        """True once the peer's open and begin arrived, until a close either way."""
        return self._opened and self._begun and not self._closing and not self._remote_closed

    @property
    def remote_max_frame_size(self) -> int:
        """The max-frame-size the peer announced (512 before its open)."""
        return self._remote_max_frame

    @property
    def remote_idle_timeout(self) -> float:
        """The idle time-out (seconds) the peer announced (0: none)."""
        return self._remote_idle

    def link_credit(self, handle: int) -> int:
        """The credit of link ``handle`` (sends left, or deliveries still granted)."""
        return self._link(handle).credit

    def data_to_send(self) -> bytes:
        """The bytes queued for the peer (empty when none); they are handed out once."""
        if not self._out:
            return b""
        data = b"".join(self._out)
        self._out.clear()
        # the last time we were given: never later than now, so heartbeats go early
        self._last_out = self._now
        return data

    def _frame(self, perf: Performative | None, sasl: bool = False) -> None:
        self._out.append(encode_frame(Frame(FRAME_SASL if sasl else FRAME_AMQP, 0, perf)))

    # -------------------------------------------------------------- handshake

    def start(self, now: float) -> None:
        """Queue the protocol header (SASL's when SASL is wanted), and with no SASL the
        ``open`` and ``begin``.

        Raises:
            UsageError: called twice.
        """
        if self._phase != "new":
            raise UsageError("start() called twice")
        self._last_in = self._last_out = self._now = now
        if self._mechanisms is not None:
            self._out.append(SASL_HEADER)
            self._expect_header, self._phase = SASL_HEADER, "sasl-header"
        else:
            self._open_amqp()

    def _open_amqp(self) -> None:
        self._out.append(AMQP_HEADER)
        self._expect_header, self._phase = AMQP_HEADER, "amqp-header"
        self._frame(Performative.make(
            "open", container_id=self._container_id, hostname=self._hostname,
            max_frame_size=self._max_frame, channel_max=0,
            idle_time_out=int(self._idle * 1000) or None,
            properties=self._properties or None))
        self._frame(Performative.make(
            "begin", next_outgoing_id=0, incoming_window=self._window,
            outgoing_window=_UINT - 1))

    def receive_data(self, data: bytes, now: float) -> list[Event]:
        """Take bytes read from the peer (``b""``: the peer closed its side); return the
        events they make.

        Raises:
            ProtocolMismatchError: the peer does not speak AMQP 1.0 (or its SASL layer
                when we asked for it).
            AuthenticationError: SASL failed.
            DecodeError, FrameSizeError, ProtocolError: see the module docstring.
        """
        if self._phase == "dead":
            raise ProtocolError("the AMQP 1.0 connection is closed")
        self._last_in = now
        self._now = max(self._now, now)
        self._in += data
        events: list[Event] = []
        try:
            while True:
                if self._expect_header is not None:
                    if not self._header():
                        break
                    continue
                limit = self._max_frame if self._opened else max(self._max_frame, 512)
                # SASL frames one at a time: the AMQP header may follow the outcome
                frames, used = decode_frames(self._in, limit,
                                             1 if self._phase == "sasl" else 1 << 30)
                if not frames:
                    break
                del self._in[:used]
                for frame in frames:
                    self._handle(frame, events)
                if self._expect_header is None and self._phase != "sasl":
                    break
        except (ProtocolError, AuthenticationError, ProtocolMismatchError) as exc:
            self._die(exc)
            raise
        return events

    def _header(self) -> bool:
        want = self._expect_header
        assert want is not None
        got = bytes(self._in[:8])
        if got != want[: len(got)]:
            text = "the SASL layer" if want == SASL_HEADER \
                and got == AMQP_HEADER[: len(got)] else "AMQP 1.0"
            raise ProtocolMismatchError(
                f"the peer does not speak {text}: it answered {got!r}")
        if len(got) < 8:
            return False
        del self._in[:8]
        self._expect_header = None
        self._phase = "sasl" if want == SASL_HEADER else "open"
        return True

    def _die(self, exc: BaseException) -> None:
        if self._phase in ("open",) and not self._closing:
            condition = "amqp:connection:framing-error" if isinstance(exc, DecodeError) \
                else "amqp:internal-error"
            self._frame(Performative.make("close", error=ErrorCondition(
                condition, str(exc)[:200]).encode()))
        self._phase = "dead"

    # -------------------------------------------------------------- frames in

    def _handle(self, frame: Frame, events: list[Event]) -> None:
        perf = frame.performative
        if self._phase == "sasl":
            if frame.type != FRAME_SASL or perf is None:
                raise ProtocolError("an AMQP frame during SASL")
            self._sasl(perf)
            return
        if frame.type == FRAME_SASL:
            raise ProtocolError("a SASL frame after SASL")
        if perf is None:
            return  # empty frame: the idle timer was reset by receive_data
        name = perf.name
        if name == "transfer":
            self._on_transfer(perf, frame.payload, events)
        elif name == "flow":
            self._on_flow(perf, events)
        elif name == "disposition":
            self._on_disposition(perf, events)
        elif name == "open":
            self._on_open(perf, events)
        elif name == "begin":
            if not self._opened or self._begun:
                raise ProtocolError("an unexpected begin")
            self._begun = True
            self._next_incoming_id = _uint(perf.get("next_outgoing_id"), "next-outgoing-id")
            self._remote_incoming = _uint(perf.get("incoming_window"), "incoming-window")
            events.append(SessionBegun())
        elif name == "attach":
            self._on_attach(perf, events)
        elif name == "detach":
            self._on_detach(perf, events)
        elif name == "end":
            self._session()
            self._ended = True
            if not self._closing:
                self._frame(Performative.make("end"))
            events.append(SessionEnded(ErrorCondition.decode(perf.get("error"))))
        elif name == "close":
            self._remote_closed = True
            if not self._closing:
                self._closing = True
                self._frame(Performative.make("close"))
            self._phase = "dead"
            events.append(Closed(ErrorCondition.decode(perf.get("error"))))
        else:
            raise ProtocolError(f"an unexpected {name}")

    def _sasl(self, perf: Performative) -> None:
        if perf.name == "sasl-mechanisms":
            if self.mechanism is not None:
                raise ProtocolError("a second sasl-mechanisms")
            offered = symbols(perf.get("sasl_server_mechanisms"))
            assert self._mechanisms is not None
            chosen = next((m for m in self._mechanisms if m in offered), None)
            if chosen is None:
                raise AuthenticationError(
                    "amqp:unauthorized-access: no common SASL mechanism: the broker offers "
                    f"{' '.join(offered) or 'none'}, this client tries "
                    f"{' '.join(self._mechanisms)}")
            self.mechanism = chosen
            response = b""
            if chosen == "PLAIN":
                response = b"\0" + (self._user or "").encode() + b"\0" \
                    + (self._password or "").encode()
            self._frame(Performative.make("sasl-init", mechanism=chosen,
                                          initial_response=response,
                                          hostname=self._hostname), sasl=True)
        elif perf.name == "sasl-challenge":
            # none of our mechanisms has a challenge: answer empty, the outcome decides
            self._frame(Performative.make("sasl-response", response=b""), sasl=True)
        elif perf.name == "sasl-outcome":
            code = perf.get("code")
            if code != 0:
                what = {1: "authentication failed", 2: "system error", 3: "system error "
                        "(permanent)", 4: "system error (temporary)"}.get(code, f"code {code}")
                raise AuthenticationError(f"amqp:unauthorized-access: SASL {self.mechanism} "
                                          f"refused: {what}")
            self._open_amqp()
        else:
            raise ProtocolError(f"an unexpected {perf.name} from the SASL server")

    def _on_open(self, perf: Performative, events: list[Event]) -> None:
        if self._opened:
            raise ProtocolError("a second open")
        self._opened = True
        size = perf.get("max_frame_size")
        self._remote_max_frame = min(size, 1 << 31) if isinstance(size, int) and size >= 512 \
            else (1 << 31) if size is None else 512
        idle = perf.get("idle_time_out")
        self._remote_idle = idle / 1000.0 if isinstance(idle, int) else 0.0
        props = perf.get("properties")
        self.remote_properties = {str(k): v for k, v in props.items()} \
            if isinstance(props, dict) else {}
        container = perf.get("container_id")
        events.append(Opened(container if isinstance(container, str) else "",
                             self.remote_properties, self._remote_max_frame, self._remote_idle))

    def _session(self) -> None:
        if not self._begun or self._ended:
            raise ProtocolError("a session frame with no session")

    def _by_remote(self, perf: Performative) -> _Link:
        self._session()
        handle = perf.get("handle")
        link = self._remote_links.get(handle) if isinstance(handle, int) else None
        if link is None:
            raise ProtocolError(f"a {perf.name} on unattached handle {handle!r}")
        return link

    def _on_attach(self, perf: Performative, events: list[Event]) -> None:
        self._session()
        name, handle = perf.get("name"), perf.get("handle")
        link = next((lk for lk in self._links.values() if lk.name == name), None)
        if link is None or not isinstance(handle, int) or link.remote_handle is not None:
            raise ProtocolError(f"an attach of unknown link {name!r}")
        link.remote_handle = handle
        self._remote_links[handle] = link
        if link.state == "attaching":
            link.state = "attached"
        if link.receiver:
            present, address = terminus_address(perf.get("source"))
            count = perf.get("initial_delivery_count")
            link.delivery_count = count if isinstance(count, int) else 0
        else:
            present, address = terminus_address(perf.get("target"))
        events.append(Attached(link.handle, link.name, present, address))

    def _on_detach(self, perf: Performative, events: list[Event]) -> None:
        link = self._by_remote(perf)
        del self._remote_links[link.remote_handle]  # type: ignore[arg-type]
        if link.state != "detaching" and not self._closing:
            self._frame(Performative.make("detach", handle=link.handle, closed=True))
        del self._links[link.handle]
        events.append(Detached(link.handle, link.name, ErrorCondition.decode(perf.get("error"))))

    def _on_flow(self, perf: Performative, events: list[Event]) -> None:
        self._session()
        nii = perf.get("next_incoming_id")
        window = _uint(perf.get("incoming_window"), "incoming-window")
        base = nii if isinstance(nii, int) else 0
        was_shut = self._remote_incoming <= 0
        self._remote_incoming = max(0, base + window - self._next_outgoing_id)
        handle = perf.get("handle")
        if handle is None:
            if perf.get("echo"):
                self._session_flow()
            if was_shut and self._remote_incoming > 0:  # the senders may send again
                events.extend(CreditGranted(lk.handle, lk.credit) for lk in self._links.values()
                              if not lk.receiver and lk.credit > 0)
            return
        link = self._by_remote(perf)
        if link.receiver:
            if perf.get("echo"):
                self._link_flow(link)
            return
        count = perf.get("delivery_count")
        credit = _uint(perf.get("link_credit"), "link-credit")
        remote_count = count if isinstance(count, int) else link.delivery_count
        link.credit = max(0, (remote_count + credit - link.delivery_count) % _UINT)
        if perf.get("drain") and link.credit:
            link.delivery_count = (link.delivery_count + link.credit) % _UINT
            link.credit = 0
            self._link_flow(link)
        elif perf.get("echo"):
            self._link_flow(link)
        events.append(CreditGranted(link.handle, link.credit))

    def _on_transfer(self, perf: Performative, payload: bytes, events: list[Event]) -> None:
        link = self._by_remote(perf)
        if not link.receiver:
            raise ProtocolError("a transfer on a sending link")
        self._next_incoming_id = (self._next_incoming_id + 1) % _UINT
        self._incoming_left -= 1
        if self._incoming_left < 0:
            raise ProtocolError("the peer sent beyond our session's incoming window")
        if self._incoming_left <= self._window // 2:
            self._incoming_left = self._window
            self._session_flow()
        if link.partial is None:
            did = perf.get("delivery_id")
            if not isinstance(did, int):
                raise ProtocolError("a first transfer frame with no delivery-id")
            if link.credit <= 0:
                raise ProtocolError("a transfer beyond the link credit")
            link.credit -= 1
            link.delivery_count = (link.delivery_count + 1) % _UINT
            link.partial, link.partial_id = [], did
            link.partial_settled = bool(perf.get("settled"))
        elif perf.get("settled"):
            link.partial_settled = True
        if perf.get("aborted"):
            link.partial = None
            return
        link.partial.append(payload)
        if perf.get("more"):
            return
        parts, link.partial = link.partial, None
        body = parts[0] if len(parts) == 1 else b"".join(parts)
        events.append(MessageReceived(link.handle, link.partial_id, body, link.partial_settled))

    def _on_disposition(self, perf: Performative, events: list[Event]) -> None:
        self._session()
        if not perf.get("role"):  # from the peer's sending side: our receipts are settled
            return
        first = _uint(perf.get("first"), "first")
        last = perf.get("last")
        last = first if not isinstance(last, int) else last
        state = perf.get("state")
        outcome = DELIVERY_STATES.get(state.descriptor) if isinstance(state, Described) \
            else None
        if last - first > 1 << 20:
            raise ProtocolError(f"a disposition of {last - first + 1} deliveries")
        for did in range(first, last + 1):
            if did in self._unsettled_out:
                if perf.get("settled"):
                    self._unsettled_out.discard(did)
                events.append(Settled(did, outcome))

    # -------------------------------------------------------------- frames out

    def _session_flow(self) -> None:
        self._frame(Performative.make(
            "flow", next_incoming_id=self._next_incoming_id, incoming_window=self._incoming_left,
            next_outgoing_id=self._next_outgoing_id, outgoing_window=_UINT - 1))

    def _link_flow(self, link: _Link) -> None:
        self._frame(Performative.make(
            "flow", next_incoming_id=self._next_incoming_id, incoming_window=self._incoming_left,
            next_outgoing_id=self._next_outgoing_id, outgoing_window=_UINT - 1,
            handle=link.handle, delivery_count=link.delivery_count, link_credit=link.credit))

    def _usable(self) -> None:
        if self._phase == "dead" or self._closing or self._remote_closed or self._ended:
            raise UsageError("the AMQP 1.0 connection is closed")

    def _link(self, handle: int) -> _Link:
        link = self._links.get(handle)
        if link is None:
            raise UsageError(f"no link with handle {handle}")
        return link

    def _new_handle(self) -> int:
        handle = 0
        while handle in self._links:
            handle += 1
        return handle

    def attach_receiver(self, name: str, source: Source, target: Target | None = None, *,
                        settled: bool = True) -> int:
        """Attach a receiving link (``settled``: ask the peer to send settled); returns
        its handle.  It gets no credit before :meth:`flow`.

        Raises:
            UsageError: the connection is closed or ``name`` is in use.
        """
        return self._attach(name, True, source.encode(),
                            (target or Target()).encode(), settled)

    def attach_sender(self, name: str, target: Target, *, settled: bool = True) -> int:
        """Attach a sending link to ``target``; returns its handle.  Sends wait for the
        peer's credit (:class:`CreditGranted`).

        Raises:
            UsageError: the connection is closed or ``name`` is in use.
        """
        return self._attach(name, False, Source().encode(), target.encode(), settled)

    def _attach(self, name: str, receiver: bool, source: Described, target: Described,
                settled: bool) -> int:
        self._usable()
        if any(lk.name == name for lk in self._links.values()):
            raise UsageError(f"a link named {name!r} is attached")
        handle = self._new_handle()
        self._links[handle] = _Link(handle, name, receiver)
        self._frame(Performative.make(
            "attach", name=name, handle=handle, role=receiver,
            snd_settle_mode=SND_SETTLED if settled else SND_UNSETTLED, rcv_settle_mode=0,
            source=source, target=target,
            initial_delivery_count=None if receiver else 0))
        return handle

    def flow(self, handle: int, credit: int) -> None:
        """Grant receiving link ``handle`` ``credit`` deliveries (replacing what is left).

        Raises:
            UsageError: the connection is closed, or not a receiving link.
        """
        self._usable()
        link = self._link(handle)
        if not link.receiver or credit < 0:
            raise UsageError(f"flow({handle}, {credit}) on a sending link or negative")
        link.credit = credit
        self._link_flow(link)

    def send(self, handle: int, payload: bytes, *, tag: bytes, settled: bool = True) -> int:
        """Queue one delivery of ``payload`` (an encoded message) on sending link
        ``handle``, split into frames of the peer's max-frame-size; returns its
        delivery id.  An unsettled one is answered by :class:`Settled`.

        Raises:
            UsageError: the connection is closed, not a sending link, no credit, or the
                peer's session window is shut.
        """
        self._usable()
        link = self._link(handle)
        if link.receiver or link.state != "attached":
            raise UsageError(f"link {handle} is not an attached sending link")
        if link.credit <= 0:
            raise UsageError(f"no credit on link {link.name!r}")
        if self._remote_incoming <= 0:
            raise UsageError("the peer's session incoming window is shut")
        did = self._next_delivery_id
        self._next_delivery_id = (did + 1) % _UINT
        first = Performative.make("transfer", handle=handle, delivery_id=did, delivery_tag=tag,
                                  message_format=0, settled=True if settled else None)
        frames = transfer_frames(0, first, payload, self._remote_max_frame)
        self._out.extend(frames)
        self._next_outgoing_id = (self._next_outgoing_id + len(frames)) % _UINT
        self._remote_incoming -= len(frames)
        link.credit -= 1
        link.delivery_count = (link.delivery_count + 1) % _UINT
        if not settled:
            self._unsettled_out.add(did)
        return did

    def can_send(self, handle: int) -> bool:
        """True when link ``handle`` is attached with credit and the session window open."""
        link = self._links.get(handle)
        return link is not None and link.state == "attached" and link.credit > 0 \
            and self._remote_incoming > 0 and not self._closing and self._phase == "open"

    def settle(self, delivery_ids: Sequence[int], outcome: str = "accepted") -> None:
        """Settle received deliveries with ``outcome`` (accepted, rejected, released);
        consecutive ids share one disposition.

        Raises:
            UsageError: the connection is closed or an unknown outcome.
        """
        self._usable()
        code = _OUTCOMES.get(outcome)
        if code is None:
            raise UsageError(f"unknown outcome {outcome!r}")
        ids = sorted(delivery_ids)
        i = 0
        while i < len(ids):
            j = i
            while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
                j += 1
            self._frame(Performative.make(
                "disposition", role=True, first=ids[i], last=ids[j] if j > i else None,
                settled=True, state=Described(code, [])))
            i = j + 1

    def detach(self, handle: int, error: ErrorCondition | None = None) -> None:
        """Detach (close) link ``handle``; :class:`Detached` follows the peer's answer.

        Raises:
            UsageError: the connection is closed or no such link.
        """
        self._usable()
        link = self._link(handle)
        if link.state == "detaching":
            return
        link.state = "detaching"
        self._frame(Performative.make("detach", handle=handle, closed=True,
                                      error=error.encode() if error else None))

    def close(self, error: ErrorCondition | None = None) -> None:
        """Queue ``close`` (with ``error``); :class:`Closed` follows the peer's answer.
        Nothing when already closing."""
        if self._closing or self._phase == "dead":
            return
        self._closing = True
        if self._phase == "open" or self._opened:
            self._frame(Performative.make("close", error=error.encode() if error else None))

    # -------------------------------------------------------------- time

    def tick(self, now: float) -> list[Event]:
        """Keep the idle timeouts: queue an empty frame when half the peer's idle
        time-out passed since our last output; :class:`Lost` (and a close with
        ``amqp:resource-limit-exceeded``) when the peer was silent for twice ours."""
        self._now = max(self._now, now)
        if self._phase == "dead":
            return []
        if self._idle and now - self._last_in >= 2 * self._idle:
            reason = f"no frame from the peer for {now - self._last_in:.1f} s " \
                     f"(idle time-out {self._idle:g} s)"
            if self._phase == "open" and not self._closing:
                self._frame(Performative.make("close", error=ErrorCondition(
                    "amqp:resource-limit-exceeded", "local-idle-timeout expired").encode()))
            self._phase = "dead"
            return [Lost(reason)]
        if self._phase == "open" and self._remote_idle \
                and now - self._last_out >= self._remote_idle / 2 and not self._out:
            self._out.append(encode_frame(Frame(FRAME_AMQP, 0, None)))
        return []

    def next_tick(self) -> float | None:
        """When :meth:`tick` has something to do next (None: never)."""
        times = []
        if self._idle:
            times.append(self._last_in + 2 * self._idle)
        if self._remote_idle:
            times.append(self._last_out + self._remote_idle / 2)
        return min(times) if times else None


def _uint(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise DecodeError(f"AMQP 1.0 {what} is not a uint: {value!r:.40}")
    return value
