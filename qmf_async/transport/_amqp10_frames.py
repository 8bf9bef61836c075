"""AMQP 1.0 frames and performatives, bytes in and out (no I/O, no asyncio).

The frame layer of AMQP 1.0 part 2 on the value codec of ``wire`` (``encode_amqp10_value``,
``decode_amqp10_value``): a frame is ``size`` (4 bytes, the whole frame), ``doff`` (data
offset in 4-byte words, at least 2), ``type`` (0 AMQP, 1 SASL), ``channel`` (2 bytes), an
extended header that is skipped, then the body: a performative (a described list) and,
for a transfer, the payload that follows it.  A frame of 8 bytes is an empty frame (a
heartbeat).

Performatives are :class:`Performative` values: the name of the performative and its
fields in the order of the specification, trailing fields that are absent as ``None``.
:data:`PERFORMATIVES` is the one table of names, descriptor codes, fields and their
AMQP types; encoding wraps each field in its type (``uint``, ``ushort``, ...), decoding
accepts the numeric or the symbolic descriptor.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, Final

from ..errors import DecodeError, EncodeError, ProtocolError
from ..frozen import frozen
from ..wire import Described, Symbol, Typed10, decode_amqp10_value, encode_amqp10_value

__all__ = [
    "AMQP_HEADER",
    "PERFORMATIVES",
    "SASL_HEADER",
    "ErrorCondition",
    "Frame",
    "FrameSizeError",
    "Performative",
    "decode_frames",
    "encode_frame",
]

#: the protocol headers (part 2, 2.2): AMQP 1.0.0 and its SASL layer
AMQP_HEADER: Final = b"AMQP\x00\x01\x00\x00"
SASL_HEADER: Final = b"AMQP\x03\x01\x00\x00"
#: the smallest max-frame-size a peer may announce (part 2, 2.7.1)
MIN_MAX_FRAME_SIZE: Final = 512
FRAME_AMQP: Final = 0
FRAME_SASL: Final = 1

_HEADER = struct.Struct(">IBBH")


class FrameSizeError(ProtocolError):
    """A frame larger than the negotiated max-frame-size, or with an impossible size."""


# name -> (descriptor code, ((field, type), ...)); type "" is sent as the value is
_TABLE: Final[dict[str, tuple[int, tuple[tuple[str, str], ...]]]] = {
    "open": (0x10, (("container_id", ""), ("hostname", ""), ("max_frame_size", "uint"),
                    ("channel_max", "ushort"), ("idle_time_out", "uint"),
                    ("outgoing_locales", "sym"), ("incoming_locales", "sym"),
                    ("offered_capabilities", "sym"), ("desired_capabilities", "sym"),
                    ("properties", ""))),
    "begin": (0x11, (("remote_channel", "ushort"), ("next_outgoing_id", "uint"),
                     ("incoming_window", "uint"), ("outgoing_window", "uint"),
                     ("handle_max", "uint"), ("offered_capabilities", "sym"),
                     ("desired_capabilities", "sym"), ("properties", ""))),
    "attach": (0x12, (("name", ""), ("handle", "uint"), ("role", ""),
                      ("snd_settle_mode", "ubyte"), ("rcv_settle_mode", "ubyte"),
                      ("source", ""), ("target", ""), ("unsettled", ""),
                      ("incomplete_unsettled", ""), ("initial_delivery_count", "uint"),
                      ("max_message_size", "ulong"), ("offered_capabilities", "sym"),
                      ("desired_capabilities", "sym"), ("properties", ""))),
    "flow": (0x13, (("next_incoming_id", "uint"), ("incoming_window", "uint"),
                    ("next_outgoing_id", "uint"), ("outgoing_window", "uint"),
                    ("handle", "uint"), ("delivery_count", "uint"), ("link_credit", "uint"),
                    ("available", "uint"), ("drain", ""), ("echo", ""), ("properties", ""))),
    "transfer": (0x14, (("handle", "uint"), ("delivery_id", "uint"), ("delivery_tag", ""),
                        ("message_format", "uint"), ("settled", ""), ("more", ""),
                        ("rcv_settle_mode", "ubyte"), ("state", ""), ("resume", ""),
                        ("aborted", ""), ("batchable", ""))),
    "disposition": (0x15, (("role", ""), ("first", "uint"), ("last", "uint"),
                           ("settled", ""), ("state", ""), ("batchable", ""))),
    "detach": (0x16, (("handle", "uint"), ("closed", ""), ("error", ""))),
    "end": (0x17, (("error", ""),)),
    "close": (0x18, (("error", ""),)),
    "sasl-mechanisms": (0x40, (("sasl_server_mechanisms", "sym"),)),
    "sasl-init": (0x41, (("mechanism", "sym"), ("initial_response", ""), ("hostname", ""))),
    "sasl-challenge": (0x42, (("challenge", ""),)),
    "sasl-response": (0x43, (("response", ""),)),
    "sasl-outcome": (0x44, (("code", "ubyte"), ("additional_data", ""))),
}
#: the performatives: name -> (descriptor code, field names)
PERFORMATIVES: Final = {name: (code, tuple(f for f, _ in fields))
                        for name, (code, fields) in _TABLE.items()}
_BY_CODE: Final = {code: name for name, (code, _) in _TABLE.items()}
_BY_SYMBOL: Final = {f"amqp:{name}:list": name for name in _TABLE}
_INDEX: Final = {name: {f: i for i, (f, _) in enumerate(fields)}
                 for name, (_, fields) in _TABLE.items()}
_SASL_NAMES: Final = frozenset(n for n in _TABLE if n.startswith("sasl-"))


@frozen
class Performative:
    """One performative: its ``name`` (``"open"``, ``"transfer"``, ``"sasl-init"``, ...)
    and ``fields`` in the specification's order (absent ones ``None``)."""

    name: str
    fields: tuple[Any, ...]

    @classmethod
    def make(cls, name: str, /, **values: Any) -> Performative:
        """A performative from keyword fields (``Performative.make("flow", handle=0)``).

        Raises:
            EncodeError: an unknown performative or field.
        """
        index = _INDEX.get(name)
        if index is None:
            raise EncodeError(f"no AMQP 1.0 performative {name!r}")
        fields: list[Any] = [None] * len(index)
        for key, value in values.items():
            at = index.get(key)
            if at is None:
                raise EncodeError(f"performative {name!r} has no field {key!r}")
            fields[at] = value
        return cls(name, tuple(fields))

    def get(self, field: str) -> Any:
        """The value of ``field`` (None when absent)."""
        return self.fields[_INDEX[self.name][field]]


