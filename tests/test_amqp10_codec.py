"""The AMQP 1.0 codec against python-qpid-proton's own codec, in both directions.

Values: our ``encode_amqp10_value`` decoded by ``proton.Data`` gives the proton value,
and ``proton.Data`` encodings decoded by ``decode_amqp10_value`` give ours (types
compared too: a symbol is not a string, a ubyte is not a long).  Messages: our
``encode_amqp10_message`` read by ``proton.Message`` and the other way round.  Malformed
input only ever raises DecodeError, in bounded time and memory.
"""

from __future__ import annotations

import math
import struct
import time
import tracemalloc
from typing import Any

import pytest

from .conftest import PROTON_PEER_REASON

pytest.importorskip("proton", reason=PROTON_PEER_REASON)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proton import (
    UNDESCRIBED,
    Array,
    Data,
    Message,
    byte,
    char,
    float32,
    int32,
    short,
    symbol,
    timestamp,
    ubyte,
    uint,
    ulong,
    ushort,
)
from proton import Described as PnDescribed

from qmf_async.errors import DecodeError, EncodeError
from qmf_async.wire import (
    Amqp10Message,
    Described,
    Symbol,
    Timestamp,
    Typed10,
    decode_amqp10_message,
    decode_amqp10_value,
    encode_amqp10_message,
    encode_amqp10_value,
)

# the recursive strategies have long reprs; hypothesis warns when it builds one
pytestmark = [pytest.mark.proton_peer,
              pytest.mark.filterwarnings("ignore:Generating overly large repr")]

FAST = settings(max_examples=100, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SLOW = settings(max_examples=3000, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

#: a value that our encoder has no way to produce (proton arrays)
NOENC = object()

# ------------------------------------------------------------------ strategies
# every strategy draws a triple: (what we encode, what proton puts/gets, what we decode)

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=300)
ASCII = st.text(st.characters(min_codepoint=0, max_codepoint=127), max_size=300)
LONGS = st.integers(-(1 << 63), (1 << 63) - 1)


def _same(triple: Any) -> tuple[Any, Any, Any]:
    return (triple, triple, triple)


def _typed(name: str, pn: Any, lo: int, hi: int) -> st.SearchStrategy[tuple[Any, Any, Any]]:
    return st.integers(lo, hi).map(lambda n: (Typed10(name, n), pn(n), n))


SCALARS: st.SearchStrategy[tuple[Any, Any, Any]] = st.one_of(
    st.none().map(_same),
    st.booleans().map(_same),
    _typed("ubyte", ubyte, 0, 255),
    _typed("ushort", ushort, 0, 0xFFFF),
    _typed("uint", uint, 0, 0xFFFF_FFFF),
    _typed("ulong", ulong, 0, (1 << 64) - 1),
    _typed("byte", byte, -128, 127),
    _typed("short", short, -(1 << 15), (1 << 15) - 1),
    _typed("int", int32, -(1 << 31), (1 << 31) - 1),
    _typed("long", int, -(1 << 63), (1 << 63) - 1),
    LONGS.map(_same),  # a plain int is a long
    st.floats(width=32).map(lambda f: (Typed10("float", f), float32(f), f)),
    st.floats().map(_same),
    LONGS.map(lambda n: (Timestamp(n), timestamp(n), Timestamp(n))),
    st.uuids().map(_same),
    st.binary(max_size=300).map(_same),
    TEXT.map(_same),
    ASCII.map(lambda s: (Symbol(s), symbol(s), Symbol(s))),
    st.characters(blacklist_categories=("Cs",)).map(lambda c: (Typed10("char", c), char(c), c)),
)

KEYS: st.SearchStrategy[tuple[Any, Any, Any]] = st.one_of(
    TEXT.map(_same),
    ASCII.map(lambda s: (Symbol(s), symbol(s), Symbol(s))),
    LONGS.map(_same),
    _typed("ulong", ulong, 0, (1 << 64) - 1),
)


def _key_identity(triple: tuple[Any, Any, Any]) -> tuple[str, Any]:
    key = triple[2]  # symbols equal strings in Python: one key per text
    return ("s", str(key)) if isinstance(key, str) else ("i", int(key))


DESCRIPTORS: st.SearchStrategy[tuple[Any, Any, Any]] = st.one_of(
    st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=40).map(
        lambda s: (Symbol(s), symbol(s), Symbol(s))),
    st.integers(0, (1 << 64) - 1).map(lambda n: (n, ulong(n), n)),
)


