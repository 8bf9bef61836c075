"""Fuzz target ``v2``: QMF v2 map messages through the two carriers the v2 path uses,
then :func:`~qmf_async.wire.decode_v2`, then back.

The first input byte picks the carrier, the rest is the payload:

* even, bit 1 clear -- an AMQP 1.0 message (``decode_amqp10_message``, as the qpidd
  transport receives it): an amqp-value map or list body goes to ``decode_v2`` with
  the message's application properties, subject and correlation id.  The message and
  each of its values are re-encoded and must decode equal.
* even, bit 1 set -- one AMQP 1.0 value (``decode_amqp10_value``), which must
  re-encode to bytes that decode equal.
* odd -- an ``amqp/map`` (bit 1 clear) or ``amqp/list`` (bit 1 set) AMQP 0-10 body
  (``decode_v2_body``, as the 0-9-1 transport receives it) after a second byte that
  picks the application properties: one of :data:`OPCODES`, with and without
  ``qmf.agent``, with one of :data:`CONTENTS`.  The body re-encodes and must decode
  equal.

Every message that ``decode_v2`` accepts is encoded with ``encode_v2`` and must decode
to the same message.  Allowed outcomes: success, :class:`~qmf_async.DecodeError` from
decoding, :class:`~qmf_async.EncodeError` from encoding.
"""

from __future__ import annotations

import math
import uuid
from typing import Any

from qmf_async.errors import DecodeError, EncodeError
from qmf_async.wire import (
    Described,
    V2Message,
    decode_amqp10_message,
    decode_amqp10_value,
    decode_v2,
    decode_v2_body,
    encode_amqp10_message,
    encode_amqp10_value,
    encode_v2,
    encode_v2_body,
)

NAME = "v2"

OPCODES = ("_query_request", "_query_response", "_method_request", "_method_response",
           "_exception", "_agent_locate_request", "_agent_locate_response",
           "_agent_heartbeat_indication", "_data_indication", "_unknown_opcode")
CONTENTS = (None, "_data", "_event", "_schema_id")


def _props(selector: int) -> dict[str, Any]:
    opcode = OPCODES[selector % len(OPCODES)]
    selector //= len(OPCODES)
    props: dict[str, Any] = {"qmf.opcode": opcode}
    if selector & 1:
        props["qmf.agent"] = "vendor:product:instance"
    content = CONTENTS[(selector >> 1) % len(CONTENTS)]
    if content is not None:
        props["qmf.content"] = content
    return props


def _same(a: Any, b: Any) -> bool:
    """Equality that takes NaN as equal to NaN and tells bool from int."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, Described) and isinstance(b, Described):
        return _same(a.descriptor, b.descriptor) and _same(a.value, b.value)
    if hasattr(a, "__attrs_attrs__") and type(a) is type(b):
        return all(_same(getattr(a, f.name), getattr(b, f.name)) for f in a.__attrs_attrs__)
    return bool(a == b)


def _check_v2(msg: V2Message) -> None:
    """``encode_v2`` then ``decode_v2`` gives the message back."""
    try:
        props, body, cid = encode_v2(msg)
    except EncodeError:
        return
    again = decode_v2(props, body, subject=getattr(msg, "subject", None), correlation_id=cid)
    assert _same(again, msg), f"v2 round trip changed {msg!r} into {again!r}"


def _v2(props: Any, body: Any, subject: str | None, cid: Any) -> None:
    try:
        msg = decode_v2(props, body, subject=subject, correlation_id=cid)
    except DecodeError:
        return
    _check_v2(msg)


def _amqp10(payload: bytes) -> None:
    try:
        message = decode_amqp10_message(payload)
    except DecodeError:
        return
    body = message.body
    # every value of the message re-encodes and decodes equal
    for value in (body, message.application_properties, message.correlation_id):
        if not (message.body_kind == "data" and value is body):
            _check_value(value)
    if message.body_kind == "value" and isinstance(body, (dict, list)):
        _v2(message.application_properties, body, message.subject,
            _text_cid(message.correlation_id))
    # the message re-encodes (as the transport sends one) and decodes equal
    kind = "data" if message.body_kind == "data" else "value"
    try:
        raw = encode_amqp10_message(
            body, subject=message.subject, reply_to=message.reply_to,
            content_type=message.content_type if kind == "data" else None,
            correlation_id=message.correlation_id,
            application_properties=message.application_properties, body_kind=kind)
    except EncodeError:
        return
    back = decode_amqp10_message(raw)
    assert _same(back.body, body) and _same(back.application_properties,
                                            message.application_properties), (
        f"AMQP 1.0 message {payload.hex()} changed on re-encode")


def _check_value(value: Any) -> None:
    """An AMQP 1.0 value re-encodes to bytes that decode equal."""
    try:
        raw = encode_amqp10_value(value)
    except EncodeError:
        return
    back, end = decode_amqp10_value(raw)
    assert end == len(raw) and _same(back, value), f"AMQP 1.0 value {value!r} -> {back!r}"


def _amqp10_value(payload: bytes) -> None:
    try:
        value, _ = decode_amqp10_value(payload)
    except DecodeError:
        return
    _check_value(value)


def _text_cid(value: Any) -> Any:
    """The correlation id as the v2 console core reads it (text, when it is text)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def _amqp010(mode: int, selector: int, payload: bytes) -> None:
    content_type = "amqp/list" if mode & 2 else "amqp/map"
    try:
        body = decode_v2_body(content_type, payload)
    except DecodeError:
        return
    try:
        again_type, raw = encode_v2_body(body)
    except EncodeError:
        raw = b""
    else:
        assert again_type == content_type
        again = decode_v2_body(again_type, raw)
        assert _same(again, body), f"AMQP 0-10 body {payload.hex()} changed on re-encode"
    _v2(_props(selector), body, None, None)


def one_input(data: bytes) -> None:
    """Decode one input through its carrier and ``decode_v2``, and encode it back;
    raises only DecodeError and EncodeError (caught here).

    Raises:
        AssertionError: what decoded does not survive its re-encoding.
    """
    if len(data) < 2:
        return
    mode, payload = data[0], data[1:]
    if mode & 1:
        _amqp010(mode, payload[0], payload[1:])
    elif mode & 2:
        _amqp10_value(payload)
    else:
        _amqp10(payload)


def seeds() -> list[bytes]:
    """Seed inputs: v2 messages made by the project's encoders, in both carriers, and
    the real qpidd 1.40 AMQP 1.0 messages of the v2 capture."""
    from ._v2_seeds import golden, messages

    out: list[bytes] = [b"\x00" + raw for raw in golden()]
    for msg in messages():
        props, body, cid = encode_v2(msg)
        out.append(b"\x00" + encode_amqp10_message(
            body, subject="qmf.default.topic", reply_to="qmf.default.direct/reply",
            correlation_id=cid, application_properties=props, body_kind="value"))
        out.append(b"\x02" + encode_amqp10_value(body))
        content_type, raw = encode_v2_body(body)
        opcode = OPCODES.index(props["qmf.opcode"]) if props["qmf.opcode"] in OPCODES else 9
        selector = opcode + len(OPCODES) * (("qmf.agent" in props)
                                            | (2 * CONTENTS.index(props.get("qmf.content"))))
        out.append(bytes([1 | (2 if content_type == "amqp/list" else 0), selector]) + raw)
    return out