@frozen
class ErrorCondition:
    """An AMQP 1.0 error (part 2, 2.8.14): ``condition`` (``amqp:not-found``, ...),
    ``description`` and ``info``."""

    condition: str
    description: str | None = None
    info: Any = None

    def __str__(self) -> str:
        return f"{self.condition}: {self.description}" if self.description \
            else self.condition

    def encode(self) -> Described:
        """The described list sent in a detach, end or close."""
        fields = [Symbol(self.condition), self.description, self.info]
        while fields and fields[-1] is None:
            fields.pop()
        return Described(0x1D, fields)

    @classmethod
    def decode(cls, value: Any) -> ErrorCondition | None:
        """The error of a received detach, end or close (None when absent).

        Raises:
            DecodeError: not an error list.
        """
        if value is None:
            return None
        if not isinstance(value, Described) or not isinstance(value.value, list) \
                or not value.value or not isinstance(value.value[0], str):
            raise DecodeError(f"malformed AMQP 1.0 error: {value!r}")
        fields = [*value.value, None, None]
        description = fields[1] if isinstance(fields[1], str) else None
        return cls(str(fields[0]), description, fields[2])


@frozen
class Frame:
    """One frame: ``type`` (0 AMQP, 1 SASL), ``channel``, the ``performative`` (None for
    an empty frame) and the transfer ``payload``."""

    type: int
    channel: int
    performative: Performative | None
    payload: bytes = b""


def _wrap(kind: str, value: Any) -> Any:
    if value is None or not kind:
        return value
    if kind == "sym":
        if isinstance(value, str):
            return Symbol(value)
        return [Symbol(v) for v in value]
    return Typed10(kind, value)


def encode_performative(perf: Performative) -> bytes:
    """The described list of ``perf`` (trailing absent fields left out).

    Raises:
        EncodeError: an unknown performative or a field with no encoding.
    """
    entry = _TABLE.get(perf.name)
    if entry is None:
        raise EncodeError(f"no AMQP 1.0 performative {perf.name!r}")
    code, spec = entry
    values = list(perf.fields)
    if len(values) > len(spec):
        raise EncodeError(f"performative {perf.name!r} takes {len(spec)} fields")
    while values and values[-1] is None:
        values.pop()
    return encode_amqp10_value(Described(code, [
        _wrap(kind, value) for (_, kind), value in zip(spec, values, strict=False)]))


def encode_frame(frame: Frame) -> bytes:
    """The bytes of ``frame`` (doff 2: no extended header).

    Raises:
        EncodeError: a performative with no encoding, or a channel out of range.
    """
    if not 0 <= frame.channel <= 0xFFFF or frame.type not in (FRAME_AMQP, FRAME_SASL):
        raise EncodeError(f"bad frame type {frame.type} or channel {frame.channel}")
    body = b"" if frame.performative is None else encode_performative(frame.performative)
    size = 8 + len(body) + len(frame.payload)
    return _HEADER.pack(size, 2, frame.type, frame.channel) + body + frame.payload


