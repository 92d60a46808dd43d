"""Are the checker's verdicts unchanged? Snapshot every report, or compare two snapshots.

`python bench/report_identity.py snapshot DIR` checks every reference, shipped kata, test fixture, corpus and
engine sample script (as the test suite does: through warm servers, a distributed script as two ranks) and
writes one JSON report per script into DIR. What a run cannot repeat is left out: the schema version, the
seconds, the log's path and the script's own printed output. `python bench/report_identity.py compare A B`
prints every script whose report differs and exits 1 if any does. Take a snapshot before a change and one
after it; scripts whose reports differ between two snapshots of the same commit are not deterministic, and
`compare` names them when given a third snapshot of the same commit as `--noise`.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("reference", "broken", "tests/fixtures", "tests/corpus", "tests/engine_samples", "tests/exotic")
UNREPEATABLE = ("schema", "seconds", "log", "output_tail", "output_truncated", "script")


def scripts() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).glob("*.py")
                  if not p.name.startswith(("_", "conftest")) and ".in." not in p.name and ".out." not in p.name)


def normalised(report: dict) -> dict:
    return {key: value for key, value in report.items() if key not in UNREPEATABLE}


def snapshot(folder: Path) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import check  # the suite's own way of checking a script

    folder.mkdir(parents=True, exist_ok=True)
    paths = scripts()

    def one(path: Path) -> None:
        report = check(path).to_json()
        name = str(path.relative_to(ROOT)).replace("/", "__") + ".json"
        text = json.dumps(normalised(report), indent=1, sort_keys=True).replace(str(ROOT), "<checkout>")
        (folder / name).write_text(text + "\n")

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        list(pool.map(one, paths))
    print(f"{len(paths)} reports in {folder}")


def compare(before: Path, after: Path, noise: Path | None) -> int:
    names = sorted({p.name for p in before.glob("*.json")} | {p.name for p in after.glob("*.json")})
    noisy = {n for n in names if noise and (noise / n).exists() and (before / n).exists()
             and (noise / n).read_text() != (before / n).read_text()}
    changed = []
    for name in names:
        a, b = before / name, after / name
        if not a.exists() or not b.exists():
            changed.append(f"{name}: only in {'after' if b.exists() else 'before'}")
        elif a.read_text() != b.read_text() and name not in noisy:
            changed.append(f"{name}: {differences(json.loads(a.read_text()), json.loads(b.read_text()))}")
    for line in changed:
        print(line)
    print(f"{len(names)} reports, {len(changed)} differ" + (f", {len(noisy)} not deterministic (left out): "
                                                            f"{', '.join(sorted(noisy))}" if noisy else ""))
    return 1 if changed else 0


def differences(a: dict, b: dict) -> str:
    keys = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    if keys == ["probes"]:
        pa, pb = {p.get("probe"): p for p in a["probes"]}, {p.get("probe"): p for p in b["probes"]}
        return "probes " + ", ".join(sorted(k for k in set(pa) | set(pb) if pa.get(k) != pb.get(k)))
    return ", ".join(keys)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("snapshot").add_argument("folder", type=Path)
    pair = commands.add_parser("compare")
    pair.add_argument("before", type=Path)
    pair.add_argument("after", type=Path)
    pair.add_argument("--noise", type=Path, help="a second snapshot of the 'before' commit")
    args = parser.parse_args()
    if args.command == "snapshot":
        snapshot(args.folder)
    else:
        sys.exit(compare(args.before, args.after, args.noise))


if __name__ == "__main__":
    main()