def _list(items: list[tuple[Any, Any, Any]]) -> tuple[Any, Any, Any]:
    return ([i[0] for i in items], [i[1] for i in items], [i[2] for i in items])


def _map(pairs: list[tuple[tuple[Any, Any, Any], tuple[Any, Any, Any]]]) -> tuple[Any, Any, Any]:
    return ({k[0]: v[0] for k, v in pairs}, {k[1]: v[1] for k, v in pairs},
            {k[2]: v[2] for k, v in pairs})


def _described(d: tuple[Any, Any, Any], v: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
    return (Described(d[0], v[0]), PnDescribed(d[1], v[1]), Described(d[2], v[2]))


def _compounds(children: st.SearchStrategy[tuple[Any, Any, Any]],
               ) -> st.SearchStrategy[tuple[Any, Any, Any]]:
    return st.one_of(
        st.lists(children, max_size=6).map(_list),
        st.lists(st.tuples(KEYS, children), max_size=6,
                 unique_by=lambda kv: _key_identity(kv[0])).map(_map),
        # proton's Data loses the items after a described value whose value is
        # described (test_nested_described checks those against proton's bytes)
        st.tuples(DESCRIPTORS, children).filter(
            lambda dv: not isinstance(dv[1][0], Described)).map(lambda dv: _described(*dv)),
    )


VALUES = st.recursive(SCALARS, _compounds, max_leaves=25)

# arrays (proton -> ours only): element type, proton type code, element strategy
ARRAY_KINDS = [
    (Data.INT, st.integers(-(1 << 31), (1 << 31) - 1).map(int32), int),
    (Data.ULONG, st.integers(0, (1 << 64) - 1).map(ulong), int),
    (Data.LONG, LONGS, int),
    (Data.UBYTE, st.integers(0, 255).map(ubyte), int),
    (Data.BOOL, st.booleans(), bool),
    (Data.DOUBLE, st.floats(), float),
    (Data.STRING, TEXT, str),
    (Data.SYMBOL, ASCII.map(symbol), Symbol),
    (Data.BINARY, st.binary(max_size=40), bytes),
    (Data.TIMESTAMP, LONGS.map(timestamp), Timestamp),
    (Data.NULL, st.none(), lambda _: None),
]


@st.composite
def arrays(draw: st.DrawFn) -> tuple[Any, Any, Any]:
    code, elements, ours = draw(st.sampled_from(ARRAY_KINDS))
    # arrays of a zero-width type (null) are capped at 64 items by the decoder
    items = draw(st.lists(elements, max_size=64 if code == Data.NULL else 300))
    described = draw(st.none() | DESCRIPTORS)
    decoded: list[Any] = [ours(i) for i in items]
    if described is None:
        return (NOENC, Array(UNDESCRIBED, code, *items), decoded)
    return (NOENC, Array(described[1], code, *items),
            [Described(described[2], v) for v in decoded])


DECODABLE = st.recursive(SCALARS | arrays(), _compounds, max_leaves=25)

# ------------------------------------------------------------------ comparison


def same(got: Any, want: Any) -> bool:
    """Equal values of the same types, all the way down (NaN equals NaN, -0.0 is not 0.0)."""
    if type(got) is not type(want):
        return False
    if isinstance(got, float):
        return struct.pack(">d", got) == struct.pack(">d", want) or (
            math.isnan(got) and math.isnan(want))
    if isinstance(got, list):
        return len(got) == len(want) and all(same(a, b) for a, b in zip(got, want, strict=True))
    if isinstance(got, dict):
        return len(got) == len(want) and all(
            same(ka, kb) and same(va, vb)
            for (ka, va), (kb, vb) in zip(got.items(), want.items(), strict=True))
    if isinstance(got, (Described, PnDescribed)):
        return same(got.descriptor, want.descriptor) and same(got.value, want.value)
    return bool(got == want)


def proton_decode(raw: bytes) -> Any:
    """One value decoded by proton's C decoder, read node by node (``Data.get_object``
    loses items after a described value whose value is described)."""
    data = Data()
    consumed = data.decode(raw)
    assert consumed == len(raw), f"proton read {consumed} of {len(raw)} bytes"
    data.rewind()
    assert data.next() is not None
    return _walk(data)


def _walk(data: Data) -> Any:
    kind = data.type()
    if kind == Data.DESCRIBED:
        data.enter()
        data.next()
        descriptor = _walk(data)
        data.next()
        value = _walk(data)
        data.exit()
        return PnDescribed(descriptor, value)
    if kind in (Data.LIST, Data.MAP):
        count = data.get_list() if kind == Data.LIST else data.get_map()
        data.enter()
        items = []
        for _ in range(count):
            data.next()
            items.append(_walk(data))
        data.exit()
        if kind == Data.LIST:
            return items
        return {items[i]: items[i + 1] for i in range(0, count, 2)}
    value = data.get_object()
    return bytes(value) if isinstance(value, memoryview) else value


def plain(value: Any) -> Any:
    """``value`` with proton's memoryviews (binary it hands out) turned into bytes."""
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, PnDescribed):
        return PnDescribed(plain(value.descriptor), plain(value.value))
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    return value


