"""The sans-I/O AMQP 1.0 client (transport/_amqp10_frames.py, _amqp10_engine.py): bytes
in, events and bytes out, checked against frames written here and against proton's
codec (python-qpid-proton as an independent peer)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qmf_async.errors import (
    AuthenticationError,
    DecodeError,
    ProtocolError,
    ProtocolMismatchError,
    UsageError,
)
from qmf_async.transport._amqp10_engine import (
    Amqp10Connection,
    Attached,
    Closed,
    CreditGranted,
    Detached,
    Lost,
    MessageReceived,
    Opened,
    SessionBegun,
    Settled,
    Source,
    Target,
)
from qmf_async.transport._amqp10_frames import (
    AMQP_HEADER,
    PERFORMATIVES,
    SASL_HEADER,
    Frame,
    FrameSizeError,
    Performative,
    decode_frames,
    encode_frame,
    encode_performative,
)
from qmf_async.wire import Described, decode_amqp10_message, encode_amqp10_message

from .conftest import need_proton


def frame(performative: str, /, sasl: bool = False, payload: bytes = b"", **fields: Any) -> bytes:
    return encode_frame(Frame(1 if sasl else 0, 0, Performative.make(performative, **fields),
                              payload))


def sent(conn: Amqp10Connection) -> list[Frame]:
    data = conn.data_to_send()
    while data.startswith(b"AMQP"):
        data = data[8:]
    frames, used = decode_frames(data, 1 << 30)
    assert used == len(data)
    return frames


def names(frames: list[Frame]) -> list[str]:
    return [f.performative.name if f.performative else "empty" for f in frames]


OPEN_BEGIN = (frame("open", container_id="broker", max_frame_size=512, idle_time_out=2000,
                    properties={"product": "test"})
              + frame("begin", remote_channel=0, next_outgoing_id=0, incoming_window=100,
                      outgoing_window=100))


def opened(**options: Any) -> Amqp10Connection:
    conn = Amqp10Connection(container_id="me", sasl_mechanisms=None, **options)
    conn.start(0.0)
    events = conn.receive_data(AMQP_HEADER + OPEN_BEGIN, 0.0)
    assert [type(e) for e in events] == [Opened, SessionBegun]
    conn.data_to_send()
    return conn


def with_links(conn: Amqp10Connection) -> tuple[int, int]:
    r = conn.attach_receiver("r", Source("amq.direct", filter={"b": Described(
        "apache.org:legacy-amqp-direct-binding:string", "k")}), Target("q"), settled=False)
    s = conn.attach_sender("s", Target("qpid.management"))
    events = conn.receive_data(
        frame("attach", name="r", handle=7, role=False, source=Source("amq.direct").encode(),
              target=Target("q").encode(), initial_delivery_count=0)
        + frame("attach", name="s", handle=8, role=True, source=Source().encode(),
                target=Target("qpid.management").encode()), 0.1)
    assert events == [Attached(r, "r", True, "amq.direct"), Attached(s, "s", True,
                                                                     "qpid.management")]
    conn.flow(r, 10)
    conn.data_to_send()
    return r, s


# ------------------------------------------------------------------ frames


@pytest.mark.proton_peer
def test_performatives_encode_as_proton_reads_them() -> None:
    Data = need_proton().Data

    perf = Performative.make("attach", name="l", handle=3, role=True, snd_settle_mode=1,
                             source=Source("amq.topic", filter={"f": Described(
                                 "apache.org:legacy-amqp-topic-binding:string", "a.#")},
                                 dynamic=True).encode(), target=Target("q").encode())
    data = Data()
    data.decode(encode_performative(perf))
    described = data.get_object()
    assert described.descriptor == 0x12
    fields = described.value
    assert fields[:4] == ["l", 3, True, 1]
    assert fields[5].descriptor == 0x28 and fields[5].value[0] == "amqp.topic"[:0] + "amq.topic"
    assert fields[5].value[4] is True  # dynamic
    assert fields[5].value[7]["f"].value == "a.#"


SIMPLE = st.one_of(st.none(), st.integers(0, 2**32 - 1), st.booleans(), st.text(max_size=8),
                   st.binary(max_size=8))


@st.composite
def frames(draw: Any) -> Frame:
    name = draw(st.sampled_from(["flow", "transfer", "disposition", "detach", "begin",
                                 "sasl-init"]))
    _, fields = PERFORMATIVES[name]
    uints = {"handle", "delivery_id", "first", "last", "next_incoming_id", "incoming_window",
             "next_outgoing_id", "outgoing_window", "delivery_count", "link_credit",
             "available", "handle_max", "message_format"}
    values: dict[str, Any] = {}
    for field in fields:
        if field in uints:
            values[field] = draw(st.one_of(st.none(), st.integers(0, 2**32 - 1)))
        elif field in ("drain", "echo", "settled", "more", "role", "closed", "aborted"):
            values[field] = draw(st.one_of(st.none(), st.booleans()))
        elif field in ("delivery_tag", "initial_response"):
            values[field] = draw(st.one_of(st.none(), st.binary(max_size=32)))
        elif field == "remote_channel":
            values[field] = draw(st.one_of(st.none(), st.integers(0, 65535)))
        elif field == "mechanism":
            values[field] = draw(st.sampled_from(["PLAIN", "ANONYMOUS"]))
        elif field == "properties":
            values[field] = draw(st.one_of(st.none(), st.dictionaries(
                st.text(max_size=5), SIMPLE, max_size=3)))
    payload = draw(st.binary(max_size=64)) if name == "transfer" else b""
    sasl = name.startswith("sasl")
    return Frame(1 if sasl else 0, draw(st.integers(0, 65535)),
                 Performative.make(name, **values), payload)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(frames(), max_size=4), st.integers(0, 7))
def test_frames_round_trip(items: list[Frame], cut: int) -> None:
    data = b"".join(encode_frame(f) for f in items)
    got, used = decode_frames(data, 1 << 20)
    assert got == items and used == len(data)
    if data:  # a partial frame stays in the buffer
        part, used = decode_frames(data[: len(data) - 1 - cut % len(data)], 1 << 20)
        assert part == items[: len(part)] and len(part) < len(items)


def test_malformed_frames_raise_typed_errors() -> None:
    with pytest.raises(FrameSizeError, match="over the max-frame-size"):
        decode_frames(frame("open", container_id="x" * 600), 512)
    with pytest.raises(FrameSizeError, match="size 4"):
        decode_frames(b"\x00\x00\x00\x04\x02\x00\x00\x00", 512)
    with pytest.raises(DecodeError, match="frame type 9"):
        decode_frames(b"\x00\x00\x00\x08\x02\x09\x00\x00", 512)
    with pytest.raises(DecodeError, match="not a performative"):
        decode_frames(b"\x00\x00\x00\x09\x02\x00\x00\x00\x41", 512)
    with pytest.raises(DecodeError, match=r"after an AMQP 1\.0 flow"):
        decode_frames(encode_frame(Frame(0, 0, Performative.make("flow"), b"junk")), 512)
    with pytest.raises(DecodeError, match="in a SASL frame"):
        decode_frames(frame("open", sasl=True, container_id="x"), 512)


# ------------------------------------------------------------------ handshake


def test_sasl_plain_then_open_and_begin_pipelined() -> None:
    conn = Amqp10Connection(container_id="me", hostname="h", user="u", password="p",
                            sasl_mechanisms=["EXTERNAL", "PLAIN", "ANONYMOUS"],
                            idle_timeout=5, properties={"product": "qmf-async"})
    conn.start(0.0)
    assert conn.data_to_send() == SASL_HEADER
    assert conn.receive_data(SASL_HEADER + frame("sasl-mechanisms", sasl=True,
                                                 sasl_server_mechanisms=["ANONYMOUS", "PLAIN"]),
                             0.0) == []
    (init,) = sent(conn)
    assert init.type == 1 and init.performative == Performative.make(
        "sasl-init", mechanism="PLAIN", initial_response=b"\0u\0p", hostname="h")
    assert conn.receive_data(frame("sasl-outcome", sasl=True, code=0) + AMQP_HEADER[:3], 0.0) \
        == []
    out = conn.data_to_send()
    assert out.startswith(AMQP_HEADER)
    opening = decode_frames(out[8:], 1 << 20)[0]
    assert names(opening) == ["open", "begin"]
    perf = opening[0].performative
    assert perf is not None and perf.get("idle_time_out") == 5000
    assert perf.get("properties") == {"product": "qmf-async"}
    events = conn.receive_data(AMQP_HEADER[3:] + OPEN_BEGIN, 0.0)
    assert events[0] == Opened("broker", {"product": "test"}, 512, 2.0)
    assert conn.is_open and conn.mechanism == "PLAIN"


@pytest.mark.parametrize(("mechs", "offered", "answer", "error", "match"), [
    (["ANONYMOUS"], ["PLAIN"], b"", AuthenticationError, "no common SASL mechanism"),
    (["PLAIN"], ["PLAIN"], frame("sasl-outcome", sasl=True, code=1), AuthenticationError,
     "PLAIN refused: authentication failed"),
])
def test_sasl_failures(mechs: list[str], offered: list[str], answer: bytes,
                       error: type[Exception], match: str) -> None:
    conn = Amqp10Connection(container_id="me", sasl_mechanisms=mechs)
    conn.start(0.0)
    with pytest.raises(error, match=match):
        conn.receive_data(SASL_HEADER + frame("sasl-mechanisms", sasl=True,
                                              sasl_server_mechanisms=offered) + answer, 0.0)
    with pytest.raises(ProtocolError, match="closed"):
        conn.receive_data(b"", 0.1)


def test_unsupported_mechanisms_and_wrong_protocol() -> None:
    with pytest.raises(UsageError, match="GSSAPI"):
        Amqp10Connection(container_id="me", sasl_mechanisms=["GSSAPI"])
    with pytest.raises(UsageError, match="SCRAM-SHA-256"):
        Amqp10Connection(container_id="me", sasl_mechanisms=["SCRAM-SHA-256"])
    conn = Amqp10Connection(container_id="me", sasl_mechanisms=["ANONYMOUS"])
    conn.start(0.0)
    with pytest.raises(ProtocolMismatchError, match=r"AMQP 1\.0"):
        conn.receive_data(b"AMQP\x00\x00\x09\x01", 0.0)  # RabbitMQ's 0-9-1 answer


# ------------------------------------------------------------------ links


def test_multi_frame_transfer_in_and_disposition_out() -> None:
    conn = opened()
    r, _ = with_links(conn)
    message = encode_amqp10_message(b"x" * 1500, subject="k")
    wire = frame("transfer", handle=7, delivery_id=4, delivery_tag=b"t", more=True,
                 payload=message[:700]) \
        + frame("transfer", handle=7, more=True, payload=message[700:1400]) \
        + frame("transfer", handle=7, payload=message[1400:])
    events = conn.receive_data(wire[:-5], 0.2) + conn.receive_data(wire[-5:], 0.2)
    assert events == [MessageReceived(r, 4, message, False)]
    assert decode_amqp10_message(events[0].payload).subject == "k"  # type: ignore[union-attr]
    assert conn.link_credit(r) == 9
    conn.settle([4, 5, 6, 9])
    frames_out = sent(conn)
    assert [(f.performative.get("first"), f.performative.get("last"))  # type: ignore[union-attr]
            for f in frames_out] == [(4, 6), (9, None)]


def test_send_waits_for_credit_and_splits_at_the_peers_max_frame() -> None:
    conn = opened()
    _, s = with_links(conn)
    assert not conn.can_send(s)
    with pytest.raises(UsageError, match="no credit"):
        conn.send(s, b"x", tag=b"1")
    events = conn.receive_data(frame("flow", next_incoming_id=0, incoming_window=100,
                                     next_outgoing_id=0, outgoing_window=100, handle=8,
                                     delivery_count=0, link_credit=2), 0.2)
    assert events == [CreditGranted(s, 2)]
    did = conn.send(s, b"y" * 1200, tag=b"1", settled=False)  # the broker's max is 512
    out = sent(conn)
    assert len(out) == 3 and all(len(encode_frame(f)) <= 512 for f in out)
    assert [f.performative.get("more") for f in out] == [True, True, None]  # type: ignore
    assert b"".join(f.payload for f in out) == b"y" * 1200
    assert conn.receive_data(frame("disposition", role=True, first=did, settled=True,
                                   state=Described(0x24, [])), 0.3) == [Settled(did, "accepted")]
    assert conn.link_credit(s) == 1


def test_detach_with_error_and_close() -> None:
    conn = opened()
    with_links(conn)
    events = conn.receive_data(frame("detach", handle=7, closed=True, error=Described(
        0x1D, ["amqp:not-found", "Node not found: x"])), 0.2)
    assert len(events) == 1 and isinstance(events[0], Detached)
    assert str(events[0].error) == "amqp:not-found: Node not found: x"
    assert names(sent(conn)) == ["detach"]  # answered
    events = conn.receive_data(frame("close", error=Described(0x1D, ["amqp:internal-error"])),
                               0.3)
    assert isinstance(events[0], Closed) and events[0].error is not None
    assert names(sent(conn)) == ["close"]
    with pytest.raises(UsageError):
        conn.attach_sender("x", Target("y"))


@pytest.mark.parametrize(("data", "error", "match"), [
    (frame("transfer", handle=99, delivery_id=0, delivery_tag=b"t"), ProtocolError,
     "unattached handle 99"),
    (frame("open", container_id="again"), ProtocolError, "a second open"),
    (frame("attach", name="nobody", handle=1, role=True), ProtocolError, "unknown link"),
    (b"\x00\x01\x00\x00\x02\x00\x00\x00", FrameSizeError, "over the max-frame-size"),
    (b"\x00\x00\x00\x0c\x02\x00\x00\x00\x00\x53\x13\x41", DecodeError, "not a performative"),
])
def test_wrong_frames_kill_the_connection(data: bytes, error: type[Exception],
                                          match: str) -> None:
    conn = opened(max_frame_size=1024)
    with pytest.raises(error, match=match):
        conn.receive_data(data, 0.1)
    assert names(sent(conn)) == ["close"]  # with the error, for the peer


def test_transfer_beyond_credit_is_a_protocol_error() -> None:
    conn = opened()
    with_links(conn)
    conn.flow(0, 0)
    with pytest.raises(ProtocolError, match="beyond the link credit"):
        conn.receive_data(frame("transfer", handle=7, delivery_id=0, delivery_tag=b"t",
                                payload=b"\x00\x53\x77\x40"), 0.2)


def test_idle_timeouts() -> None:
    conn = opened(idle_timeout=1.0)  # the broker announced 2 s
    conn.tick(0.5)
    assert conn.data_to_send() == b""
    conn.tick(1.0)  # half the broker's 2 s since our last output
    assert conn.data_to_send() == b"\x00\x00\x00\x08\x02\x00\x00\x00"
    conn.receive_data(b"\x00\x00\x00\x08\x02\x00\x00\x00", 1.5)  # its heartbeat
    assert conn.tick(3.4) == [] and conn.next_tick() is not None
    assert conn.data_to_send() == b"\x00\x00\x00\x08\x02\x00\x00\x00"
    events = conn.tick(3.6)  # silent for twice our 1 s
    assert len(events) == 1 and isinstance(events[0], Lost)
    assert "2.1 s" in events[0].reason
    (close,) = sent(conn)
    assert close.performative is not None and "resource-limit" in str(
        close.performative.get("error"))


def test_dynamic_source_and_receive_flow_window() -> None:
    conn = opened(incoming_window=4)
    h = conn.attach_receiver("d", Source(dynamic=True, dynamic_node_properties={
        "x-opt": 1}))
    (attach,) = sent(conn)
    assert attach.performative is not None
    source = attach.performative.get("source")
    assert source.value[4] is True and source.value[5] == {"x-opt": 1}
    conn.receive_data(frame("attach", name="d", handle=0, role=False, source=Source(
        "tmp.dyn.1").encode(), initial_delivery_count=0), 0.1)
    conn.flow(h, 10)
    sent(conn)
    for i in range(3):
        conn.receive_data(frame("transfer", handle=0, delivery_id=i, delivery_tag=b"t",
                                settled=True, payload=b"\x00\x53\x77\x40"), 0.2)
    assert names(sent(conn)) == ["flow"]  # the session window reopened at half


def test_a_shut_session_window_holds_sends_until_the_peer_reopens_it() -> None:
    conn = opened()
    _, s = with_links(conn)
    conn.receive_data(frame("flow", next_incoming_id=0, incoming_window=1, next_outgoing_id=0,
                            outgoing_window=100, handle=8, delivery_count=0, link_credit=5),
                      0.2)
    conn.send(s, b"a", tag=b"1")
    assert conn.link_credit(s) == 4 and not conn.can_send(s)  # the window is used up
    with pytest.raises(UsageError, match="window is shut"):
        conn.send(s, b"b", tag=b"2")
    events = conn.receive_data(frame("flow", next_incoming_id=1, incoming_window=10,
                                     next_outgoing_id=0, outgoing_window=100), 0.3)
    assert events == [CreditGranted(s, 4)] and conn.can_send(s)
