"""Fuzz target ``amqp10``: AMQP 1.0 frames through the sans-I/O client connection.

The input is what a peer sends after the handshake: the connection is first driven
(with no SASL) to an open session with one receiving link (handle 0) and one sending
link, then fed the input in two pieces (split at its first byte's value) and ticked.
Allowed outcomes: events, or a typed ``QmfError`` (``DecodeError``, ``FrameSizeError``,
``ProtocolError`` for malformed or out-of-state frames).  The frame decoder alone sees
the input as well; a decoded frame must encode again.
"""

from __future__ import annotations

from qmf_async.errors import QmfError
from qmf_async.transport._amqp10_engine import Amqp10Connection, Source, Target
from qmf_async.transport._amqp10_frames import (
    AMQP_HEADER,
    Frame,
    Performative,
    decode_frames,
    encode_frame,
)

NAME = "amqp10"


def _frame(performative: str, /, **fields: object) -> bytes:
    return encode_frame(Frame(0, 0, Performative.make(performative, **fields)))


def handshake() -> bytes:
    """What the peer sends first: header, open, begin, attaches of our two links."""
    return b"".join((
        AMQP_HEADER,
        _frame("open", container_id="peer", max_frame_size=4096, idle_time_out=1000),
        _frame("begin", remote_channel=0, next_outgoing_id=0, incoming_window=100,
               outgoing_window=100),
        _frame("attach", name="r", handle=0, role=False, source=Source("ex").encode(),
               target=Target("q").encode(), initial_delivery_count=0),
        _frame("attach", name="s", handle=1, role=True, source=Source().encode(),
               target=Target("ex").encode()),
    ))


def _connection() -> Amqp10Connection:
    conn = Amqp10Connection(container_id="fuzz", sasl_mechanisms=None, idle_timeout=1.0,
                            max_frame_size=4096, incoming_window=16)
    conn.start(0.0)
    conn.attach_receiver("r", Source("ex"), Target("q"), settled=False)
    conn.attach_sender("s", Target("ex"))
    conn.receive_data(handshake(), 0.0)
    conn.flow(0, 10)
    conn.data_to_send()
    return conn


def one_input(data: bytes) -> None:
    """Feed ``data`` to an open connection and to the frame decoder.

    Raises:
        AssertionError: a decoded frame does not encode to a frame that decodes equal.
    """
    try:
        frames, _ = decode_frames(data, 4096)
    except QmfError:
        frames = []
    for frame in frames:
        again, _used = decode_frames(encode_frame(frame), 1 << 20)
        assert again == [frame], (frame, again)
    conn = _connection()
    cut = data[0] if data else 0
    try:
        conn.receive_data(data[:cut], 0.5)
        conn.receive_data(data[cut:], 0.6)
        conn.tick(0.7)
        if conn.can_send(1):
            conn.send(1, b"\x00\x53\x77\x40", tag=b"t")
        conn.data_to_send()
    except QmfError:
        pass


def seeds() -> list[bytes]:
    """Transfers (one and several frames), flows, dispositions, detach, end, close."""
    from qmf_async.wire import Described

    msg = b"\x00\x53\x75\xa0\x05hello"
    return [
        _frame("transfer", handle=0, delivery_id=0, delivery_tag=b"a", settled=True) + msg,
        _frame("transfer", handle=0, delivery_id=1, delivery_tag=b"b", more=True) + msg[:4]
        + _frame("transfer", handle=0) + msg[4:],
        _frame("flow", next_incoming_id=0, incoming_window=10, next_outgoing_id=0,
               outgoing_window=10, handle=1, delivery_count=0, link_credit=5),
        _frame("flow", next_incoming_id=0, incoming_window=10, next_outgoing_id=0,
               outgoing_window=10, echo=True),
        _frame("disposition", role=True, first=0, last=3, settled=True,
               state=Described(0x24, [])),
        _frame("detach", handle=0, closed=True,
               error=Described(0x1D, ["amqp:not-found", "gone"])),
        _frame("end"), _frame("close", error=Described(0x1D, ["amqp:internal-error"])),
        b"\x00\x00\x00\x08\x02\x00\x00\x00", b"\xff\xff\xff\xff\x02\x00\x00\x00",
    ]
