"""Decode throughput of content records (g, c, i) on the real qpidd 1.40 captures.

    python benchmarks/decode.py [--seconds 10] [--rounds 5] [--clock cpu|wall]
                                [--captures DIR]

All capture bodies are first fed through one SchemaRegistry (so every schema is
known); then the bodies carrying g/c/i records are decoded in a loop.  The result is
the best of ``--rounds`` timed rounds, in objects (records) per second of process
CPU time (``--clock wall`` for elapsed time).

The baseline, measured in the same run and interleaved round by round, is a plain
Python field-by-field reader of the same bodies: one ``struct.unpack_from`` per field,
dispatching on the schema type of each field and building one dict per object -- the
way the classic ``qmf.console`` reads content records (``codec010`` plus
``Object.__init__``).  It is checked to read the same values as ``wire.decode``.
"""

from __future__ import annotations

import argparse
import struct
import uuid
from typing import Any

import _corpus
from _corpus import FAMILIES, wire

# ----------------------------------------------------------------------------- the baseline

_u8 = struct.Struct(">B").unpack_from
_u16 = struct.Struct(">H").unpack_from
_u32 = struct.Struct(">I").unpack_from
_u64 = struct.Struct(">Q").unpack_from
_i8 = struct.Struct(">b").unpack_from
_i16 = struct.Struct(">h").unpack_from
_i32 = struct.Struct(">i").unpack_from
_i64 = struct.Struct(">q").unpack_from
_f32 = struct.Struct(">f").unpack_from
_f64 = struct.Struct(">d").unpack_from
_header = struct.Struct(">3scI").unpack_from


def _str8(buf: bytes, pos: int) -> tuple[str, int]:
    (n,) = _u8(buf, pos)
    return buf[pos + 1:pos + 1 + n].decode("utf-8"), pos + 1 + n


def _str16(buf: bytes, pos: int) -> tuple[str, int]:
    (n,) = _u16(buf, pos)
    return buf[pos + 2:pos + 2 + n].decode("utf-8"), pos + 2 + n


def _amqp_value(code: int, buf: bytes, pos: int) -> tuple[Any, int]:
    """The AMQP 0-10 types found in qpidd's maps (codec010 style)."""
    if code == 0x95:
        return _str16(buf, pos)
    if code == 0x90:
        (n,) = _u16(buf, pos)
        return buf[pos + 2:pos + 2 + n], pos + 2 + n
    if code == 0x85:
        return _str8(buf, pos)
    if code == 0x08:
        return _u8(buf, pos)[0] != 0, pos + 1
    if code == 0x02:
        return _u8(buf, pos)[0], pos + 1
    if code == 0x01:
        return _i8(buf, pos)[0], pos + 1
    if code == 0x12:
        return _u16(buf, pos)[0], pos + 2
    if code == 0x11:
        return _i16(buf, pos)[0], pos + 2
    if code == 0x22:
        return _u32(buf, pos)[0], pos + 4
    if code == 0x21:
        return _i32(buf, pos)[0], pos + 4
    if code == 0x32:
        return _u64(buf, pos)[0], pos + 8
    if code in (0x31, 0x38):
        return _i64(buf, pos)[0], pos + 8
    if code == 0x33:
        return _f64(buf, pos)[0], pos + 8
    if code == 0x23:
        return _f32(buf, pos)[0], pos + 4
    if code == 0x48:
        return uuid.UUID(bytes=buf[pos:pos + 16]), pos + 16
    if code == 0xA8:
        return _map(buf, pos)
    if code == 0xA9:
        return _list(buf, pos)
    if code == 0xF0:
        return None, pos
    raise ValueError(f"baseline reader: AMQP type 0x{code:02x}")


def _map(buf: bytes, pos: int) -> tuple[dict[str, Any], int]:
    (size,) = _u32(buf, pos)
    end = pos + 4 + size
    (count,) = _u32(buf, pos + 4)
    pos += 8
    result = {}
    for _ in range(count):
        key, pos = _str8(buf, pos)
        (code,) = _u8(buf, pos)
        result[key], pos = _amqp_value(code, buf, pos + 1)
    assert pos == end
    return result, pos


def _list(buf: bytes, pos: int) -> tuple[list[Any], int]:
    (count,) = _u32(buf, pos + 4)
    pos += 8
    result = []
    for _ in range(count):
        (code,) = _u8(buf, pos)
        value, pos = _amqp_value(code, buf, pos + 1)
        result.append(value)
    return result, pos


def _read(t: int, buf: bytes, pos: int) -> tuple[Any, int]:
    """One value of QMF type ``t`` (the classic console's Codec.read_* by type)."""
    if t == 1:
        return _u8(buf, pos)[0], pos + 1
    if t == 2:
        return _u16(buf, pos)[0], pos + 2
    if t == 3:
        return _u32(buf, pos)[0], pos + 4
    if t in (4, 8, 9):
        return _u64(buf, pos)[0], pos + 8
    if t == 6:
        return _str8(buf, pos)
    if t == 7:
        return _str16(buf, pos)
    if t == 10:
        first = _u64(buf, pos)[0]
        second = _u64(buf, pos + 8)[0]
        return (first, second), pos + 16
    if t == 11:
        return _u8(buf, pos)[0] != 0, pos + 1
    if t == 12:
        return _f32(buf, pos)[0], pos + 4
    if t == 13:
        return _f64(buf, pos)[0], pos + 8
    if t == 14:
        return uuid.UUID(bytes=buf[pos:pos + 16]), pos + 16
    if t == 15:
        return _map(buf, pos)
    if t == 16:
        return _i8(buf, pos)[0], pos + 1
    if t == 17:
        return _i16(buf, pos)[0], pos + 2
    if t == 18:
        return _i32(buf, pos)[0], pos + 4
    if t == 19:
        return _i64(buf, pos)[0], pos + 8
    if t == 21:
        return _list(buf, pos)
    raise ValueError(f"baseline reader: QMF type {t}")


