"""`kata new --from` on every correct script of the corpus, with every bug: what it writes is what it says.

For each (script, bug) pair, runs `kata new --from SCRIPT --bug BUG --seed N`
in a scratch folder. A written kata is then checked with `kata check --json`:
its bug must be reported "still present" (never "fixed" or "cannot tell"). A
refusal must name the bug. Prints one row per pair and a summary; exits 1 on any
violation. Slow (real checks, each in a fresh process): run it before a release,
`python bench/new_from_corpus.py [--seed 0] [--jobs 2] [SCRIPT ...]`.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KATA = [sys.executable, "-m", "katas"]


def bug_ids() -> list[str]:
    out = subprocess.run([*KATA, "bugs", "--json"], capture_output=True, text=True, check=True).stdout
    return [b["id"] for b in json.loads(out)["bugs"]]


def one(script: Path, bug: str, seed: int) -> tuple[str, str, str, str]:
    """(script, bug, outcome, detail); outcome: planted | refused | VIOLATION."""
    with tempfile.TemporaryDirectory() as folder:
        new = subprocess.run([*KATA, "new", "--from", str(script), "--bug", bug, "--seed", str(seed), "--dir", folder],
                             capture_output=True, text=True, cwd=folder)
        if new.returncode != 0:
            reason = " ".join(new.stderr.split("Error: ")[-1].split())  # after the progress lines
            ok = new.returncode == 2 and f"`{bug}`" in reason
            return script.stem, bug, "refused" if ok else "VIOLATION", reason[:160]
        kata = Path(folder) / "01.py"
        check = subprocess.run([*KATA, "check", "--json", str(kata)], capture_output=True, text=True, cwd=folder)
        doc = json.loads(check.stdout)
        status = doc.get("kata", {}).get("injected_bug", "unknown")
        failed = sorted(p["probe"] for p in doc["probes"] if p["status"] in ("fail", "error"))
        return script.stem, bug, "planted" if status == "still present" else "VIOLATION", f"{status}; fails {failed}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scripts", nargs="*", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    scripts = args.scripts or sorted(p for p in (ROOT / "tests" / "corpus").glob("*.py") if "__" not in p.stem)
    pairs = [(s.resolve(), b) for s in scripts for b in bug_ids()]
    with ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(lambda pair: one(*pair, args.seed), pairs))
    for row in rows:
        print("  ".join([f"{row[0]:24}", f"{row[1]:12}", f"{row[2]:9}", row[3]]))
    counts = {o: sum(r[2] == o for r in rows) for o in ("planted", "refused", "VIOLATION")}
    print(f"\n{len(rows)} pairs: {counts['planted']} planted and verified, {counts['refused']} refused with the bug "
          f"named, {counts['VIOLATION']} violations")
    sys.exit(1 if counts["VIOLATION"] else 0)


if __name__ == "__main__":
    main()
