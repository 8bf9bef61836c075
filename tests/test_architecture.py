"""The layering rules of ../shared/DESIGN.md section 2, checked on the source.

- no import circle between modules of ``qmf_async`` (``TYPE_CHECKING``-only imports count:
  a circle at type level is still a circle in the design);
- no private module or private name crosses a package line: a module imports another
  subpackage only through that package's public names;
- the codec (``wire``) and the protocol core (``protocol``) import neither asyncio nor a
  client library; nothing outside ``transport`` imports aiormq or pamqp;
- the console generates no code (``exec``/``compile``/``eval``): that is the codec's.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "qmf_async"
#: subpackages whose modules count as one layer each (tools' members are their own packages)
LAYER_PACKAGES = ("wire", "protocol", "transport", "runtime", "console", "agent", "classic",
                  "tools.cli",
                  "tools.pipeline", "tools", "exporter")
CLIENT_LIBRARIES = ("aiormq", "pamqp", "proton")


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _imports(name: str, tree: ast.AST | None = None) -> Iterator[tuple[int, str, list[str]]]:
    """(line, absolute module, imported names) of every import in module ``name`` (or
    in ``tree``, read as that module)."""
    if tree is None:
        tree = ast.parse(MODULES[name].read_text(), str(MODULES[name]))
    base = name if _is_package(name) else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = base.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                mod = ".".join(parts + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            yield node.lineno, mod, [a.name for a in node.names]


def _package_of(name: str) -> str:
    """The layer package a module belongs to (``qmf_async`` for the top-level modules)."""
    rest = name.removeprefix("qmf_async").lstrip(".")
    for pkg in LAYER_PACKAGES:
        if rest == pkg or rest.startswith(pkg + "."):
            return f"qmf_async.{pkg}"
    return "qmf_async"


def _targets(name: str) -> Iterator[tuple[int, str, list[str]]]:
    """Imports of ``name`` that are modules of the package, resolved to module names."""
    for line, mod, names in _imports(name):
        if mod in MODULES:
            subs = [f"{mod}.{n}" for n in names if f"{mod}.{n}" in MODULES]
            if subs:
                for sub in subs:
                    yield line, sub, []
                rest = [n for n in names if f"{mod}.{n}" not in MODULES]
                if rest:
                    yield line, mod, rest
            else:
                yield line, mod, names


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name in MODULES:
        for _, target, _ in _targets(name):
            # importing a submodule imports its package first; the package's own
            # __init__ is what a ``from pkg import x`` depends on
            if target != name:
                graph[name].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _ancestor_packages(name: str) -> set[str]:
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def test_no_import_circles() -> None:
    graph = _graph()
    # a package's __init__ importing its own submodules is how a package is built, and a
    # submodule importing its package is then the same module set; leave those edges out
    for name, targets in graph.items():
        graph[name] = {t for t in targets
                       if t not in _ancestor_packages(name) and name not in _ancestor_packages(t)}
    assert _cycles(graph) == []


def test_no_private_name_crosses_a_package_line() -> None:
    offenders = []
    for name in MODULES:
        home = _package_of(name)
        for line, target, names in _targets(name):
            there = _package_of(target)
            if there == home or not target.startswith("qmf_async"):
                continue
            where = f"{MODULES[name].relative_to(PACKAGE.parent)}:{line}"
            if any(p.startswith("_") for p in target.split(".")):
                offenders.append(f"{where}: imports private module {target}")
            offenders += [f"{where}: imports private name {target}.{n}"
                          for n in names if n.startswith("_") and n != "__version__"]
    assert offenders == []


@pytest.mark.parametrize("layer", ["wire", "protocol"])
def test_codec_and_protocol_core_do_no_io(layer: str) -> None:
    offenders = [
        f"{MODULES[name].relative_to(PACKAGE.parent)}:{line}: {mod}"
        for name in MODULES if _package_of(name) == f"qmf_async.{layer}"
        for line, mod, _ in _imports(name)
        if mod.split(".")[0] in ("asyncio", *CLIENT_LIBRARIES)
    ]
    assert offenders == []


def test_the_object_view_is_a_pure_core() -> None:
    """``console/_view.py`` (the object view's state and rules) does no I/O: no
    asyncio, no client library, no transport, no broker connection; what it imports
    of the console is its values."""
    name = "qmf_async.console._view"
    imported = [mod for _, mod, _ in _imports(name)]
    assert imported, "the rule sees no import of the view: was it moved?"
    offenders = [mod for mod in imported
                 if mod.split(".")[0] in ("asyncio", "time", *CLIENT_LIBRARIES)
                 or mod.startswith(("qmf_async.transport", "qmf_async.runtime"))
                 or mod in ("qmf_async.console._broker", "qmf_async.console._session")]
    assert offenders == []


def test_the_amqp10_client_core_is_sans_io() -> None:
    """The AMQP 1.0 frames, engine, events and QMF addressing of the native transport
    import no asyncio, socket, ssl, time or client library: bytes and the time in."""
    names = [n for n in MODULES if n.startswith("qmf_async.transport._amqp10_")]
    assert len(names) >= 4, "the rule sees no AMQP 1.0 core: was it moved?"
    offenders = [f"{name}: {mod}" for name in names for _, mod, _ in _imports(name)
                 if mod.split(".")[0] in ("asyncio", "socket", "ssl", "time", "selectors",
                                          *CLIENT_LIBRARIES)]
    assert offenders == []


def test_only_transport_imports_client_libraries() -> None:
    offenders = [
        f"{MODULES[name].relative_to(PACKAGE.parent)}:{line}: {mod}"
        for name in MODULES if _package_of(name) != "qmf_async.transport"
        for line, mod, _ in _imports(name)
        if mod.split(".")[0] in CLIENT_LIBRARIES
    ]
    assert offenders == []


def test_the_console_generates_no_code() -> None:
    """Code is compiled per schema in the codec (``wire``) alone: no module of the
    console calls ``exec`` or ``compile`` (issue 25)."""
    offenders = [
        f"{MODULES[name].relative_to(PACKAGE.parent)}:{node.lineno}: {node.func.id}()"
        for name in MODULES if _package_of(name) == "qmf_async.console"
        for node in ast.walk(ast.parse(MODULES[name].read_text(), str(MODULES[name])))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        and node.func.id in ("exec", "compile", "eval")
    ]
    assert offenders == []
    # the check sees generated code where there is some
    assert any(isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
               and node.func.id == "exec"
               for node in ast.walk(ast.parse(MODULES["qmf_async.wire._compile"].read_text())))


def test_the_rules_see_the_package() -> None:
    """The checks above read the real tree: every layer has modules, imports resolve."""
    for pkg in ("wire", "protocol", "transport", "console", "agent", "tools"):
        assert any(_package_of(n) == f"qmf_async.{pkg}" for n in MODULES), pkg
    assert "qmf_async.wire._codec" in _graph()["qmf_async.wire"]


def test_the_bus_names_are_defined_once() -> None:
    """Exchange names are spelled in ``qmf_async/names.py`` only; every other module
    takes them from there (so no two modules can disagree on them)."""
    from qmf_async import names
    spelled = {names.MANAGEMENT_EXCHANGE, names.REPLY_EXCHANGE, names.V2_DIRECT_EXCHANGE,
               names.V2_TOPIC_EXCHANGE}
    found = []
    for name, path in MODULES.items():
        if name == "qmf_async.names":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and node.value in spelled:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} "
                             f"{node.value!r}")
    assert found == [], "use qmf_async.names instead:\n" + "\n".join(found)


def test_the_console_reads_the_transport_through_its_contract() -> None:
    """The console asks a transport what it can do through ``capabilities`` and the
    ``Transport`` protocol, never by probing attributes (``getattr``/``hasattr``) or
    comparing protocol names."""
    found = []
    for name, path in MODULES.items():
        if not name.startswith("qmf_async.console"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id in ("getattr", "hasattr") and node.args \
                    and "transport" in ast.unparse(node.args[0]).lower():
                found.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
            if isinstance(node, ast.Constant) and node.value in ("0-9-1", "1.0"):
                found.append(f"{path.name}:{node.lineno} {node.value!r}")
    assert found == [], "\n".join(found)


#: where a console object reads another's private attributes, deliberately: the other
#: object is of the same class (building or comparing one), or the function is part of
#: the class's own implementation.  Keyed by module, then ``Class.function``.
PRIVATE_ACCESS_ALLOWED = {
    "_objects.py": {
        "QmfObject.from_raw",  # fills in the new proxy it built
        "QmfObject.update",  # takes over the fresh proxy's record
        "QmfObject.__eq__",  # compares with another proxy
        "_Element.__get__",  # QmfObject's attribute descriptor: reads the proxy's record
    },
    "_v2.py": {"V2Link.__init__"},  # carries over the former connection's link's banks
}
#: named-tuple members that start with an underscore and are public all the same
NAMEDTUPLE_MEMBERS = frozenset({"_replace", "_asdict", "_fields", "_make"})


def _private_accesses(path: Path) -> Iterator[tuple[str, int, str, bool]]:
    """(enclosing ``Class.function``, line, expression, on self or cls) of every read or
    call of a single-underscore attribute in the module at ``path``."""
    tree = ast.parse(path.read_text(), str(path))

    def walk(node: ast.AST, scope: list[str]) -> Iterator[tuple[str, int, str, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                yield from walk(child, [*scope, child.name])
                continue
            if isinstance(child, ast.Attribute) and child.attr.startswith("_") \
                    and not child.attr.startswith("__") \
                    and child.attr not in NAMEDTUPLE_MEMBERS:
                own = isinstance(child.value, ast.Name) and child.value.id in ("self", "cls")
                yield ".".join(scope[:2]), child.lineno, ast.unparse(child), own
            yield from walk(child, scope)

    yield from walk(tree, [])


def test_console_objects_use_each_others_public_names() -> None:
    """Inside ``qmf_async.console``, a private attribute is read or called on ``self``
    or ``cls`` only (a mixin is the object it is mixed into): what a Session needs of a
    Broker, a Broker of its session, a V2Link of its broker or a proxy of its broker is
    a public name (see PRIVATE_ACCESS_ALLOWED for the few same-class exceptions)."""
    console = PACKAGE / "console"
    offenders, own, allowed_used = [], 0, set()
    for path in sorted(console.glob("*.py")):
        allowed = PRIVATE_ACCESS_ALLOWED.get(path.name, set())
        for where, line, expr, on_self in _private_accesses(path):
            if on_self:
                own += 1
            elif where in allowed:
                allowed_used.add((path.name, where))
            else:
                offenders.append(f"{path.name}:{line} {expr}")
    assert own > 500, f"the rule sees too few self._x accesses ({own}): is the tree empty?"
    assert not offenders, "private names crossing console objects:\n" + "\n".join(offenders)
    # an exception that is no longer needed leaves the list
    listed = {(m, f) for m, fs in PRIVATE_ACCESS_ALLOWED.items() for f in fs}
    assert allowed_used == listed, f"unused exceptions: {sorted(listed - allowed_used)}"


def test_session_is_composed_not_mixed() -> None:
    """``Session`` has no base class: its object queries and updates are components it
    holds (``ObjectQueries``, ``ObjectUpdates``) with their collaborators given, not
    mixins sharing its ``self``."""
    tree = ast.parse((PACKAGE / "console" / "_session.py").read_text())
    [session] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Session"]
    assert [ast.unparse(b) for b in session.bases] == []
    for name in ("_query.py", "_updates.py"):
        module = ast.parse((PACKAGE / "console" / name).read_text())
        # no host state re-declared under ``if TYPE_CHECKING:`` inside a class
        for cls in (n for n in module.body if isinstance(n, ast.ClassDef)):
            assert not [n for n in cls.body if isinstance(n, ast.If)], f"{name}: {cls.name}"


#: the protocol core's QMF v2 modules: their types are named in one pattern
V2_PROTOCOL_MODULES = ("qmf_async.protocol._console_v2", "qmf_async.protocol._agent_v2")
#: the one event vocabulary of both console cores: no version marker in its names
CONSOLE_EVENTS_MODULE = "qmf_async.protocol._events"


#: console modules still holding a mixin (host state re-declared under TYPE_CHECKING in
#: a class body): none since Session's and Broker's parts became components
MIXIN_MODULES_LEFT: frozenset[str] = frozenset()
#: the base classes a console class may have besides its own package's plain classes
_COMPOSED_BASES = {"object", "Generic", "Protocol"}


def test_the_broker_is_composed_not_mixed() -> None:
    """``Broker`` inherits nothing but ``object`` (its schema fetches and method calls
    are parts it holds, with explicit collaborators), and no class body in console/
    re-declares its host's state under ``if TYPE_CHECKING:`` (the mark of a mixin that
    shares ``self``)."""
    broker = ast.parse((PACKAGE / "console" / "_broker.py").read_text())
    bases = [ast.unparse(b).partition("[")[0] for n in broker.body
             if isinstance(n, ast.ClassDef) and n.name == "Broker" for b in n.bases]
    assert set(bases) <= _COMPOSED_BASES, f"Broker's bases: {bases}"
    mixins = []
    for path in sorted((PACKAGE / "console").glob("*.py")):
        if path.name in MIXIN_MODULES_LEFT:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                mixins += [f"{path.name}:{s.lineno} {node.name}" for s in node.body
                           if isinstance(s, ast.If) and ast.unparse(s.test) == "TYPE_CHECKING"]
    assert not mixins, "class bodies re-declaring a host's state:\n" + "\n".join(mixins)


def test_protocol_v2_types_are_named_in_one_pattern() -> None:
    """Every public type of the v2 protocol core (a class, or a union of classes such as
    "any event of the v2 console core") is ``<Role>ProtocolV2`` (the protocol classes,
    pairing with ``ConsoleProtocol``/``AgentProtocol``) or ``V2<Name>`` (every event
    and message type); the v1 names carry no marker."""
    import importlib
    import types

    offenders, seen = [], 0
    for modname in V2_PROTOCOL_MODULES:
        module = importlib.import_module(modname)
        for name in module.__all__:
            obj = getattr(module, name)
            if isinstance(obj, type):
                if obj.__module__ != modname:
                    continue  # re-exported, named where it is defined
            elif not isinstance(obj, types.UnionType):
                continue  # constants and functions
            seen += 1
            if not (name.startswith("V2") or name.endswith("ProtocolV2")):
                offenders.append(f"{modname}.{name}")
    assert seen >= 10, f"the rule sees too few types ({seen}): is __all__ read?"
    assert offenders == [], "name v2 types V2<Name>:\n" + "\n".join(offenders)


def test_both_console_cores_speak_one_event_vocabulary() -> None:
    """The v1 and the v2 console core emit the types of one module (issue 37): no
    event type is named for a version, :data:`Event` is every one of them, and
    neither core module defines an event type of its own."""
    import importlib
    import typing

    events = importlib.import_module(CONSOLE_EVENTS_MODULE)
    kinds = {name: getattr(events, name) for name in events.__all__
             if isinstance(getattr(events, name), type)}
    assert len(kinds) >= 19, sorted(kinds)
    marked = [name for name in kinds if name[:2] in ("V1", "V2")]
    assert marked == [], f"event types named for a version: {marked}"
    assert set(typing.get_args(events.Event)) == set(kinds.values())
    for modname in ("qmf_async.protocol._console", "qmf_async.protocol._console_v2"):
        core = importlib.import_module(modname)
        own = [name for name, obj in vars(core).items() if isinstance(obj, type)
               and obj.__module__ == modname and hasattr(obj, "__attrs_attrs__")]
        assert own == [], f"{modname} defines event types of its own: {own}"


def test_each_connection_sends_through_one_path() -> None:
    """In ``qmf_async.console`` one function publishes, ``Broker.publish``: every
    request, v1 or v2, a method call or the drain probe, goes through it (so a
    header, a reply queue or a trace added there applies to all of them)."""
    offenders, through, inside = [], 0, 0
    for path in sorted((PACKAGE / "console").glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            the_path = path.name == "_broker.py" and func.name == "publish"
            for node in ast.walk(func):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr in ("publish", "_publish")):
                    continue
                receiver = ast.unparse(node.func.value)
                if receiver in ("self", "self.host"):
                    through += 1
                    continue
                if (path.name == "_waits.py" and receiver == "self"
                        and node.func.attr == "_publish"):
                    through += 1  # the request primitive: Broker.publish (v1 and v2)
                elif the_path and receiver == "transport":
                    inside += 1
                else:
                    offenders.append(f"{path.name}:{node.lineno} {func.name}: "
                                     f"{receiver}.publish")
    assert through >= 6, f"the rule sees too few sends ({through}): is the tree empty?"
    assert inside == 1, "Broker.publish sends v1 and v2 requests on the transport"
    assert offenders == [], "publish through Broker.publish:\n" + "\n".join(offenders)


# ---------------------------------------------------------------- tools, exporter, classic

#: the layers that sit on the public API (../shared/DESIGN.md section 2: "if a tool
#: needs a private name, the public API is missing something")
TOOL_LAYERS = ("qmf_async.tools", "qmf_async.exporter", "qmf_async.classic")
#: the AMQP versions a transport names (``Capabilities.protocol``)
PROTOCOL_NAMES = frozenset({"0-9-1", "0-10", "1.0"})
#: probes of a transport a tool layer still makes, until the ``Transport`` contract
#: has what they look for (the transport developer's: ``local_address`` in
#: ``TransportProtocol``, delegated by ``AutoTransport``).  Keyed by module, then the
#: probe as written.  An entry no longer used must leave the list.
TRANSPORT_PROBES_ALLOWED: dict[str, set[str]] = {}


def _in_layers(name: str, layers: tuple[str, ...]) -> bool:
    return any(name == pkg or name.startswith(pkg + ".") for pkg in layers)


def _trees(layers: tuple[str, ...]) -> Iterator[tuple[str, ast.AST]]:
    """(path under qmf_async, parsed module) of every module of ``layers``."""
    for name, path in MODULES.items():
        if _in_layers(name, layers):
            yield str(path.relative_to(PACKAGE)), ast.parse(path.read_text(), str(path))


def test_tools_do_not_probe_transports() -> None:
    """tools/, exporter/ and classic/ read a transport through its contract
    (``capabilities`` and the ``Transport`` protocol), never by ``getattr``/``hasattr``
    on it (see TRANSPORT_PROBES_ALLOWED for what the contract still lacks)."""
    found, allowed_used, modules = [], set(), 0
    for where, tree in _trees(TOOL_LAYERS):
        modules += 1
        allowed = TRANSPORT_PROBES_ALLOWED.get(where, set())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id in ("getattr", "hasattr") and node.args \
                    and "transport" in ast.unparse(node.args[0]).lower():
                probe = ast.unparse(node)
                if probe in allowed:
                    allowed_used.add((where, probe))
                else:
                    found.append(f"{where}:{node.lineno} {probe}")
    assert modules > 20, f"the rule sees too few modules ({modules}): was the tree moved?"
    assert found == [], "use the transport's contract:\n" + "\n".join(found)
    listed = {(m, p) for m, ps in TRANSPORT_PROBES_ALLOWED.items() for p in ps}
    assert allowed_used == listed, f"unused exceptions: {sorted(listed - allowed_used)}"


def _protocol_branches(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, comparison) of every comparison with an AMQP version name, or of a
    ``.protocol`` attribute with a string."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        strings = [c.value for o in operands
                   for c in ([o] if isinstance(o, ast.Constant) else
                             o.elts if isinstance(o, ast.Tuple | ast.List | ast.Set) else [])
                   if isinstance(c, ast.Constant) and isinstance(c.value, str)]
        on_protocol = any(isinstance(o, ast.Attribute) and o.attr == "protocol"
                          for o in operands)
        if PROTOCOL_NAMES.intersection(strings) or (on_protocol and strings):
            yield node.lineno, ast.unparse(node)


def test_no_protocol_string_branches_outside_transport() -> None:
    """Only transport/ tells AMQP versions apart by name; every other layer branches on
    what a transport declares (``Capabilities``: ``qmf_v2``, ``server_selectors`` ...),
    so a third transport needs no change above it."""
    outside = tuple(f"qmf_async.{p}" for p in LAYER_PACKAGES
                    if p not in ("transport",))
    found = [f"{where}:{line} {text}" for where, tree in _trees(outside)
             for line, text in _protocol_branches(tree)]
    assert found == [], "branch on the transport's capabilities:\n" + "\n".join(found)
    # the rule sees a branch where there is one
    sample = ast.parse('if broker.protocol == "1.0" and x in ("0-9-1", "z"): pass')
    assert len(list(_protocol_branches(sample))) == 2


def _private_imports(name: str, tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, what) of every import by module ``name`` (parsed as ``tree``) of a
    ``_private`` module or name of ``qmf_async`` outside its own package directory,
    by statement or by ``importlib.import_module`` with a literal name."""
    home = name if _is_package(name) else name.rpartition(".")[0]
    imported = list(_imports(name, tree))
    imported += [(node.lineno, str(node.args[0].value), [])
                 for node in ast.walk(tree)
                 if isinstance(node, ast.Call)
                 and ast.unparse(node.func).endswith("import_module") and node.args
                 and isinstance(node.args[0], ast.Constant)
                 and str(node.args[0].value).startswith("qmf_async")]
    for line, mod, names in imported:
        if not mod.startswith("qmf_async") or mod == home:
            continue
        there = mod if mod in MODULES and _is_package(mod) else mod.rpartition(".")[0]
        if there == home:
            continue
        parts = [*mod.split("."), *names]
        if any(p.startswith("_") and p != "__version__" for p in parts):
            yield line, f"{mod} {names or ''}".rstrip()


