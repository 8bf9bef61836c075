#!/usr/bin/env python3
"""Write the QMF XML schema of classes seen in a capture (regenerates
examples/schemas/qpidd-broker.xml).

    python3 scripts/capture_schema_to_xml.py [CAPTURE.jsonl] > examples/schemas/qpidd-broker.xml

Decodes every record of the capture in order with one ``wire.SchemaRegistry`` (schema
responses add classes) and writes the chosen classes in the XML format read by
``qmf_async.agent.load_schema_xml``.  Statistics that qmf-gen expanded from ``hiloN`` and
``mma*`` are folded back; counters stay plain ``uintN``.
"""

from __future__ import annotations

import base64
import json
import sys
from xml.sax.saxutils import quoteattr

from qmf_async import QmfType, SchemaArgument, SchemaClass, SchemaStatistic, wire

CAPTURE = "/work/shared/captures/qpidd-1.40-qmf1.jsonl"
OBJECT_CLASSES = ("broker", "vhost", "queue", "exchange", "binding")
EVENT_CLASSES = ("queueDeclare", "queueDelete", "exchangeDeclare", "exchangeDelete", "bind",
                 "unbind")

# what qpid's management-schema.xml says the objId properties point to (not on the wire)
REFERENCES = {
    ("broker", "systemRef"): ("system", True), ("vhost", "brokerRef"): ("broker", True),
    ("queue", "vhostRef"): ("vhost", True), ("queue", "altExchange"): ("exchange", False),
    ("exchange", "vhostRef"): ("vhost", True), ("exchange", "altExchange"): ("exchange", False),
    ("binding", "exchangeRef"): ("exchange", True), ("binding", "queueRef"): ("queue", False),
}

TYPE_NAMES = {
    QmfType.REF: "objId", QmfType.UINT8: "uint8", QmfType.UINT16: "uint16",
    QmfType.UINT32: "uint32", QmfType.UINT64: "uint64", QmfType.INT8: "int8",
    QmfType.INT16: "int16", QmfType.INT32: "int32", QmfType.INT64: "int64",
    QmfType.BOOL: "bool", QmfType.SSTR: "sstr", QmfType.LSTR: "lstr",
    QmfType.ABSTIME: "absTime", QmfType.DELTATIME: "deltaTime", QmfType.FLOAT: "float",
    QmfType.DOUBLE: "double", QmfType.UUID: "uuid", QmfType.MAP: "map", QmfType.LIST: "list",
}
WIDTH = {QmfType.UINT8: "8", QmfType.UINT16: "16", QmfType.UINT32: "32", QmfType.UINT64: "64"}
MMA = {QmfType.UINT32: "mma32", QmfType.UINT64: "mma64", QmfType.DELTATIME: "mmaTime"}


def captured_schemas(path: str) -> dict[str, SchemaClass]:
    registry = wire.SchemaRegistry()
    found: dict[str, SchemaClass] = {}
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            messages = wire.decode(base64.b64decode(record["body_b64"]), registry)
            registry.learn(messages)
            for msg in messages:
                if isinstance(msg, wire.SchemaResponse):
                    found[msg.schema.class_key.name] = msg.schema
    return found


def attrs_text(pairs: list[tuple[str, object]]) -> str:
    return "".join(f" {k}={quoteattr(str(v))}" for k, v in pairs if v is not None)


def suffixed(desc: str | None, suffix: str) -> str | None:
    return None if desc is None else f"{desc} ({suffix})"


def same(a: SchemaStatistic, b: SchemaStatistic, name: str, desc: str | None) -> bool:
    return (b.name == name and b.type == a.type and b.unit == a.unit and b.desc == desc
            and not b.extra)