def proton_encode(value: Any) -> bytes:
    data = Data()
    data.put_object(value)
    return bytes(data.encode())


def test_same_tells_types_apart() -> None:
    assert not same(Symbol("a"), "a")
    assert not same(Timestamp(1), 1)
    assert not same(ubyte(1), 1)
    assert not same(True, 1)
    assert not same(0.0, -0.0)
    assert same(float("nan"), float("nan"))
    assert not same({"a": 1, "b": 2}, {"b": 2, "a": 1})
    assert same([Described(Symbol("x"), [1])], [Described(Symbol("x"), [1])])


# ------------------------------------------------------------------ values


@FAST
@given(VALUES)
def test_our_encoding_decodes_in_proton(triple: tuple[Any, Any, Any]) -> None:
    ours, theirs, _ = triple
    got = proton_decode(encode_amqp10_value(ours))
    assert same(got, theirs), (got, theirs)


@FAST
@given(DECODABLE)
def test_proton_encoding_decodes_here(triple: tuple[Any, Any, Any]) -> None:
    _, theirs, decoded = triple
    raw = proton_encode(theirs)
    got, end = decode_amqp10_value(raw)
    assert end == len(raw)
    assert same(got, decoded), (got, decoded)


@FAST
@given(VALUES)
def test_our_round_trip(triple: tuple[Any, Any, Any]) -> None:
    ours, _, decoded = triple
    raw = encode_amqp10_value(ours)
    got, end = decode_amqp10_value(raw + b"\x40", 0)  # a trailing value is left alone
    assert end == len(raw)
    assert same(got, decoded)


@pytest.mark.slow
@SLOW
@given(DECODABLE)
def test_proton_encoding_decodes_here_many(triple: tuple[Any, Any, Any]) -> None:
    test_proton_encoding_decodes_here.hypothesis.inner_test(triple)  # type: ignore[attr-defined]


