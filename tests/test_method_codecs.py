"""The cached pieces of a method call: the ``M``/``m`` writers and the ``M`` decoder's
lookup by class-key and name bytes (same bytes, values and errors as ``wire.encode`` /
``wire.decode``), and the per-schema method attributes of console proxies with their
compiled argument binders (same checks and errors as ``bind_arguments``)."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from qmf_async import (
    ArgumentError,
    ClassKey,
    ClassKind,
    DecodeError,
    EncodeError,
    ObjectId,
    QmfObject,
    QmfType,
    SchemaArgument,
    SchemaClass,
    SchemaMethod,
    SchemaProperty,
    wire,
)
from qmf_async.console._objects import _BoundMethod, bind_arguments
from qmf_async.console._session import Session
from qmf_async.wire._codec import SchemaRegistry
from qmf_async.wire._messages import MethodRequest, MethodResponse
from tests.fake_transport import FakeBus, object_schema

KEY = ClassKey("test.pkg", "thing", bytes(range(16)))
OID = ObjectId.make(sequence=1, broker_bank=1, agent_bank=2, object=3)
THING = SchemaClass(
    ClassKind.OBJECT, KEY,
    properties=[SchemaProperty("name", QmfType.SSTR, index=True),
                SchemaProperty("size", QmfType.UINT32),
                SchemaProperty("clash", QmfType.UINT8)],
    methods=[
        SchemaMethod("echo", [SchemaArgument("sequence", QmfType.UINT32, direction="IO"),
                              SchemaArgument("body", QmfType.LSTR, direction="IO")]),
        SchemaMethod("put", [SchemaArgument("n", QmfType.INT8, direction="I", min=-5, max=5),
                             SchemaArgument("tag", QmfType.SSTR, direction="I", maxlen=4),
                             SchemaArgument("flag", QmfType.BOOL, direction="I"),
                             SchemaArgument("opts", QmfType.MAP, direction="I"),
                             SchemaArgument("count", QmfType.UINT16, direction="I",
                                         default="7"),
                             SchemaArgument("done", QmfType.UINT64, direction="O")]),
        SchemaMethod("clash", [SchemaArgument("x", QmfType.UINT8, direction="I")]),
        SchemaMethod("update", [SchemaArgument("x", QmfType.UINT8, direction="I")]),
        SchemaMethod("noargs"),
    ],
)
ECHO, PUT = THING.method("echo"), THING.method("put")


# --------------------------------------------------------------------------- writers


@pytest.mark.parametrize("method, args", [
    ("echo", {"sequence": 7, "body": "héllo"}),
    ("echo", {"body": "order does not matter", "sequence": 0xFFFFFFFF}),
    ("put", {"n": -5, "tag": "ab", "flag": True, "opts": {"a": 1}, "count": 3}),
    ("noargs", {}),
])
def test_request_writer_writes_what_encode_writes(method: str, args: dict[str, Any]) -> None:
    reg = SchemaRegistry([THING])
    write = reg.request_writer(KEY, method)
    assert write is reg.request_writer(KEY, method)  # cached
    for seq in (0, 1, 0xFFFFFFFF):
        assert write(seq, OID.raw, args) == wire.encode(
            MethodRequest(seq, OID, KEY, method, args), reg)


@pytest.mark.parametrize("args", [
    {"sequence": 1},                                # missing
    {"sequence": 1, "body": "x", "extra": 2},       # unknown
    {"sequence": 1, "other": "x"},                  # unknown in place of a missing one
    {"sequence": 1 << 32, "body": "x"},             # does not fit
    {"sequence": -1, "body": "x"},
    {"sequence": 1, "body": "\ud800"},              # not encodable
])
def test_request_writer_fails_as_encode_does(args: dict[str, Any]) -> None:
    reg = SchemaRegistry([THING])
    with pytest.raises(EncodeError) as expected:
        wire.encode(MethodRequest(5, OID, KEY, "echo", args), reg)
    with pytest.raises(EncodeError) as got:
        reg.request_writer(KEY, "echo")(5, OID.raw, args)
    assert str(got.value) == str(expected.value)


def test_request_writer_errors_for_unknown_classes_methods_and_sequence_numbers() -> None:
    reg = SchemaRegistry([THING])
    for k, name in ((ClassKey("test.pkg", "other", bytes(16)), "echo"), (KEY, "nosuch")):
        with pytest.raises(EncodeError) as expected:
            wire.encode(MethodRequest(5, OID, k, name, {}), reg)
        with pytest.raises(EncodeError) as got:
            reg.request_writer(k, name)
        assert str(got.value) == str(expected.value)
    write = reg.request_writer(KEY, "noargs")
    for seq in (-1, 1 << 32):
        with pytest.raises(EncodeError, match="is not a uint32"):
            write(seq, OID.raw, {})


def test_response_writer_writes_what_encode_writes_and_fails_alike() -> None:
    reg = SchemaRegistry([THING])
    write = reg.codec(THING).response_writer(ECHO)
    assert write is reg.codec(THING).response_writer(ECHO)
    out = {"sequence": 9, "body": "b"}
    for target in ((THING, ECHO), ECHO):
        assert write(9, out) == wire.encode(MethodResponse(9, 0, "OK", out), reg,
                                            methods={9: target})
    for bad in ({"sequence": 9}, {**out, "x": 1}, {"sequence": "9", "body": "b"}):
        with pytest.raises(EncodeError) as expected:
            wire.encode(MethodResponse(9, 0, "OK", bad), reg, methods={9: (THING, ECHO)})
        with pytest.raises(EncodeError) as got:
            write(9, bad)
        assert str(got.value) == str(expected.value)


# --------------------------------------------------------------------------- M decoding


def test_requests_decode_alike_on_first_and_later_lookups() -> None:
    reg = SchemaRegistry([THING])
    reqs = [MethodRequest(1, OID, KEY, "echo", {"sequence": 1, "body": "a"}),
            MethodRequest(2, OID, KEY, "put", {"n": 1, "tag": "t", "flag": False,
                                               "opts": {}, "count": 2}),
            MethodRequest(3, OID, KEY, "noargs", {})]
    body = wire.encode(reqs, reg)
    for _ in range(3):  # the first decode fills the caches, the later ones use them
        assert wire.decode(body, reg) == reqs
    for msg in wire.decode(body, reg):
        assert msg.class_key is reg.codec(KEY).class_key


def test_unknown_methods_and_bad_arguments_stay_raw_and_known_names_stay_valid() -> None:
    reg = SchemaRegistry([THING])
    unknown = MethodRequest(4, OID, KEY, "nosuch", None, b"\x01\x02")
    truncated = MethodRequest(5, OID, KEY, "echo", None, b"\x00\x00")
    for _ in range(2):
        assert wire.decode(wire.encode(unknown), reg) == [unknown]
        assert wire.decode(wire.encode(truncated), reg) == [truncated]
    # a name that is not UTF-8 fails every time, and is not remembered
    bad = (b"AM2M" + struct.pack(">I", 6) + OID.raw + KEY.to_wire() + b"\x02\xff\xfe")
    for _ in range(2):
        with pytest.raises(DecodeError, match="UTF-8"):
            wire.decode(bad, reg)
    assert b"\xff\xfe" not in reg.codec(KEY)._requests


@pytest.mark.parametrize("cut", range(8, 8 + 16 + 40 + 6))
def test_truncated_requests_fail_as_before(cut: int) -> None:
    """Cut anywhere in the object id, class key or name: a DecodeError, never another
    error, and the same one the field-by-field reader gives (empty registry)."""
    body = wire.encode(MethodRequest(1, OID, KEY, "echo", {"sequence": 1, "body": "a"}),
                       SchemaRegistry([THING]))
    name_end = 8 + 16 + len(KEY.to_wire()) + 5
    if cut >= name_end:
        return  # the arguments: covered by the test above
    with pytest.raises(DecodeError) as expected:
        wire.decode(body[:cut], SchemaRegistry())
    with pytest.raises(DecodeError) as got:
        wire.decode(body[:cut], SchemaRegistry([THING]))
    assert str(got.value) == str(expected.value)


def test_status_text_fast_path_matches_the_general_one() -> None:
    reg = SchemaRegistry([THING])
    for resp in (MethodResponse(1, 0, "OK", {"sequence": 1, "body": "x"}),
                 MethodResponse(2, 0, "OKAY", {"sequence": 1, "body": "x"}),
                 MethodResponse(3, 7, "OK"), MethodResponse(4, 2, "OK", short_text=True)):
        methods = {resp.seq: (THING, ECHO)}
        assert wire.decode(wire.encode(resp, reg, methods=methods), reg,
                           methods=methods) == [resp]


# --------------------------------------------------------------------------- proxies


@pytest.fixture
async def thing() -> Any:
    bus = FakeBus()
    agent = bus.add_agent(1, 2, schemas=[THING])
    agent.add_object(THING, {"name": "t", "size": 1, "clash": 5})
    agent.methods["echo"] = lambda obj, args: dict(args)
    agent.methods["put"] = lambda obj, args: {"done": args["count"]}
    session = Session(_transport_factory=bus.factory, broker_timeout=0.05, timeout=5.0)
    await session.add_broker("amqp://guest:guest@fake:5672/")
    agent.heartbeat()
    (obj,) = await session.get_objects(_class="thing")
    yield obj, bus
    await session.close()


async def test_methods_are_attributes_of_the_proxy_class(thing: Any) -> None:
    obj, bus = thing
    assert isinstance(obj.echo, _BoundMethod) and "echo" in type(obj).__dict__
    assert repr(obj.echo) == "<method echo(sequence: uint32, body: lstr)>"
    assert (await obj.echo(5, "x")).out_args == {"sequence": 5, "body": "x"}
    assert (await obj.echo(body="y", sequence=6)).sequence == 6
    assert (await obj.put(1, "t", True, {})).done == 7  # the schema default
    assert (await obj.invoke("echo", 8, "z")).body == "z"
    # a property hides a method of its name; QmfObject's own names stay QmfObject's
    assert obj.clash == 5
    assert obj.update.__func__ is QmfObject.update
    assert "update" not in type(obj).__dict__ and "clash" in type(obj).__dict__
    sent = [m for p in bus.published for m in p.messages if m.OPCODE == "M"]
    assert [m.arguments for m in sent][:2] == [{"sequence": 5, "body": "x"},
                                               {"sequence": 6, "body": "y"}]


@pytest.mark.parametrize("args, kwargs", [
    # every argument by position: the compiled checks
    ((1, "t", True, {}, 3), {}),
    ((5, "tagz", False, {"a": 1}, 0xFFFF), {}),
    ((6, "t", True, {}, 3), {}),             # above the schema max
    ((-6, "t", True, {}, 3), {}),            # below the schema min
    ((1 << 70, "t", True, {}, 3), {}),       # far out of range
    ((True, "t", True, {}, 3), {}),          # bool is not an int
    ((1.0, "t", True, {}, 3), {}),           # float is not an int
    ((1, "toolong", True, {}, 3), {}),       # longer than maxlen
    ((1, "ééé", True, {}, 3), {}),           # 3 characters, 6 bytes
    ((1, "é", True, {}, 3), {}),             # 1 character, 2 bytes
    ((1, 5, True, {}, 3), {}),               # not a str
    ((1, "t", 1, {}, 3), {}),                # not a bool
    ((1, "t", True, [], 3), {}),             # not a mapping
    ((1, "t", True, {}, 1 << 16), {}),       # uint16 out of range
    ((1, "t", True, {}, -1), {}),
    # anything else: bind_arguments itself
    ((1, "t", True, {}, 3, 4), {}),          # too many
    ((1, "t", True), {}),                    # opts and count left to their defaults
    ((1, "t"), {"flag": False}),
    ((1, "t", True, {}), {"nope": 1}),
    ((1, "t", True, {}), {"n": 2}),          # twice
    ((), {"n": 1, "tag": "t", "flag": True, "opts": {}, "count": 1 << 16}),
])
def test_the_compiled_binder_checks_as_bind_arguments(thing: Any, args: tuple[Any, ...],
                                                      kwargs: dict[str, Any]) -> None:
    obj, _ = thing
    bind = type(obj).__dict__["put"].bind
    try:
        expected: Any = bind_arguments(PUT, args, kwargs)
    except ArgumentError as exc:
        with pytest.raises(ArgumentError) as got:
            bind(args, kwargs)
        assert str(got.value) == str(exc)
    else:
        assert bind(args, kwargs) == expected


async def test_bad_arguments_raise_on_await_before_anything_is_sent(thing: Any) -> None:
    obj, bus = thing
    sent = len(bus.published)
    call = obj.echo(1 << 32, "x")  # nothing raised until awaited, as before
    with pytest.raises(ArgumentError):
        await call
    assert len(bus.published) == sent


def test_proxies_of_one_schema_share_one_class_and_the_table_is_bounded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from qmf_async.console import _objects

    schema = object_schema("test.proxy", "widget",
                           properties=[SchemaProperty("name", QmfType.SSTR, index=True)])
    oid = ObjectId.make(sequence=1, broker_bank=1, agent_bank=2, object=3)
    a = QmfObject(None, None, None, schema, oid, ("a",), None, (1, 1, 0))
    b = QmfObject(None, None, None, schema, oid, ("b",), None, (1, 1, 0))
    assert type(a) is type(b) and type(a) is not QmfObject and b.name == "b"
    # the console keeps the classes itself (the wire's codec has no slot for them),
    # a table per session, at most _MAX_PROXY_CLASSES in each
    monkeypatch.setattr(_objects, "_MAX_PROXY_CLASSES", 1)
    other = object_schema("test.proxy", "gadget",
                          properties=[SchemaProperty("name", QmfType.SSTR, index=True)])
    QmfObject(None, None, None, other, oid, ("c",), None, (1, 1, 0))
    assert len(_objects._UNBOUND) == 1
    one, two = Session(), Session()
    c = QmfObject(one, None, None, schema, oid, ("c",), None, (1, 1, 0))
    d = QmfObject(two, None, None, schema, oid, ("d",), None, (1, 1, 0))
    assert type(c) is not type(d)  # not shared across sessions (no process-wide cache)
    assert len(one.proxy_classes) == 1 and len(two.proxy_classes) == 1