def test_tools_import_no_private_module_of_another_package() -> None:
    """A module of tools/, exporter/ or classic/ imports the modules of another
    package by their public names only: no ``_private`` module or name outside its own
    package directory (tools/cli, tools/pipeline and tools are three), whether
    imported by statement or by ``importlib.import_module`` with a literal name."""
    offenders, seen = [], 0
    for name in MODULES:
        if not _in_layers(name, TOOL_LAYERS):
            continue
        tree = ast.parse(MODULES[name].read_text(), str(MODULES[name]))
        seen += sum(1 for _ in _imports(name, tree))
        offenders += [f"{MODULES[name].relative_to(PACKAGE)}:{line} {what}"
                      for line, what in _private_imports(name, tree)]
    assert seen > 100, f"the rule sees too few imports ({seen}): was the tree moved?"
    assert offenders == [], "import the public names:\n" + "\n".join(offenders)
    # the rule sees a private import where there is one, and lets a package's own pass
    sample = ast.parse("from qmf_async.console._view import ObjectView\n"
                       "from ..console import _view\n"
                       "from ._common import ToolError\n"
                       "importlib.import_module('qmf_async.transport._auto')\n")
    assert [line for line, _ in _private_imports("qmf_async.tools.cli.shell", sample)] \
        == [1, 2, 4]