@pytest.mark.slow
@SLOW
@given(VALUES)
def test_our_encoding_decodes_in_proton_many(triple: tuple[Any, Any, Any]) -> None:
    test_our_encoding_decodes_in_proton.hypothesis.inner_test(triple)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("value", "encoded"), [
    (None, "40"), (True, "41"), (False, "42"), (0, "5500"), (-1, "55ff"),
    (1 << 40, "810000010000000000"), ((1 << 64) - 1, "80ffffffffffffffff"),
    (Typed10("uint", 0), "43"), (Typed10("uint", 7), "5207"), (Typed10("ulong", 0), "44"),
    (Typed10("ulong", 300), "80000000000000012c"), (Typed10("int", -2), "54fe"),
    ([], "45"), ({}, "c10100"), ("", "a100"), (Symbol("ab"), "a3026162"),
    (b"x" * 256, "b000000100" + "78" * 256),
    (Described(0x77, None), "00537740"), (Described(Symbol("s"), 1), "00a301735501"),
])
def test_smallest_encodings(value: Any, encoded: str) -> None:
    assert encode_amqp10_value(value).hex() == encoded


def test_nested_described_matches_protons_bytes() -> None:
    ours = [Described(Symbol("a"), Described(0x10, Described(Symbol("b"), None))), 5]
    theirs = [PnDescribed(symbol("a"), PnDescribed(ulong(0x10),
                                                   PnDescribed(symbol("b"), None))), 5]
    raw = encode_amqp10_value(ours)
    assert decode_amqp10_value(raw) == (ours, len(raw))
    assert same(decode_amqp10_value(proton_encode(theirs))[0], ours)
    # the same bytes as proton's for the described part (the list forms differ)
    assert encode_amqp10_value(ours[0]) == proton_encode(theirs[0])


def test_large_compounds_use_32_bit_forms() -> None:
    items = list(range(300))
    raw = encode_amqp10_value(items)
    assert raw[0] == 0xD0
    assert proton_decode(raw) == items
    big = {f"k{i}": "v" * 3 for i in range(100)}
    raw = encode_amqp10_value(big)
    assert raw[0] == 0xD1
    assert proton_decode(raw) == big


def test_described_int_descriptor_is_a_ulong_proton_understands() -> None:
    section = encode_amqp10_value(Described(0x77, "hello"))
    msg = Message()
    msg.decode(section)
    assert msg.body == "hello"
    assert type(proton_decode(section).descriptor) is ulong


@pytest.mark.parametrize("value", [
    object(), Typed10("ubyte", 256), Typed10("uint", -1), Typed10("byte", 128),
    Typed10("float", 1e300), Typed10("char", "ab"), Typed10("decimal", 1),
    Symbol("é"), 1 << 64, -(1 << 63) - 1, {1.5j: 1},
])
def test_unencodable_values_raise_encode_error(value: Any) -> None:
    with pytest.raises(EncodeError):
        encode_amqp10_value(value)


def test_nesting_beyond_the_limit_is_an_encode_error() -> None:
    value: list[Any] = []
    for _ in range(100):
        value = [value]
    with pytest.raises(EncodeError, match="nested"):
        encode_amqp10_value(value)
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(EncodeError):
        encode_amqp10_value(looped)


# ------------------------------------------------------------------ messages

IDS = st.one_of(st.none(), st.integers(0, (1 << 64) - 1).map(ulong), st.uuids(),
                st.binary(max_size=20), st.text(max_size=20))
# proton's Message reads its text fields as C strings: no NUL characters there
OPT_TEXT = st.none() | st.text(st.characters(blacklist_categories=("Cs",),
                                             blacklist_characters="\x00"), max_size=40)
SYMBOL_TEXT = st.text(st.characters(min_codepoint=1, max_codepoint=127), max_size=40)
APP_VALUES = st.one_of(st.none(), st.booleans(), LONGS, st.floats(allow_nan=False),
                       st.text(max_size=20), st.binary(max_size=20))


def _pn_id(value: Any) -> Any:
    """What ``proton.Message`` gives for an id: a ulong id comes back a plain int."""
    return int(value) if isinstance(value, ulong) else value


def _our_id(value: Any) -> Any:
    return Typed10("ulong", int(value)) if isinstance(value, ulong) else value


def _decoded_id(value: Any) -> Any:
    return int(value) if isinstance(value, ulong) else value


