"""Call a QMF method on the objects of a class.

    python examples/call_method.py --url URL --class broker echo 1 hello
    python examples/call_method.py --url URL --class queue --name orders purge 0
    python examples/call_method.py --url URL --class queue --where "msgDepth > 100" purge request=10

Arguments are given in schema order or as ``name=value`` and are converted with the
method's schema (numbers, ``true``/``false``, JSON for maps and lists, text for the
rest); omitted map arguments default to ``{}``.  Prints one line per object called
and exits 0, or 1 when no object matched, a call failed or the bus cannot be reached.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

from qmf_async import MethodError, QmfError, QmfType, SchemaArgument, Session

#: exit code when stdout's reader went away (``... | head``): 128 + SIGPIPE, as a shell
#: reports a program that SIGPIPE stopped
EXIT_PIPE = 141

_INTS = {QmfType.UINT8, QmfType.UINT16, QmfType.UINT32, QmfType.UINT64, QmfType.INT8,
         QmfType.INT16, QmfType.INT32, QmfType.INT64, QmfType.ABSTIME, QmfType.DELTATIME}


def convert(arg: SchemaArgument, text: str) -> Any:
    """A command-line string as a value of the argument's QMF type."""
    if arg.type in _INTS:
        return int(text, 0)
    if arg.type in (QmfType.FLOAT, QmfType.DOUBLE):
        return float(text)
    if arg.type == QmfType.BOOL:
        return text.lower() in ("1", "true", "yes", "y")
    if arg.type in (QmfType.MAP, QmfType.LIST, QmfType.ARRAY):
        return json.loads(text)
    return text


async def call(url: str, _class: str, package: str | None, name: str | None,
               where: str | None, method: str, raw_args: list[str], timeout: float) -> int:
    filters: dict[str, Any] = {"name": name} if name is not None else {}
    async with Session.connect(url, timeout=timeout) as session:
        objects = await session.get_objects(_class=_class, _package=package, where=where,
                                            _timeout=timeout, **filters)
        if not objects:
            print(f"call_method: no {_class} object matched", file=sys.stderr)
            return 1
        schema_method = objects[0].get_schema().method(method)
        params = {a.name: a for a in schema_method.in_args}
        positional, keywords = [], {}
        for text in raw_args:
            key, eq, value = text.partition("=")
            if eq and key in params:
                keywords[key] = convert(params[key], value)
            else:
                if len(positional) >= len(schema_method.in_args):
                    print(f"call_method: {method}() takes {len(schema_method.in_args)} "
                          f"argument(s)", file=sys.stderr)
                    return 1
                positional.append(convert(schema_method.in_args[len(positional)], text))
        failed = 0
        for obj in objects:
            label = obj.get("name") or obj.get_index() or str(obj.get_object_id())
            try:
                result = await obj.invoke(method, *positional, _timeout=timeout, **keywords)
            except MethodError as exc:
                failed += 1
                print(f"{_class} {label}: {method} failed: {exc.status} {exc.text}")
                continue
            outputs = " ".join(f"{k}={v!r}" for k, v in result.out_args.items())
            print(f"{_class} {label}: {method} -> {result.status} {result.text} {outputs}"
                  .rstrip())
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="amqp://guest:guest@localhost:5672/",
                        help="AMQP 0-9-1 broker URL")
    parser.add_argument("--class", dest="class_", required=True, help="object class")
    parser.add_argument("--package", help="schema package (default: any)")
    parser.add_argument("--name", help="only the object whose 'name' property is this")
    parser.add_argument("--where", help="JMS selector choosing the objects")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds (default 10)")
    parser.add_argument("method", help="method name")
    parser.add_argument("args", nargs="*", help="arguments: VALUE or NAME=VALUE")
    args = parser.parse_args(argv)
    try:
        return asyncio.run(call(args.url, args.class_, args.package, args.name, args.where,
                                args.method, args.args, args.timeout))
    except (QmfError, ValueError) as exc:
        print(f"call_method: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # the reader left (``... | head``): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_PIPE


if __name__ == "__main__":
    sys.exit(main())