#: where another developer's package still spells a fact of names.py itself (to be taken
#: from names.py there): (package under qmf_async, the string).  An entry no longer
#: used must leave the list.
FACTS_SPELLED_ALLOWED = {
    ("agent", "UnknownMethod"), ("agent", "NotImplemented"),  # agent/_agent.py: Status
    ("agent", "console.heartbeat."),  # agent/_role.py: HEARTBEAT_KEY_PREFIX
    ("console", "console.obj."), ("console", "console.event."),  # bind_agent's keys
}


def test_the_bus_facts_are_defined_once() -> None:
    """The console queues' prefixes, qpidd's agent prefix, the v1 key prefixes, the
    schema broadcast keys, the v2 locate subject and the status texts are spelled in
    ``qmf_async/names.py`` only (see FACTS_SPELLED_ALLOWED)."""
    from qmf_async import names
    spelled = {names.CONSOLE_REPLY_PREFIX, names.CONSOLE_TOPIC_PREFIX,
               names.CONSOLE_V2_TOPIC_PREFIX, names.CONSOLE_LOSS_PREFIX,
               names.QPIDD_AGENT_PREFIX, names.LOCATE_SUBJECT, names.OBJECT_KEY_PREFIX,
               names.EVENT_KEY_PREFIX, names.HEARTBEAT_KEY_PREFIX, names.SCHEMA_PACKAGE_KEY,
               names.SCHEMA_CLASS_KEY, *(s.text for s in names.Status if s)}
    found, allowed_used = [], set()
    for name, path in MODULES.items():
        if name == "qmf_async.names":
            continue
        package = name.split(".")[1] if name.count(".") else ""
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and node.value in spelled:
                if (package, node.value) in FACTS_SPELLED_ALLOWED:
                    allowed_used.add((package, node.value))
                else:
                    found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} "
                                 f"{node.value!r}")
    assert found == [], "use qmf_async.names instead:\n" + "\n".join(found)
    assert allowed_used == FACTS_SPELLED_ALLOWED, \
        f"unused exceptions: {sorted(FACTS_SPELLED_ALLOWED - allowed_used)}"