@FAST
@given(body=st.binary(max_size=2000), subject=OPT_TEXT, reply_to=OPT_TEXT,
       content_type=st.none() | SYMBOL_TEXT, correlation_id=IDS, message_id=IDS,
       user_id=st.none() | st.binary(max_size=20), to=OPT_TEXT,
       props=st.dictionaries(st.text(max_size=10), APP_VALUES, max_size=5))
def test_our_message_reads_in_proton(body: bytes, subject: str | None, reply_to: str | None,
                                     content_type: str | None, correlation_id: Any,
                                     message_id: Any, user_id: bytes | None, to: str | None,
                                     props: dict[str, Any]) -> None:
    raw = encode_amqp10_message(
        body, subject=subject, reply_to=reply_to, content_type=content_type,
        correlation_id=_our_id(correlation_id), message_id=_our_id(message_id),
        user_id=user_id, to=to, application_properties=props)
    msg = Message()
    msg.decode(raw)
    assert bytes(msg.body) == body
    assert msg.subject == subject
    assert msg.reply_to == reply_to
    assert msg.address == to
    # proton gives symbol("None") for an absent content type
    assert msg.content_type == (content_type if content_type is not None else "None")
    assert same(plain(msg.correlation_id), _pn_id(correlation_id))
    assert same(plain(msg.id), _pn_id(message_id))
    assert (msg.user_id or None) == user_id or msg.user_id == user_id
    assert plain(msg.properties or {}) == props


@FAST
@given(body=st.binary(max_size=2000), subject=OPT_TEXT, reply_to=OPT_TEXT,
       content_type=st.none() | SYMBOL_TEXT.filter(bool), correlation_id=IDS, message_id=IDS,
       user_id=st.none() | st.binary(min_size=1, max_size=20), to=OPT_TEXT,
       props=st.dictionaries(st.text(max_size=10), APP_VALUES, max_size=5),
       durable=st.booleans(), ttl=st.integers(0, 10**5),
       annotations=st.dictionaries(ASCII.map(symbol), APP_VALUES, max_size=3))
def test_proton_message_reads_here(body: bytes, subject: str | None, reply_to: str | None,
                                   content_type: str | None, correlation_id: Any,
                                   message_id: Any, user_id: bytes | None, to: str | None,
                                   props: dict[str, Any], durable: bool, ttl: int,
                                   annotations: dict[Any, Any]) -> None:
    msg = Message(subject=subject, reply_to=reply_to, content_type=content_type,
                  correlation_id=correlation_id, id=message_id, address=to,
                  properties=props or None, durable=durable, ttl=ttl,
                  annotations=annotations or None, instructions=annotations or None)
    if user_id is not None:
        msg.user_id = user_id
    msg.inferred = True
    msg.body = body
    raw = bytes(msg.encode()) + b"\x00\x53\x78" + encode_amqp10_value({Symbol("f"): 1})
    got = decode_amqp10_message(raw)
    assert got.body_kind == "data"
    assert got.body == body
    assert got.subject == subject
    assert got.reply_to == reply_to
    assert got.to == to
    assert got.content_type == content_type
    assert same(got.correlation_id, _decoded_id(correlation_id))
    assert same(got.message_id, _decoded_id(message_id))
    assert got.user_id == user_id
    assert got.application_properties == props
    assert got.durable is durable
    assert (got.ttl or 0) == ttl * 1000  # seconds in proton, milliseconds on the wire


@FAST
@given(VALUES)
def test_amqp_value_bodies_both_ways(triple: tuple[Any, Any, Any]) -> None:
    ours, theirs, decoded = triple
    msg = Message()
    msg.decode(encode_amqp10_message(ours, body_kind="value"))
    assert same(plain(msg.body), theirs)
    back = decode_amqp10_message(bytes(Message(body=theirs).encode()))
    if theirs is None:  # proton leaves a null body out
        assert back.body_kind == "none"
    else:
        assert back.body_kind == "value"
    assert same(back.body, decoded)


