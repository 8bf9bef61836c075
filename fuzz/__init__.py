"""Coverage-guided fuzzing of qmf-async's decoders with atheris (libFuzzer).

Four targets, each a module with ``one_input(data: bytes) -> None`` that raises
nothing for any input but a defect (the project's typed errors are caught inside):

* ``v1`` -- a whole QMF v1 body decoded as the console and the agent do, and re-encoded;
* ``v2`` -- QMF v2 map messages through the AMQP 1.0 and AMQP 0-10 map codecs, and back;
* ``selector`` -- a JMS selector parsed, compiled and evaluated over maps;
* ``amqp10`` -- AMQP 1.0 frames through the frame decoder and the sans-I/O client
  connection of the native AMQP 1.0 transport.

The targets import without atheris (``tests/test_fuzz_corpus.py`` runs every corpus
file through them); ``python -m fuzz`` runs them under atheris (``pip install
qmf-async[fuzz]``).  This package imports nothing of ``qmf_async`` itself, so the
runner can import the targets, and with them ``qmf_async``, inside
``atheris.instrument_imports()``.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent
#: the kept, minimized corpus of each target (committed)
CORPUS = ROOT / "corpus"
#: inputs that once showed a defect, one directory per target (committed)
REGRESSIONS = ROOT / "regressions"
#: scratch space of fuzzing runs: grown corpora, seeds, crash artifacts (not committed)
WORK = ROOT / "work"
TARGETS = ("v1", "v2", "selector", "amqp10")