#: the longest a module of the agent may be (issue 37: readable in one sitting)
AGENT_MODULE_LINES = 800
#: the longest a module of the console or the transport may be (issue 37, as the agent's)
MODULE_LINES = {"console": 800, "transport": 800}


@pytest.mark.parametrize("package", sorted(MODULE_LINES))
def test_console_and_transport_modules_stay_readable(package: str) -> None:
    """No module of ``qmf_async.console`` or ``qmf_async.transport`` is over 800 lines
    (issue 37's Done-when): a module that grows past it gives a responsibility away
    (as the broker gave its QMF version turn to ``_versions.py``)."""
    limit = MODULE_LINES[package]
    paths = sorted((PACKAGE / package).glob("*.py"))
    assert len(paths) >= 5, f"the rule sees too few modules of {package}"
    long = [f"{path.name}: {lines} lines (at most {limit})" for path in paths
            if (lines := len(path.read_text().splitlines())) > limit]
    assert long == [], f"modules of {package} too long:\n" + "\n".join(long)
#: where an agent module reads another object's private attributes, deliberately: a
#: module-level function of ``_objects.py`` is ManagedObject's own implementation
AGENT_PRIVATE_ACCESS_ALLOWED = {"_objects.py": {"rename_references", "snapshots"}}


def test_the_agent_is_held_to_the_console_rules() -> None:
    """``qmf_async.agent`` (issue 37): every module at most 800 lines; the transport
    read through its contract (no ``getattr``/``hasattr`` probing of a transport, no
    protocol names compared: ``capabilities`` says what a transport can do); no
    private name imported from another module; a private attribute read on ``self``
    or ``cls`` only (the agent's parts are objects with explicit collaborators, not
    mixins sharing one ``self``); one send path: nothing in the agent publishes on a
    transport or keeps a send queue of its own (the peer runtime's queue takes v1 and
    v2 alike)."""
    agent = PACKAGE / "agent"
    paths = sorted(agent.glob("*.py"))
    assert len(paths) >= 8, "the rule sees no agent: was it moved?"
    found, own, allowed_used = [], 0, set()
    for path in paths:
        text = path.read_text()
        lines = text.count("\n")
        if lines > AGENT_MODULE_LINES:
            found.append(f"{path.name}: {lines} lines (at most {AGENT_MODULE_LINES})")
        tree = ast.parse(text, str(path))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                           ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)
                      and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            where = f"{path.name}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id in ("getattr", "hasattr") and node.args \
                    and "transport" in ast.unparse(node.args[0]).lower():
                found.append(f"{where} probes a transport: {ast.unparse(node)}")
            elif isinstance(node, ast.Constant) and id(node) not in docstrings \
                    and node.value in ("0-9-1", "1.0", "0-10", "amqp1.0"):
                found.append(f"{where} names a protocol: {node.value!r}")
            elif isinstance(node, ast.Compare) and any(
                    isinstance(side, ast.Attribute) and side.attr == "protocol"
                    for side in (node.left, *node.comparators)):
                found.append(f"{where} branches on a protocol: {ast.unparse(node)}")
            elif isinstance(node, ast.ImportFrom) and node.level:
                found += [f"{where} imports private {node.module}.{a.name}"
                          for a in node.names if a.name.startswith("_")]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "publish":
                found.append(f"{where} publishes itself: {ast.unparse(node.func)}")
            elif isinstance(node, ast.Call) and ast.unparse(node.func) in (
                    "asyncio.Queue", "Queue"):
                found.append(f"{where} keeps a queue: {ast.unparse(node)}")
        allowed = AGENT_PRIVATE_ACCESS_ALLOWED.get(path.name, set())
        for scope, line, expr, on_self in _private_accesses(path):
            if on_self:
                own += 1
            elif scope in allowed:
                allowed_used.add((path.name, scope))
            else:
                found.append(f"{path.name}:{line} reads another object's {expr}")
    assert own > 200, f"the rule sees too few self._x accesses ({own}): is the tree empty?"
    assert found == [], "\n".join(found)
    listed = {(m, f) for m, fs in AGENT_PRIVATE_ACCESS_ALLOWED.items() for f in fs}
    assert allowed_used == listed, f"unused exceptions: {sorted(listed - allowed_used)}"