def _performative(value: Any, sasl: bool) -> Performative:
    if not isinstance(value, Described) or not isinstance(value.value, list):
        raise DecodeError(f"an AMQP 1.0 frame body is not a performative: {value!r:.80}")
    descriptor = value.descriptor
    name = _BY_CODE.get(descriptor) if isinstance(descriptor, int) \
        else _BY_SYMBOL.get(descriptor) if isinstance(descriptor, str) else None
    if name is None:
        raise DecodeError(f"unknown AMQP 1.0 performative {descriptor!r}")
    if (name in _SASL_NAMES) != sasl:
        raise DecodeError(f"performative {name!r} in a {'SASL' if sasl else 'AMQP'} frame")
    width = len(_TABLE[name][1])
    fields = value.value
    if len(fields) > width:  # later versions may add fields: keep ours
        fields = fields[:width]
    return Performative(name, tuple(fields) + (None,) * (width - len(fields)))


def decode_frames(buf: bytes | bytearray | memoryview, max_frame_size: int,
                  max_frames: int = 1 << 30) -> tuple[list[Frame], int]:
    """Decode the whole frames at the start of ``buf`` (at most ``max_frames``): returns
    them and the number of bytes they took (a trailing partial frame is left for the
    next call).

    Raises:
        FrameSizeError: a frame over ``max_frame_size``, or with a size under 8 or a
            data offset outside the frame.
        DecodeError: an unknown frame type, or a body that is not one performative
            (a payload is only allowed after a transfer).
    """
    view = memoryview(buf)
    end = len(view)
    pos = 0
    frames: list[Frame] = []
    while end - pos >= 8 and len(frames) < max_frames:
        size, doff, ftype, channel = _HEADER.unpack_from(view, pos)
        if size > max_frame_size:
            raise FrameSizeError(f"AMQP 1.0 frame of {size} bytes over the max-frame-size "
                                 f"of {max_frame_size}")
        if size < 8 or doff < 2 or doff * 4 > size:
            raise FrameSizeError(f"malformed AMQP 1.0 frame header: size {size}, doff {doff}")
        if end - pos < size:
            break
        if ftype not in (FRAME_AMQP, FRAME_SASL):
            raise DecodeError(f"unknown AMQP 1.0 frame type {ftype}")
        start, stop = pos + doff * 4, pos + size
        pos = stop
        if start == stop:
            if ftype == FRAME_SASL:
                raise DecodeError("an empty SASL frame")
            frames.append(Frame(ftype, channel, None))
            continue
        body = view[start:stop]
        value, used = decode_amqp10_value(body)
        perf = _performative(value, ftype == FRAME_SASL)
        payload = b""
        if used < len(body):
            if perf.name != "transfer":
                raise DecodeError(f"{len(body) - used} bytes after an AMQP 1.0 "
                                  f"{perf.name} performative")
            payload = bytes(body[used:])
        frames.append(Frame(ftype, channel, perf, payload))
    return frames, pos


def transfer_frames(channel: int, first: Performative, payload: bytes,
                    max_frame_size: int) -> list[bytes]:
    """The frames of one delivery: ``first`` (a transfer) with as much of ``payload`` as
    fits in ``max_frame_size``, then continuation transfers (``more`` set on all but
    the last).

    Raises:
        EncodeError: the max-frame-size leaves no room for any payload.
    """
    handle = first.get("handle")
    whole = encode_frame(Frame(FRAME_AMQP, channel, first, payload))
    if len(whole) <= max_frame_size:
        return [whole]
    more_first = Performative(first.name, _with(first, "more", True))
    out: list[bytes] = []
    rest = memoryview(payload)
    perf = more_first
    while True:
        head = encode_performative(perf)
        room = max_frame_size - 8 - len(head)
        if room <= 0:
            raise EncodeError(f"max-frame-size {max_frame_size} leaves no room for a payload")
        if len(rest) <= room:
            last = Performative.make("transfer", handle=handle)
            if perf is not more_first:
                perf = last
            else:  # cannot happen: the whole frame did not fit
                perf = Performative(first.name, _with(first, "more", False))
            out.append(encode_frame(Frame(FRAME_AMQP, channel, perf, bytes(rest))))
            return out
        out.append(encode_frame(Frame(FRAME_AMQP, channel, perf, bytes(rest[:room]))))
        rest = rest[room:]
        perf = Performative.make("transfer", handle=handle, more=True)


def _with(perf: Performative, field: str, value: Any) -> tuple[Any, ...]:
    fields = list(perf.fields)
    fields[_INDEX[perf.name][field]] = value
    return tuple(fields)


def symbols(value: Any) -> Sequence[str]:
    """A multiple-symbol field as a list (one symbol, an array of them, or None)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [str(v) for v in value if isinstance(v, str)]
    raise DecodeError(f"expected symbols, got {value!r:.80}")