def test_data_sections_are_concatenated() -> None:
    prefix = bytes(Message(subject="s").encode())  # no body section: body is None
    assert b"\x00\x53\x75" not in prefix and b"\x00\x53\x77" not in prefix
    raw = prefix + b"".join(b"\x00\x53\x75" + encode_amqp10_value(part)
                            for part in (b"one ", b"", b"x" * 300, b" end"))
    msg = decode_amqp10_message(raw)
    assert (msg.body_kind, msg.subject) == ("data", "s")
    assert msg.body == b"one " + b"x" * 300 + b" end"


def test_symbolic_section_descriptors_and_sequences() -> None:
    raw = (b"\x00" + encode_amqp10_value(Symbol("amqp:properties:list"))
           + encode_amqp10_value([None, None, None, "subj"])
           + b"\x00" + encode_amqp10_value(Symbol("amqp:amqp-sequence:list"))
           + encode_amqp10_value([1, 2])
           + b"\x00\x53\x76" + encode_amqp10_value(["three"]))
    msg = decode_amqp10_message(raw)
    assert (msg.subject, msg.body_kind, msg.body) == ("subj", "sequence", [1, 2, "three"])


def test_empty_message_and_defaults() -> None:
    assert decode_amqp10_message(b"") == Amqp10Message()
    raw = encode_amqp10_message(b"")
    assert raw == b"\x00\x53\x75\xa0\x00"
    assert decode_amqp10_message(raw).body == b""


@pytest.mark.parametrize(("raw", "what"), [
    (b"\x40", "section expected"),
    (b"\x00\x53\x79\x40", "unknown AMQP 1.0 message section"),
    (b"\x00\x53\x75\xa1\x00", "data section"),
    (b"\x00\x53\x73\x55\x01", "properties section is not a list"),
    (b"\x00\x53\x73" + encode_amqp10_value([None, "text"]), "user-id"),
    (b"\x00\x53\x73" + encode_amqp10_value([None, None, None, 5]), "subject"),
    (b"\x00\x53\x74" + encode_amqp10_value([1]), "application-properties"),
    (b"\x00\x53\x76\x40", "amqp-sequence"),
])
def test_malformed_sections(raw: bytes, what: str) -> None:
    with pytest.raises(DecodeError, match=what):
        decode_amqp10_message(raw)


@pytest.mark.parametrize("kind", ["sequence", "none", 1])
def test_bad_body_kind_or_body(kind: Any) -> None:
    with pytest.raises(EncodeError):
        encode_amqp10_message(b"x", body_kind=kind)
    with pytest.raises(EncodeError):
        encode_amqp10_message("not bytes")


# ------------------------------------------------------------------ malformed input


def _only_decode_error(raw: bytes) -> None:
    try:
        decode_amqp10_value(raw)
    except DecodeError:
        pass
    try:
        decode_amqp10_message(raw)
    except DecodeError:
        pass


@FAST
@given(DECODABLE)
def test_every_truncation_is_a_decode_error(triple: tuple[Any, Any, Any]) -> None:
    raw = proton_encode(triple[1])
    for cut in range(len(raw)):
        with pytest.raises(DecodeError):
            decode_amqp10_value(raw[:cut])


@FAST
@given(st.binary(max_size=200))
def test_random_bytes_only_raise_decode_error(raw: bytes) -> None:
    _only_decode_error(raw)


@FAST
@given(DECODABLE, st.data())
def test_corrupted_encodings_only_raise_decode_error(triple: tuple[Any, Any, Any],
                                                     data: st.DataObject) -> None:
    raw = bytearray(proton_encode(triple[1]))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    _only_decode_error(bytes(raw))
    _only_decode_error(b"\x00\x53\x77" + bytes(raw))


@FAST
@given(st.binary(max_size=300).map(lambda b: b"\x00\x53\x75\xa0" + b[:1] + b[1:]))
def test_message_truncations_raise_decode_error_or_decode(raw: bytes) -> None:
    for cut in range(len(raw) + 1):
        try:
            decode_amqp10_message(raw[:cut])
        except DecodeError:
            pass


@pytest.mark.slow
@SLOW
@given(st.binary(max_size=2000))
def test_random_bytes_only_raise_decode_error_many(raw: bytes) -> None:
    _only_decode_error(raw)