#: the calls that arm a timer or wait under one
_TIMERS = ("wait_for", "call_later", "call_at", "wait", "timeout", "timeout_at")


def test_the_console_times_out_in_one_place() -> None:
    """Every timer of ``qmf_async.console`` is in ``_waits.py`` (the request
    primitive's shared deadlines, ``within``, ``later``): at most 4 sites, and none
    elsewhere (issue 37: one timeout mechanism)."""
    sites: dict[str, list[str]] = {}
    for path in sorted((PACKAGE / "console").glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in _TIMERS):
                continue
            receiver = ast.unparse(node.func.value)
            if node.func.attr in ("wait", "timeout", "timeout_at") and receiver != "asyncio":
                continue  # an Event's wait, ...
            sites.setdefault(path.name, []).append(f"{path.name}:{node.lineno} "
                                                   f"{receiver}.{node.func.attr}")
    assert list(sites) == ["_waits.py"], "time out through console/_waits.py:\n" + \
        "\n".join(s for name, found in sites.items() if name != "_waits.py" for s in found)
    assert 1 <= len(sites["_waits.py"]) <= 4, sites


def test_the_console_keeps_no_process_wide_cache() -> None:
    """No module of ``qmf_async.console`` starts an empty mutable container at module
    level (a cache shared by every session of the process, as ``_METHOD_ROUTES`` and
    ``_PROXY_CLASSES`` were): a session's caches are its own (issue 37)."""
    offenders = []
    for path in sorted((PACKAGE / "console").glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in tree.body:
            value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
            empty = (isinstance(value, ast.Dict | ast.List | ast.Set) and not (
                        value.keys if isinstance(value, ast.Dict) else value.elts)) or (
                isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
                and value.func.id in ("dict", "list", "set", "OrderedDict")
                and not value.args)
            if empty:
                offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == [], "per-session state, not module-level caches:\n" + \
        "\n".join(offenders)


#: the console modules below the session: a Broker (one connection) and the parts it
#: holds (its v1 events, agent list, schema fetches, method calls, waits, qpidd's fast
#: path, the v2 link and its parts)
BROKER_LEVEL_MODULES = ("_broker.py", "_v1events.py", "_agentlist.py", "_schemas.py",
                        "_calls.py", "_waits.py", "_v1route.py", "_v2.py", "_v2parts.py",
                        "_v2bindings.py")


def _methods(path: Path, *, coroutines: bool | None = None,
             classes: set[str] | None = None) -> set[str]:
    """The public method names of the classes of the module at ``path`` (``classes``:
    of these only; ``coroutines``: only coroutine methods, or only plain ones)."""
    tree = ast.parse(path.read_text(), str(path))
    kinds = {None: (ast.AsyncFunctionDef, ast.FunctionDef), True: (ast.AsyncFunctionDef,),
             False: (ast.FunctionDef,)}[coroutines]
    return {f.name for c in tree.body if isinstance(c, ast.ClassDef)
            and (classes is None or c.name in classes)
            for f in c.body if isinstance(f, kinds) and not f.name.startswith("_")}


def _session_requests() -> tuple[set[str], set[str]]:
    """The requests of the session's public API: the public coroutine methods of
    ``Session`` (``get_packages``, ``get_objects``, ``add_broker`` ...) less the names
    a broker-level class defines for itself (``connect``, ``close``); and among them
    the names of plain methods of the proxies and agents a broker holds (``_objects``,
    ``_values``: ``QmfObject.get_schema``), a session request only when awaited."""
    console = PACKAGE / "console"
    public = _methods(console / "_session.py", coroutines=True, classes={"Session"})
    for name in BROKER_LEVEL_MODULES:
        public -= _methods(console / name)
    plain = set()
    for name in ("_objects.py", "_values.py"):
        plain |= _methods(console / name, coroutines=False) & public
    return public, plain


def test_the_broker_level_never_calls_up_into_the_session() -> None:
    """A get_objects walks down (session, broker, transport) and back up (delivery,
    broker dispatch, the query's sink) once (issue 37): no broker-level module of
    console/ (BROKER_LEVEL_MODULES) calls a request of the session's public API
    (``session.get_packages()``, ``get_classes``, ``get_schema``, ``get_objects`` ...,
    whatever the receiver is called), and ``SessionSettings``, the session as a broker
    sees it, declares none of them (a name a proxy also has, ``QmfObject.get_schema``,
    counts when awaited): a broker fetches what it needs (classes, schemas)
    through its own connection, and tells its session what arrived through its
    ``SessionHost`` handlers.  tests/test_get_objects_walk.py traces the walks."""
    requests, plain = _session_requests()
    assert {"get_packages", "get_classes", "get_schema", "get_objects"} <= requests
    found, calls = [], 0
    for name in BROKER_LEVEL_MODULES:
        path = PACKAGE / "console" / name
        tree = ast.parse(path.read_text(), str(path))
        awaited = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Await)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                calls += 1
                if node.func.attr in requests and (node.func.attr not in plain
                                                   or id(node) in awaited):
                    found.append(f"{name}:{node.lineno} {ast.unparse(node.func)}")
    assert calls > 500, f"the rule sees too few calls ({calls}): is the tree empty?"
    links = ast.parse((PACKAGE / "console" / "_links.py").read_text())
    for cls in (c for c in links.body if isinstance(c, ast.ClassDef)
                and c.name == "SessionSettings"):
        found += [f"_links.py:{f.lineno} SessionSettings.{f.name}" for f in cls.body
                  if isinstance(f, ast.AsyncFunctionDef | ast.FunctionDef)
                  and f.name in requests]
    assert found == [], "calls up into the session from below it:\n" + "\n".join(found)


