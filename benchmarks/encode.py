"""Encode throughput of content records (g, c, i) on the real qpidd 1.40 captures.

    python benchmarks/encode.py [--seconds 10] [--rounds 5] [--clock cpu|wall]
                                [--captures DIR]

The bodies carrying g/c/i records are decoded once (after every capture body went
through one SchemaRegistry); the benchmark then encodes the decoded records back,
one ``wire.encode`` call per original body, and checks that the bytes are the
captured ones.  Result: the best of ``--rounds`` timed rounds, in objects (records)
per second of process CPU time (``--clock wall`` for elapsed time).
"""

from __future__ import annotations

import argparse
from typing import Any

import _corpus
from _corpus import FAMILIES, wire


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    _corpus.add_common_args(ap)
    args = ap.parse_args(argv)

    registry, bodies = _corpus.load(args.captures)
    corpora = _corpus.by_family(registry, bodies)
    decoded = {fam: [wire.decode(b, registry) for b in corpus]
               for fam, corpus in corpora.items()}
    for fam, corpus in corpora.items():
        for body, msgs in zip(corpus, decoded[fam], strict=True):
            assert wire.encode(msgs, registry) == body, "re-encoding must be byte-exact"
    counts = {fam: sum(len(m) for m in msgs) for fam, msgs in decoded.items()}

    encode = wire.encode

    def run(batches: list[list[Any]]) -> Any:
        def go() -> None:
            for msgs in batches:
                encode(msgs, registry)
        return go

    per = args.seconds / (args.rounds * len(corpora))
    best: dict[str, float] = {}
    for _ in range(args.rounds):
        for fam in corpora:
            r = _corpus.rate(run(decoded[fam]), counts[fam], per, args.clock)
            best[fam] = max(best.get(fam, 0.0), r)

    print(f"machine: {_corpus.machine()}")
    print(f"corpus: {len(bodies)} bodies, {counts['all']} objects "
          f"({', '.join(f'{f} {counts[f]}' for f in FAMILIES)}); "
          f"best of {args.rounds} rounds of {per:.2f} s ({args.clock} clock)")
    print()
    print(f"{'family':<8}{'bodies':>8}{'objects':>9}{'encode obj/s':>16}")
    for fam in ("all", *FAMILIES):
        print(f"{fam:<8}{len(corpora[fam]):>8}{counts[fam]:>9}{best[fam]:>16,.0f}")


if __name__ == "__main__":
    main()