def _nested(depth: int, open_level: Any, inner: bytes) -> bytes:
    raw = inner
    for _ in range(depth):
        raw = open_level(raw)
    return raw


HOSTILE = {
    "list of 2**32-1 items in 10 bytes": b"\xd0" + struct.pack(">II", 5, 0xFFFF_FFFF) + b"\x40",
    "map of 2**32-2 items in 10 bytes": b"\xd1" + struct.pack(">II", 5, 0xFFFF_FFFE) + b"\x40",
    "array of 2**32-1 nulls in 10 bytes": b"\xf0" + struct.pack(">II", 5, 0xFFFF_FFFF) + b"\x40",
    "array of 2**32-1 longs": b"\xf0" + struct.pack(">II", 5, 0xFFFF_FFFF) + b"\x81",
    "binary claiming 4 GiB": b"\xb0\xff\xff\xff\xff" + b"x" * 10,
    "list8 claiming more than it has": b"\xc0\xff\xff\x40",
    "lists nested 10,000 deep": _nested(
        10_000, lambda r: b"\xd0" + struct.pack(">II", 4 + len(r), 1) + r, b"\x45"),
    "described nested 10,000 deep": b"\x00" * 10_000 + b"\x40" * 10_001,
    "described descriptors 10,000 deep": _nested(10_000, lambda r: b"\x00" + r + b"\x40",
                                                 b"\x40"),
    "arrays of arrays 10,000 deep": b"\xf0" + _nested(
        10_000, lambda r: struct.pack(">II", 5 + len(r), 1) + b"\xf0" + r,
        struct.pack(">II", 5, 0) + b"\x40"),
    "maps nested 10,000 deep": _nested(
        10_000, lambda r: b"\xd1" + struct.pack(">II", 5 + len(r), 2) + b"\x40" + r, b"\x45"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_input_is_refused_quickly_and_small(name: str) -> None:
    raw = HOSTILE[name]
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(DecodeError):
            decode_amqp10_value(raw)
        with pytest.raises(DecodeError):
            decode_amqp10_message(b"\x00\x53\x77" + raw)
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert elapsed < 1.0
    assert peak < 20 * len(raw) + (1 << 20)


def test_zero_width_arrays_up_to_the_cap_decode() -> None:
    raw = proton_encode(Array(UNDESCRIBED, Data.NULL, *([None] * 64)))
    assert decode_amqp10_value(raw) == ([None] * 64, len(raw))
    raw = proton_encode(Array(UNDESCRIBED, Data.NULL, *([None] * 65)))
    with pytest.raises(DecodeError, match="65 items"):
        decode_amqp10_value(raw)


def test_nesting_limit_is_64() -> None:
    deep: list[Any] = [1]
    for _ in range(63):
        deep = [deep]
    assert decode_amqp10_value(encode_amqp10_value(deep))[0] == deep
    with pytest.raises(DecodeError, match="nested"):
        decode_amqp10_value(b"\xc0\x03\x01" * 70 + b"\x40")


def test_unhashable_map_keys_and_odd_maps() -> None:
    with pytest.raises(DecodeError, match="hashable"):
        decode_amqp10_value(b"\xc1\x03\x02\x45\x40")  # [] as a key: decodes to a list
    with pytest.raises(DecodeError, match="odd"):
        decode_amqp10_value(b"\xc1\x02\x01\x40")
    with pytest.raises(DecodeError, match="format code"):
        decode_amqp10_value(b"\x01")
    with pytest.raises(DecodeError):
        decode_amqp10_value(b"\xa3\x01\xff")  # a symbol is ASCII
    with pytest.raises(DecodeError):
        decode_amqp10_value(b"\xa1\x01\xff")  # a string is UTF-8
    with pytest.raises(DecodeError):
        decode_amqp10_value(b"\x73\xff\xff\xff\xff")  # no such char
    with pytest.raises(DecodeError):
        decode_amqp10_value(b"\x73\x00\x11\x00\x00")  # beyond U+10FFFF