Layout = tuple[list[tuple[str, int, bool]], list[tuple[str, int]]]


def baseline_schemas(registry: wire.SchemaRegistry) -> dict[tuple[str, str, bytes], Layout]:
    """Plain (name, type code, optional) lists per class, as a classic console keeps."""
    return {(s.class_key.package, s.class_key.name, s.class_key.hash): (
        [(p.name, int(p.type), p.optional) for p in s.properties],
        [(st.name, int(st.type)) for st in s.statistics]) for s in registry}


def baseline_decode(buf: bytes, schemas: dict[tuple[str, str, bytes], Layout]
                    ) -> list[dict[str, Any]]:
    """Field-by-field reader of a body of g/c/i records: one dict per object."""
    objects = []
    pos = 0
    n = len(buf)
    while pos < n:
        magic, op, seq = _header(buf, pos)
        if magic != b"AM2":
            raise ValueError("bad magic")
        pos += 8
        opcode = op.decode()
        package, pos = _str8(buf, pos)
        cls, pos = _str8(buf, pos)
        h = buf[pos:pos + 16]
        pos += 16
        props_layout, stats_layout = schemas[(package, cls, h)]
        (ts,) = _u64(buf, pos)
        (created,) = _u64(buf, pos + 8)
        (deleted,) = _u64(buf, pos + 16)
        (oid_first,) = _u64(buf, pos + 24)
        (oid_second,) = _u64(buf, pos + 32)
        pos += 40
        props: dict[str, Any] = {}
        stats: dict[str, Any] = {}
        if opcode in ("c", "g"):
            n_opt = sum(1 for _, _, opt in props_layout if opt)
            bits = []
            for _ in range((n_opt + 7) // 8):
                (b,) = _u8(buf, pos)
                bits.append(b)
                pos += 1
            k = 0
            for name, t, optional in props_layout:
                if optional:
                    present = bits[k // 8] & (1 << (k % 8))
                    k += 1
                    if not present:
                        continue
                props[name], pos = _read(t, buf, pos)
        if opcode in ("i", "g"):
            for name, t in stats_layout:
                stats[name], pos = _read(t, buf, pos)
        objects.append({"_opcode": opcode, "_seq": seq, "_package": package, "_class": cls,
                        "_hash": h, "_timestamps": (ts, created, deleted),
                        "_objectId": (oid_first, oid_second), "properties": props,
                        "statistics": stats})
    return objects


def _plain(value: Any) -> Any:
    """Our decoded values in the baseline's terms (object ids as two ints)."""
    if hasattr(value, "first") and hasattr(value, "second"):
        return (value.first, value.second)
    return value


def verify(registry: wire.SchemaRegistry, bodies: list[bytes],
           schemas: dict[tuple[str, str, bytes], Layout]) -> None:
    """The baseline reads what wire.decode reads (same values, same counts)."""
    for body in bodies:
        ours = wire.decode(body, registry)
        theirs = baseline_decode(body, schemas)
        assert len(ours) == len(theirs)
        for rec, obj in zip(ours, theirs, strict=True):
            assert rec.opcode == obj["_opcode"] and rec.seq == obj["_seq"]
            assert (rec.timestamp, rec.created, rec.deleted) == obj["_timestamps"]
            assert _plain(rec.object_id) == obj["_objectId"]
            assert {k: _plain(v) for k, v in rec.properties_dict().items()} == obj["properties"]
            assert {k: _plain(v) for k, v in rec.statistics_dict().items()} == obj["statistics"]


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    _corpus.add_common_args(ap)
    args = ap.parse_args(argv)

    registry, bodies = _corpus.load(args.captures)
    corpora = _corpus.by_family(registry, bodies)
    schemas = baseline_schemas(registry)
    verify(registry, bodies, schemas)
    counts = {fam: _corpus.count_objects(registry, b) for fam, b in corpora.items()}
    assert counts["all"] == sum(counts[f] for f in FAMILIES)

    decode = wire.decode

    def ours(corpus: list[bytes]) -> Any:
        def run() -> None:
            for body in corpus:
                decode(body, registry)
        return run

    def baseline(corpus: list[bytes]) -> Any:
        def run() -> None:
            for body in corpus:
                baseline_decode(body, schemas)
        return run

    per = args.seconds / (args.rounds * len(corpora) * 2)
    best: dict[tuple[str, str], float] = {}
    for _ in range(args.rounds):
        for fam, corpus in corpora.items():
            for impl, make in (("ours", ours), ("baseline", baseline)):
                r = _corpus.rate(make(corpus), counts[fam], per, args.clock)
                best[fam, impl] = max(best.get((fam, impl), 0.0), r)

    print(f"machine: {_corpus.machine()}")
    print(f"corpus: {len(bodies)} bodies, {counts['all']} objects "
          f"({', '.join(f'{f} {counts[f]}' for f in FAMILIES)}); "
          f"best of {args.rounds} rounds of {per:.2f} s ({args.clock} clock)")
    print()
    print(f"{'family':<8}{'bodies':>8}{'objects':>9}{'qmf-async obj/s':>18}"
          f"{'baseline obj/s':>17}{'ratio':>8}")
    for fam in ("all", *FAMILIES):
        o, b = best[fam, "ours"], best[fam, "baseline"]
        print(f"{fam:<8}{len(corpora[fam]):>8}{counts[fam]:>9}{o:>18,.0f}{b:>17,.0f}"
              f"{o / b:>7.1f}x")


if __name__ == "__main__":
    main()
