"""Runner of the fuzz targets: ``python -m fuzz COMMAND TARGET ...`` from the repo root.

Commands::

    run TARGET [--runs N] [--max-len B] [--timeout S] [--rss-limit-mb MB]
               [--corpus DIR] [--work DIR] [LIBFUZZER_FLAG ...]
        Fuzz TARGET under atheris.  New inputs go to the work directory
        (fuzz/work/TARGET), the kept corpus (fuzz/corpus/TARGET) is read as a seed;
        crashes are written to fuzz/work/artifacts/.  Further ``-flag=value``
        arguments go to libFuzzer as they are (e.g. ``-seed=1``, ``-jobs=2``).
    seed TARGET [--out DIR]
        Write the target's seed inputs (real captures, encoder output, test texts)
        to DIR (fuzz/work/TARGET-seeds).
    merge TARGET [--set-cover] [DIR ...]
        Minimize the kept corpus with libFuzzer's -merge=1 (-set_cover_merge=1: the
        same features in fewer files): the inputs of fuzz/corpus/TARGET and of each
        DIR that add coverage become the new fuzz/corpus/TARGET.
    check [TARGET ...]
        Run every corpus and regression input once through the targets, without
        atheris (what tests/test_fuzz_corpus.py does).
    raw TARGET [LIBFUZZER_ARG ...]
        Hand the arguments to libFuzzer unchanged (used by libFuzzer itself for
        -merge and -fork child processes).
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

if __package__ in (None, ""):  # run as a file: make ``fuzz`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fuzz import CORPUS, REGRESSIONS, ROOT, TARGETS, WORK


def _target(name: str, instrument: bool) -> ModuleType:
    """Import a target; with ``instrument``, under atheris.instrument_imports() so that
    qmf_async (imported by the target for the first time here) is coverage-guided."""
    if name not in TARGETS:
        raise SystemExit(f"unknown target {name!r}; one of {', '.join(TARGETS)}")
    if not instrument:
        return importlib.import_module(f"fuzz.{name}")
    if "qmf_async" in sys.modules:
        raise SystemExit("qmf_async was imported before instrumentation")
    import atheris  # type: ignore[import-untyped]

    with atheris.instrument_imports(include=["qmf_async"]):
        return importlib.import_module(f"fuzz.{name}")


def _child_command(name: str) -> str:
    """argv[0] for libFuzzer: it runs its -merge/-fork children through the shell."""
    return f"{sys.executable} -m fuzz raw {name}"


def _libfuzzer(name: str, args: Sequence[str]) -> None:
    """Run libFuzzer on target ``name`` with ``args``; never returns."""
    root = str(ROOT.parent)
    path = os.environ.get("PYTHONPATH", "")
    if root not in path.split(os.pathsep):  # children must find ``fuzz`` and ``qmf_async``
        os.environ["PYTHONPATH"] = root + (os.pathsep + path if path else "")
    module = _target(name, instrument=True)
    import atheris

    one_input: Callable[[bytes], None] = module.one_input
    atheris.Setup([_child_command(name), *args], one_input)
    atheris.Fuzz()


def _flags(extra: Sequence[str]) -> list[str]:
    for arg in extra:
        if not arg.startswith("-") or "=" not in arg:
            raise SystemExit(f"not a libFuzzer flag (-name=value): {arg!r}")
    return list(extra)


def cmd_run(opts: argparse.Namespace, extra: list[str]) -> None:
    work = Path(opts.work or WORK / opts.target)
    corpus = Path(opts.corpus or CORPUS / opts.target)
    artifacts = WORK / "artifacts"
    for d in (work, artifacts):
        d.mkdir(parents=True, exist_ok=True)
    args = [str(work)]
    if corpus.is_dir():
        args.append(str(corpus))
    args += [f"-runs={opts.runs}", f"-max_len={opts.max_len}", f"-timeout={opts.timeout}",
             f"-rss_limit_mb={opts.rss_limit_mb}",
             f"-artifact_prefix={artifacts}/{opts.target}-", "-print_final_stats=1",
             *_flags(extra)]
    print(f"fuzz: {opts.target}: {' '.join(args)}", file=sys.stderr, flush=True)
    _libfuzzer(opts.target, args)


def cmd_seed(opts: argparse.Namespace) -> None:
    module = _target(opts.target, instrument=False)
    out = Path(opts.out or WORK / f"{opts.target}-seeds")
    out.mkdir(parents=True, exist_ok=True)
    seeds = module.seeds()
    for i, data in enumerate(seeds):
        (out / f"seed-{i:05d}").write_bytes(data)
    print(f"fuzz: {len(seeds)} seeds of {opts.target} in {out}")


def cmd_merge(opts: argparse.Namespace) -> None:
    corpus = CORPUS / opts.target
    merged = WORK / f"{opts.target}-merged-{os.getpid()}"
    merged.mkdir(parents=True)
    sources = [str(corpus)] if corpus.is_dir() else []
    sources += [str(Path(d)) for d in opts.dirs]
    pid = os.fork()
    if pid == 0:  # libFuzzer exits the process when the merge is done
        try:
            how = "-set_cover_merge=1" if opts.set_cover else "-merge=1"
            _libfuzzer(opts.target, [how, f"-max_len={opts.max_len}",
                                     f"-timeout={opts.timeout}", str(merged), *sources])
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        shutil.rmtree(merged)
        raise SystemExit(f"fuzz: the merge failed ({status}); the corpus is unchanged")
    if corpus.is_dir():
        shutil.rmtree(corpus)
    corpus.parent.mkdir(parents=True, exist_ok=True)
    merged.rename(corpus)
    files = list(corpus.iterdir())
    size = sum(f.stat().st_size for f in files)
    print(f"fuzz: {opts.target} corpus: {len(files)} files, {size} bytes")


def cmd_check(opts: argparse.Namespace) -> None:
    failed = 0
    for name in opts.targets or TARGETS:
        module = _target(name, instrument=False)
        files = sorted(p for d in (CORPUS / name, REGRESSIONS / name) if d.is_dir()
                       for p in d.iterdir())
        start = time.perf_counter()
        for path in files:
            try:
                module.one_input(path.read_bytes())
            except Exception as exc:
                failed += 1
                print(f"FAIL {name} {path}: {type(exc).__name__}: {exc}")
        print(f"{name}: {len(files)} inputs in {time.perf_counter() - start:.2f} s")
    if failed:
        raise SystemExit(f"{failed} inputs failed")


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["raw"]:
        if len(argv) < 2:
            raise SystemExit("usage: python -m fuzz raw TARGET [LIBFUZZER_ARG ...]")
        _libfuzzer(argv[1], argv[2:])
    parser = argparse.ArgumentParser(prog="python -m fuzz", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="fuzz a target under atheris")
    run.add_argument("target", choices=TARGETS)
    run.add_argument("--runs", type=int, default=1_000_000, help="inputs to run (-runs)")
    run.add_argument("--max-len", type=int, default=4096, help="longest input (-max_len)")
    run.add_argument("--timeout", type=int, default=10,
                     help="seconds one input may take before it is a hang (-timeout)")
    run.add_argument("--rss-limit-mb", type=int, default=2048,
                     help="memory limit of the process (-rss_limit_mb)")
    run.add_argument("--corpus", help="kept corpus read as seed (fuzz/corpus/TARGET)")
    run.add_argument("--work", help="directory new inputs go to (fuzz/work/TARGET)")
    seed = sub.add_parser("seed", help="write the target's seed inputs")
    seed.add_argument("target", choices=TARGETS)
    seed.add_argument("--out")
    merge = sub.add_parser("merge", help="minimize the kept corpus with -merge=1")
    merge.add_argument("target", choices=TARGETS)
    merge.add_argument("dirs", nargs="*", help="more inputs to consider")
    merge.add_argument("--max-len", type=int, default=1 << 20)
    merge.add_argument("--timeout", type=int, default=30)
    merge.add_argument("--set-cover", action="store_true",
                       help="-set_cover_merge=1: the same features in fewer files")
    check = sub.add_parser("check", help="run the corpus once, without atheris")
    check.add_argument("targets", nargs="*", choices=[*TARGETS, []])
    opts, extra = parser.parse_known_args(argv)
    if opts.command == "run":
        cmd_run(opts, extra)
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    elif opts.command == "seed":
        cmd_seed(opts)
    elif opts.command == "merge":
        cmd_merge(opts)
    else:
        cmd_check(opts)


if __name__ == "__main__":
    main()
