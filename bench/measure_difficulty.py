"""Measure each bug's difficulty on each reference it applies to, and write katas/measured.json.

Plants each bug into each reference's own text at seed 0 (as `kata new --bug ID --ref NAME --plain --seed 0`
does, and tests/test_injected_bugs.py with its first seed), runs the planted script and the reference under the
checker (forked from warm servers, two at a time), and keeps what `kata new` makes of the two runs
(katas.observation.describe): the difficulty, what differs visibly from the correct run, and the words. `kata bugs`,
the catalogue pages and `kata interview --difficulty` read the difficulties; the tests compare them with fresh runs.
Run from the repository root: `python bench/measure_difficulty.py` (about a minute on 2 idle cores); `--bug ID`
measures one bug against the correct runs the file keeps (a reference the file lacks is run too) and merges it in.
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# As in the test suite that compares with this file: checks run side by side, one math thread each (more would starve
# one another, and the figures a script prints can differ in their last digit with the number of threads).
os.environ.setdefault("OMP_NUM_THREADS", "1")

from checker.runner import Limits, child_env  # noqa: E402
from checker.warm import WarmServer  # noqa: E402
from katas.bugs import BUGS  # noqa: E402
from katas.catalogue import LAUNCHED, MEASURED  # noqa: E402
from katas.commands.common import observe, references  # noqa: E402
from katas.engine.context import Context  # noqa: E402
from katas.engine.inject import inject, sites  # noqa: E402
from katas.observation import Measured, describe  # noqa: E402

SEED = 0
SCHEMA = "torch-katas/measured/1"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="checks side by side (default 2)")
    parser.add_argument("--out", type=Path, default=MEASURED)
    parser.add_argument("--bug", action="append", choices=sorted(BUGS), metavar="ID",
                        help="measure only this bug (repeatable), against the correct runs the file keeps, and merge "
                             "its entries into the file")
    args = parser.parse_args()
    started = time.monotonic()
    chosen = [BUGS[bug] for bug in args.bug] if args.bug else list(BUGS.values())
    cases = [(bug, name, path) for bug in chosen for name, path in references().items()
             if sites(bug, Context.of(path.read_text()))]
    kept = json.loads(args.out.read_text()) if args.bug else None
    servers: queue.Queue = queue.Queue()
    for _ in range(args.workers):
        servers.put(WarmServer(child_env()))
    limits = Limits(timeout=300, idle=30)

    def measure(name: str, source: str) -> Measured:
        server = servers.get()
        try:
            with tempfile.TemporaryDirectory(prefix="kata-measure-") as folder:
                script = Path(folder) / f"{name}.py"
                script.write_text(source)
                return Measured.of(observe(script, "cpu", limits, warm=server, nproc=LAUNCHED.get(name, 1)))
        finally:
            servers.put(server)

    fresh = [name for name in references() if not kept or name not in kept["references"]]  # a new reference too
    jobs = [(name, references()[name].read_text()) for name in fresh]
    jobs += [(name, inject(bug, path.read_text(), SEED, path.name).source) for bug, name, path in cases]
    try:
        with ThreadPoolExecutor(max_workers=args.workers) as pool:
            runs = list(pool.map(lambda job: measure(*job), jobs))
    finally:
        while not servers.empty():
            servers.get().close()
    if kept:
        correct = {name: Measured.from_json(entry) for name, entry in kept["references"].items()}
        correct.update(zip(fresh, runs))
        doc: dict = {**kept, "references": {name: m.to_json() for name, m in correct.items()},
                     "bugs": {bug: refs for bug, refs in kept["bugs"].items() if bug not in args.bug}}
    else:
        correct = dict(zip(references(), runs))
        doc = {"schema": SCHEMA, "seed": SEED, "references": {name: m.to_json() for name, m in correct.items()},
               "bugs": {}}
    for (bug, name, _), kata in zip(cases, runs[len(jobs) - len(cases):]):
        observation = describe(kata, correct[name], bug.difficulty)
        doc["bugs"].setdefault(bug.id, {})[name] = {"difficulty": observation.difficulty,
                                                    "shows": [s.value for s in observation.shows],
                                                    "lines": list(observation.lines)}
        print(f"{bug.id:<20} {name:<11} {bug.difficulty:<7} -> {observation.difficulty:<7} "
              f"{','.join(s.value for s in observation.shows) or '-'}")
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.out} ({len(cases)} katas, {time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