#: what a broker received and hands its session as values (console/_sessionevents.py,
#: returned by ``Broker.dispatch``), no longer through a ``SessionHost`` handler each
_HANDED_UP_AS_VALUES = {"package_seen", "class_seen", "schema_seen", "agent_arrived",
                        "agent_left", "object_update", "event"}
#: what the broker level may still call on its owner: the connection's own happenings
#: (callbacks by name, its state, its loss), the bindings asked for, and whether anybody
#: takes objects or events (reads)
#: what a v2 link told its broker by calls up (``V2Host``) before it was given the agent
#: list and the version choice as collaborators
_V2_LINK_CALLS_UP = {"v2_agent_arrived", "v2_agent_left", "v2_beat"}
_OWNER_CALLS_LEFT = {"notify", "state_changed", "connection_lost", "v2_bindings_for",
                     "binding_keys", "follows_objects", "follows_events"}


def test_a_broker_hands_what_it_received_up_as_values() -> None:
    """Issue 37, data up: a broker's dispatch returns what a delivery brings its session
    (h11's ``next_event``): ``Broker.dispatch`` returns session-level values, the
    ``SessionHost`` (what a broker may call on its session) has one ``act`` for them
    and no handler per happening, and no broker-level module calls a handler of its
    owner but the connection-level ones (``_OWNER_CALLS_LEFT``); a v2 link's agents go
    to the agent list it is given, not up through its ``V2Host``.  On 14c7ffc the
    ``SessionHost`` listed ``object_update``, ``event``, ``agent_arrived`` ... and the
    v1 and v2 handlers called them."""
    console = PACKAGE / "console"
    hosts = []
    for path in sorted(console.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        hosts += [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "SessionHost"]
    [host] = hosts
    fields = {s.target.id for s in host.body
              if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    assert "act" in fields and "session" in fields
    assert fields & _HANDED_UP_AS_VALUES == set(), "SessionHost still hands these up by calls"
    broker = ast.parse((console / "_broker.py").read_text())
    [cls] = [n for n in broker.body if isinstance(n, ast.ClassDef) and n.name == "Broker"]
    [dispatch] = [f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "dispatch"]
    assert dispatch.returns is not None and "SessionEvent" in ast.unparse(dispatch.returns)
    found = []
    for name in (*BROKER_LEVEL_MODULES, "_versions.py"):
        tree = ast.parse((console / name).read_text(), name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = node.func.value
                if isinstance(owner, ast.Attribute) and owner.attr == "owner" \
                        and node.func.attr not in _OWNER_CALLS_LEFT:
                    found.append(f"{name}:{node.lineno} {ast.unparse(node.func)}")
            # the owner's protocols declare no handler of what is handed up as values
            if isinstance(node, ast.ClassDef) and node.name.endswith(("Owner", "Host")):
                found += [f"{name}:{f.lineno} {node.name}.{f.name}" for f in node.body
                          if isinstance(f, ast.FunctionDef)
                          and f.name in _HANDED_UP_AS_VALUES | _V2_LINK_CALLS_UP | {"notify"}]
    assert found == [], "calls up into the session instead of values:\n" + "\n".join(found)