def fold_statistics(stats: tuple[SchemaStatistic, ...]) -> list[tuple[str, str, SchemaStatistic]]:
    """(name, XML type, first statistic) for each XML <statistic>."""
    out = []
    i = 0
    while i < len(stats):
        s = stats[i]
        rest = stats[i + 1:]
        if s.name.endswith("Samples") and s.type in MMA and len(rest) >= 3:
            base = s.name[: -len("Samples")]
            desc = None
            if s.desc and s.desc.endswith(" (Samples)"):
                desc = s.desc[: -len(" (Samples)")]
            if (s.desc is None or desc is not None) and all(
                    same(s, r, base + part, suffixed(desc, part))
                    for r, part in zip(rest[:3], ("Min", "Max", "Average"), strict=True)):
                out.append((base, MMA[s.type], SchemaStatistic(base, s.type, s.unit, desc)))
                i += 4
                continue
        if s.type in WIDTH and len(rest) >= 2 and same(
                s, rest[0], s.name + "High", suffixed(s.desc, "High")) and same(
                s, rest[1], s.name + "Low", suffixed(s.desc, "Low")):
            out.append((s.name, "hilo" + WIDTH[s.type], s))
            i += 3
            continue
        out.append((s.name, TYPE_NAMES[s.type], s))
        i += 1
    return out


def argument_attrs(a: SchemaArgument, *, event: bool) -> list[tuple[str, object]]:
    pairs: list[tuple[str, object]] = [("name", a.name), ("type", TYPE_NAMES[a.type])]
    if not event:
        pairs.append(("dir", a.direction))
    pairs += [("unit", a.unit), ("min", a.min), ("max", a.max), ("maxLen", a.maxlen),
              ("default", a.default), ("desc", a.desc)]
    return pairs


HEADER = (
    "<!-- The org.apache.qpid.broker classes of qpidd 1.40 used by examples/demo_agent.py,",
    "     written from the schema responses in the qpidd-1.40-qmf1 capture",
    "     (scripts/capture_schema_to_xml.py).  Loaded with",
    "     qmf_async.agent.load_schema_xml, every class has exactly qpidd's elements;",
    "     only the class hashes differ. -->",
)


def write(found: dict[str, SchemaClass], out: list[str]) -> None:
    package = found[OBJECT_CLASSES[0]].class_key.package
    out.append('<?xml version="1.0" encoding="utf-8"?>')
    out.extend(HEADER)
    out.append(f"<schema package={quoteattr(package)}>")
    for name in OBJECT_CLASSES:
        schema = found[name]
        out.append("")
        out.append(f"  <class name={quoteattr(name)}>")
        for p in schema.properties:
            ref, parent = REFERENCES.get((name, p.name), (None, False))
            out.append("    <property" + attrs_text([
                ("name", p.name), ("type", TYPE_NAMES[p.type]), ("references", ref),
                ("parentRef", "y" if parent else None), ("access", p.access.name),
                ("index", "y" if p.index else None), ("optional", "y" if p.optional else None),
                ("unit", p.unit), ("min", p.min), ("max", p.max), ("maxLen", p.maxlen),
                ("desc", p.desc)]) + "/>")
        for sname, xml_type, s in fold_statistics(schema.statistics):
            out.append("    <statistic" + attrs_text([
                ("name", sname), ("type", xml_type), ("unit", s.unit), ("desc", s.desc)]) + "/>")
        for m in schema.methods:
            head = "    <method" + attrs_text([("name", m.name), ("desc", m.desc)])
            if not m.arguments:
                out.append(head + "/>")
                continue
            out.append(head + ">")
            for a in m.arguments:
                out.append("      <arg" + attrs_text(argument_attrs(a, event=False)) + "/>")
            out.append("    </method>")
        out.append("  </class>")
    # event arguments shared by name, as in qpid's own schema file
    shared: dict[str, SchemaArgument] = {}
    inline: set[str] = set()
    for name in EVENT_CLASSES:
        for a in found[name].arguments:
            if shared.setdefault(a.name, a) != a:
                inline.add(name)
    out.append("")
    out.append("  <eventArguments>")
    for a in shared.values():
        out.append("    <arg" + attrs_text(argument_attrs(a, event=True)) + "/>")
    out.append("  </eventArguments>")
    out.append("")
    for name in EVENT_CLASSES:
        args = found[name].arguments
        if name in inline:
            out.append(f'  <event name={quoteattr(name)} sev="inform">')
            for a in args:
                out.append("    <arg" + attrs_text(argument_attrs(a, event=True)) + "/>")
            out.append("  </event>")
        else:
            out.append(f'  <event name={quoteattr(name)} sev="inform" '
                       f'args={quoteattr(", ".join(a.name for a in args))}/>')
    out.append("</schema>")


def main(argv: list[str]) -> int:
    found = captured_schemas(argv[1] if len(argv) > 1 else CAPTURE)
    out: list[str] = []
    write(found, out)
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
