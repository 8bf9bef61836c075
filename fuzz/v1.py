"""Fuzz target ``v1``: a whole QMF v1 body decoded as the console and the agent do,
then re-encoded.

The first input byte picks the mode, the rest is the AMQP body:

* bit 0 -- ``lazy``: object records come as ``RawObjectRecord`` (the console's path);
  every value is then read, which is where a lazy record decodes.
* bit 1 -- ``defer_unknown``: a record of an unknown class ends the list with an
  ``UndecodedTail`` (the console's path) instead of raising.
* bit 2 -- learn first: the schema responses in the body are added to a copy of the
  registry before the body is decoded again (a console that learns a class and
  decodes its records).

The registry holds the 38 classes of the real qpidd 1.40 schema responses in
``data/qpidd-schemas.bin``, and the method table maps the sequence numbers of the
captured method requests to their methods, so method responses decode their output
arguments.  Allowed outcomes: success, :class:`~qmf_async.DecodeError` from
decoding, :class:`~qmf_async.EncodeError` from re-encoding.  What decodes and
re-encodes must decode to equal values, and its canonical bytes are a fixed point.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from qmf_async import wire
from qmf_async.errors import DecodeError, EncodeError
from qmf_async.wire import (
    MethodRequest,
    RawObjectRecord,
    SchemaClass,
    SchemaMethod,
    SchemaRegistry,
    UndecodedTail,
)

NAME = "v1"
SCHEMAS_FILE = Path(__file__).with_name("data") / "qpidd-schemas.bin"


def _base() -> tuple[SchemaRegistry, dict[int, tuple[SchemaClass, SchemaMethod]]]:
    registry = SchemaRegistry()
    data = SCHEMAS_FILE.read_bytes()
    registry.learn(wire.decode(data, SchemaRegistry(), defer_unknown=True))
    methods: dict[int, tuple[SchemaClass, SchemaMethod]] = {}
    for msg in wire.decode(data, registry):
        if isinstance(msg, MethodRequest):
            schema = registry.get(msg.class_key)
            known = {m.name: m for m in schema.methods} if schema is not None else {}
            # (one captured request names a method that its class does not have)
            if schema is not None and msg.method in known:
                methods[msg.seq] = (schema, known[msg.method])
    return registry, methods


BASE, METHODS = _base()


def _same(a: Any, b: Any) -> bool:
    """Equality that takes NaN as equal to NaN (floats from arbitrary bytes)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if hasattr(a, "__attrs_attrs__") and type(a) is type(b):
        return all(_same(getattr(a, f.name), getattr(b, f.name)) for f in a.__attrs_attrs__)
    return bool(a == b)


def _read_lazy(record: RawObjectRecord) -> Any:
    """Every value of a lazy record, as the console reads them."""
    _ = (record.object_id, record.timestamps, record.is_deleted())
    if record.has_properties:
        record.properties_dict()
    if record.has_statistics:
        record.statistics_dict()
    return record.to_record()


def one_input(data: bytes) -> None:
    """Decode and re-encode one input; raises only DecodeError and EncodeError
    (caught here) -- anything else, or a failed check, escapes.

    Raises:
        AssertionError: what decoded re-encodes to bytes that decode to other values.
    """
    if len(data) < 2:
        return
    mode, body = data[0], data[1:]
    lazy, defer, learn = bool(mode & 1), bool(mode & 2), bool(mode & 4)
    registry = BASE
    try:
        if learn:
            registry = SchemaRegistry(BASE)
            registry.learn(wire.decode(body, BASE, defer_unknown=True))
        msgs = wire.decode(body, registry, methods=METHODS, defer_unknown=defer, lazy=lazy)
        assert isinstance(msgs, list) and msgs, "a decode gives at least one message"
        msgs = [_read_lazy(m) if isinstance(m, RawObjectRecord) else m for m in msgs]
    except DecodeError as exc:
        assert isinstance(exc.offset, int)
        return
    _check_reencode(body, msgs, registry)


def _check_reencode(body: bytes, msgs: list[Any], registry: SchemaRegistry) -> None:
    if any(isinstance(m, UndecodedTail) for m in msgs):
        return
    try:
        again = wire.encode(msgs, registry, methods=METHODS)
    except EncodeError:
        return
    if again == body:
        return
    # Not byte-exact where the input was not canonical (a boolean byte other than 0/1,
    # unused presence bits, a quieted NaN, a schema map written the qpidd way): the
    # values must survive, and the canonical bytes are a fixed point.
    redecoded = wire.decode(again, registry, methods=METHODS)
    assert _same(redecoded, msgs), f"re-encode changed the values of {body.hex()}"
    assert wire.encode(redecoded, registry, methods=METHODS) == again, (
        f"canonical bytes of {body.hex()} are not a fixed point")


def seeds() -> list[bytes]:
    """Seed inputs: each captured qpidd body under the console's mode (3) and the
    agent's (0), and the schema bodies under the learning mode (7)."""
    from tests._captures import load_records

    out: list[bytes] = []
    for rec in load_records():
        body = rec["_body"]
        out.append(b"\x03" + body)
        out.append(b"\x00" + body)
    out.append(b"\x07" + SCHEMAS_FILE.read_bytes())
    return out
