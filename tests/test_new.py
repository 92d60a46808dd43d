"""`kata new` and `kata bugs`: what is written, where, never over a learner's work, and without torch."""
from __future__ import annotations

import ast
import base64
import difflib
import io
import json
import subprocess
import sys
import tokenize
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import asdict

from click.testing import CliRunner
from conftest import REFERENCES, ROOT, WORKERS, check, failed_probes

from katas.bugs import BUGS
from katas.catalogue import difficulty_shown, measured
from katas.cli import main
from katas.interview.names import DESCRIPTIONS
from katas.making import regenerate
from katas.workspace import metadata_path, read_metadata

SHIPPED = ROOT / "broken"
SAMPLES = ROOT / "tests" / "engine_samples"


def kata(*args: str):
    """The command as a user runs it, its errors on one line (tests/test_widths.py checks how they wrap)."""
    return CliRunner().invoke(main, list(args), env={"COLUMNS": "400"})


def comments(source: str) -> list[str]:
    return [t.string for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT]


def docstrings(source: str) -> list[str]:
    nodes = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return [doc for node in ast.walk(ast.parse(source)) if isinstance(node, nodes) and (doc := ast.get_docstring(node))]


def completions(line: str) -> list[str]:
    """What the shell would offer for the last word of ``line`` (bash)."""
    env = {"_KATA_COMPLETE": "bash_complete", "COMP_WORDS": line, "COMP_CWORD": str(len(line.split()) - 1)}
    result = CliRunner().invoke(main, [], prog_name="kata", env=env)
    return [row.split(",", 1)[1] for row in result.output.splitlines()]


def test_new_writes_the_next_number_and_says_what_you_would_observe(tmp_path):
    first = kata("new", "--bug", "leak", "--seed", "1", "--no-verify", "--dir", str(tmp_path))
    second = kata("new", "--bug", "leak", "--seed", "1", "--no-verify", "--dir", str(tmp_path))
    assert first.exit_code == second.exit_code == 0, first.output
    assert sorted(p.name for p in tmp_path.glob("*.py")) == ["01.py", "02.py"]
    text = " ".join(second.output.split())
    assert f"Typically (not measured on this script): {BUGS['leak'].observe}" in text  # measured: test_observation
    assert f"kata check {tmp_path / '02.py'}" in text
    assert (tmp_path / "01.py").read_bytes() == (tmp_path / "02.py").read_bytes()


def test_same_inputs_and_seed_give_byte_identical_files(tmp_path):
    for folder in ("a", "b"):
        assert kata("new", "--seed", "42", "--no-verify", "--dir", str(tmp_path / folder)).exit_code == 0
    assert (tmp_path / "a" / "01.py").read_bytes() == (tmp_path / "b" / "01.py").read_bytes()
    assert metadata_path(tmp_path / "a" / "01.py").read_bytes() == metadata_path(tmp_path / "b" / "01.py").read_bytes()


def test_different_seeds_pick_different_katas(tmp_path):
    for seed in range(4):
        assert kata("new", "--seed", str(seed), "--no-verify", "--dir", str(tmp_path)).exit_code == 0
    assert len({read_metadata(p).bug for p in tmp_path.glob("*.py")}) >= 3


def test_a_random_bug_is_not_revealed(tmp_path):
    result = kata("new", "--seed", "3", "--no-verify", "--dir", str(tmp_path))
    info = read_metadata(tmp_path / "01.py")
    bug = BUGS[info.bug]
    assert bug.id not in result.output and bug.title not in result.output
    assert bug.id not in metadata_path(tmp_path / "01.py").read_text()


def test_a_kata_is_disguised_so_nothing_gives_the_bug_away_unless_plain(tmp_path):
    reference = (REFERENCES / "binary.py").read_text()
    assert kata("new", "--bug", "log0", "--seed", "1", "--no-verify", "--dir", str(tmp_path)).exit_code == 0
    text = (tmp_path / "01.py").read_text()
    assert len(docstrings(reference)) > 3 and docstrings(text)[0] in DESCRIPTIONS["binary"] and len(docstrings(text)) == 1
    assert "log(0)" in reference and "log(0)" not in text
    changed = [line for line in difflib.unified_diff(reference.splitlines(), text.splitlines(), n=0, lineterm="")
               if line.startswith(("+", "-"))]
    assert len(changed) > 50  # renamed, reordered: a diff points at everything, not at the bug
    assert kata("new", "--bug", "log0", "--seed", "1", "--plain", "--no-verify", "--dir", str(tmp_path)).exit_code == 0
    assert docstrings((tmp_path / "02.py").read_text()) == docstrings(reference)
    assert read_metadata(tmp_path / "02.py").plain and not read_metadata(tmp_path / "01.py").plain
    assert "comments and docstrings included" in " ".join(kata("new", "--help").output.split())


def test_the_answer_key_is_sealed_and_format_1_still_reads(tmp_path):
    assert kata("new", "--bug", "leak", "--seed", "1", "--plain", "--no-verify", "--dir", str(tmp_path)).exit_code == 0
    path = tmp_path / "01.py"
    doc = json.loads(metadata_path(path).read_text())
    assert doc["format"] == 2 and doc["reference"] == "classifier" and doc["seed"] == 1 and doc["plain"] is True
    assert "bug" not in doc and "site" not in doc and b"leak" not in base64.b64decode(doc["sealed"])
    info = read_metadata(path)
    assert info.bug == "leak" and info.site.startswith("leak:")
    old = {k: v for k, v in asdict(info).items() if k != "plain"}  # before format 2, every kata was plain
    metadata_path(path).write_text(json.dumps({"format": 1, "kata": base64.b64encode(json.dumps(old).encode()).decode()}))
    assert read_metadata(path) == info
    original = path.read_text()
    path.write_text("my attempt\n")
    assert kata("reset", str(path), "--yes").exit_code == 0 and path.read_text() == original


def test_bug_and_reference_options_complete_in_the_shell():
    assert completions("kata new --bug tr") == ["train-mode"]
    assert completions("kata new --ref b") == ["binary"]


def test_an_existing_file_is_never_overwritten_without_force(tmp_path):
    (tmp_path / "01.py").write_text("my work\n")
    refused = kata("new", "--bug", "leak", "--number", "1", "--no-verify", "--dir", str(tmp_path))
    assert refused.exit_code == 2 and "--force" in refused.output
    assert (tmp_path / "01.py").read_text() == "my work\n"
    forced = kata("new", "--bug", "leak", "--number", "1", "--force", "--no-verify", "--dir", str(tmp_path))
    assert forced.exit_code == 0
    backups = list((tmp_path / ".kata" / "backup").glob("01.*.py"))
    assert [b.read_text() for b in backups] == ["my work\n"]
    assert "my work" not in (tmp_path / "01.py").read_text()


def test_mistyped_bug_and_reference_get_a_suggestion(tmp_path):
    result = kata("new", "--bug", "zerograd", "--dir", str(tmp_path))
    assert result.exit_code == 2 and "Did you mean `zero-grad`?" in result.output and "clip-order" in result.output
    result = kata("new", "--ref", "clasifier", "--dir", str(tmp_path))
    assert result.exit_code == 2 and "Did you mean `classifier`?" in result.output
    assert not list(tmp_path.glob("*.py"))


def test_a_bug_that_does_not_apply_exits_2_and_says_why(tmp_path):
    result = kata("new", "--bug", "scheduler", "--ref", "binary", "--dir", str(tmp_path))
    assert result.exit_code == 2
    assert "`scheduler` does not apply to binary.py: it has no learning-rate scheduler" in result.output


def test_a_script_without_a_training_loop_is_told_so_in_one_line(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch\n\nprint(torch.ones(2).sum())\n")
    result = kata("new", "--from", str(script), "--dir", str(tmp_path / "out"))
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        "Error: no training loop found in train.py: a bug is planted into a training script, with a for or while loop "
        "whose steps call .backward() (in the loop, or in a function of the script it calls)"]
    assert not (tmp_path / "out").exists()


def test_when_no_bug_fits_a_training_loop_each_bug_says_what_it_lacks(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch\n\nw = torch.ones(2, requires_grad=True)\nfor _ in range(3):\n"
                      "    (w * 2).sum().backward()\n")
    result = kata("new", "--from", str(script), "--dir", str(tmp_path / "out"))
    assert result.exit_code == 2 and "no bug applies to train.py:" in result.output
    lines = result.output.splitlines()
    for bug in BUGS.values():
        assert any(line.split() == [bug.id, *bug.operator.no_site.split()] for line in lines), bug.id
    assert not (tmp_path / "out").exists()


def test_from_plants_a_bug_in_the_users_own_script(tmp_path):
    script = ROOT / "tests" / "fixtures" / "general__trainer_class.py"
    result = kata("new", "--from", str(script), "--bug", "eval-mode", "--plain", "--dir", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert "self.net.eval()" in script.read_text() and "self.net.eval()" not in (tmp_path / "01.py").read_text()
    assert comments((tmp_path / "01.py").read_text()) == comments(script.read_text())
    assert read_metadata(tmp_path / "01.py").reference == str(script)


RAW_UNITS = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)  # the model's initialisation too: a script whose verdict is the same on every run
g = torch.Generator().manual_seed(0)
x = torch.randn(512, 8, generator=g)
y = (x[:, 0] + x[:, 1] > 0).long()
data = TensorDataset(300 + 80 * x, y)  # readings in raw sensor units, fed as they are
loader = DataLoader(data, batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(0))
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
for epoch in range(4):
    model.train()
    for xb, yb in loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.3f}")
"""


def test_a_kata_from_your_own_script_is_not_held_to_what_the_script_showed_before(tmp_path):
    """Your script already feeds raw units (input-scale fails before any bug): the kata planted in it is solved
    by fixing its bug, with the script's own symptom named as already there; a mask still leaves it unsolved."""
    script = tmp_path / "mine.py"
    script.write_text(RAW_UNITS)
    made = kata("new", "--from", str(script), "--bug", "zero-grad", "--plain", "--dir", str(tmp_path / "k"))
    assert made.exit_code == 0, made.output
    kata_script = tmp_path / "k" / "01.py"
    assert read_metadata(kata_script).baseline == ("health: initial loss", "input-scale")
    said = " ".join(made.output.split("What you would observe", 1)[1].split("Find the cause", 1)[0].split())
    assert '"loss"' in said and "acc" not in said.lower(), said  # it prints a loss, and no accuracy
    broken = json.loads(kata("check", "--json", str(kata_script)).output)
    assert broken["exit_code"] == 1
    kata_script.write_text(RAW_UNITS.replace("        optimizer.zero_grad()\n", "").replace(
        "        optimizer.step()", "        optimizer.step()\n        optimizer.zero_grad(set_to_none=False)"))
    fixed = kata("check", "--json", str(kata_script))
    report = json.loads(fixed.output)
    assert (fixed.exit_code, report["kata"]["injected_bug"]) == (0, "fixed"), report["problem"]
    assert "already in the script before the bug was planted" in report["problem"]
    kata_script.write_text(RAW_UNITS.replace("        optimizer.zero_grad()\n", "").replace(
        "for xb, yb in loader:", "for xb, yb in loader:\n        optimizer.state.clear()"))
    assert kata("check", str(kata_script)).exit_code == 1


def test_from_keeps_your_text_where_the_disguise_hides_the_bugs_site(tmp_path):
    """The fixture's epsilon is known by its name, EPS, which the disguise renames."""
    script = ROOT / "tests" / "fixtures" / "non_finite__fix_eps.py"
    result = kata("new", "--from", str(script), "--bug", "log0", "--seed", "1", "--no-verify", "--dir", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert "Kept non_finite__fix_eps.py's own text: disguising it hid where the bug goes." in result.output
    assert read_metadata(tmp_path / "01.py").plain


def test_from_a_file_with_a_syntax_error_shows_pythons_own_report_as_kata_check_does(tmp_path):
    bad = tmp_path / "notes.py"
    bad.write_text("import torch\n\nfor x in range(3)\n    print(x)\n")
    result = kata("new", "--from", str(bad), "--dir", str(tmp_path / "out"))
    assert result.exit_code == 2
    checked = kata("check", str(bad))
    said = f'  File "{bad}", line 3\n    for x in range(3)\n                     ^\nSyntaxError: expected \':\'\n'
    assert result.stderr.startswith(said) and checked.stderr.startswith(said)
    assert result.stderr.endswith(f"Error: {bad}, line 3: syntax error (expected ':')\n")
    assert "ParserSyntaxError" not in result.output and not (tmp_path / "out").exists()


def test_new_never_imports_torch(tmp_path):
    """Not even to run the kata and the correct script (binary: the quickest reference to run)."""
    code = ("import sys\nfrom katas.cli import main\n"
            f"try:\n    main(['new', '--seed', '5', '--ref', 'binary', '--dir', {str(tmp_path)!r}])\nexcept SystemExit:\n"
            "    pass\n"
            "print('torch imported:', 'torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert "torch imported: False" in out.stdout and "under kata check" in out.stderr, out.stderr
    assert (tmp_path / "01.py").exists()


def test_concurrent_new_calls_get_distinct_numbers(tmp_path):
    command = [sys.executable, "-m", "katas", "new", "--seed", "1", "--bug", "leak", "--plain", "--no-verify", "--dir",
               str(tmp_path)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda _: subprocess.run(command, capture_output=True, timeout=120), range(8)))
    assert [r.returncode for r in results] == [0] * 8
    assert sorted(p.name for p in tmp_path.glob("*.py")) == [f"{n:02d}.py" for n in range(1, 9)]
    assert not list(tmp_path.glob(".new-*"))


def test_bugs_lists_the_catalogue_with_the_references_each_applies_to():
    doc = json.loads(kata("bugs", "--json").output)
    rows = {row["id"]: row for row in doc["bugs"]}
    assert list(rows) == list(BUGS)
    assert rows["log0"]["references"] == ["binary"]
    assert rows["scheduler"]["references"] == ["classifier", "lm", "text"]
    assert rows["leak"]["probes"] == ["graphs-retained"]
    # Difficulties as measured on the references: zero-grad's output looks normal on the classifier (not easy there)
    zero_grad = measured()["bugs"]["zero-grad"]
    assert rows["zero-grad"]["difficulties"] == {ref: entry["difficulty"] for ref, entry in zero_grad.items()}
    assert rows["zero-grad"]["difficulties"]["classifier"] != "easy" and rows["no-step"]["difficulty"] == "easy"
    table = CliRunner().invoke(main, ["bugs"], env={"COLUMNS": "200"}).output  # wide enough for one line a bug
    assert "kata new --bug ID" in table
    assert difficulty_shown(BUGS["zero-grad"]) in next(line for line in table.splitlines() if line.startswith("zero-grad "))


def test_shipped_examples_regenerate_byte_identically():
    """Through what `kata reset` uses; each is disguised (with its own seed, so two katas' diff shows neither bug)."""
    katas = sorted(SHIPPED.glob("*.py"))
    assert len(katas) == len(BUGS)
    infos = [read_metadata(p) for p in katas]
    assert {info.bug for info in infos} == set(BUGS)
    assert len({info.seed for info in infos}) == len(katas) and not any(info.plain for info in infos)
    with ProcessPoolExecutor(max_workers=WORKERS) as pool:
        regenerated = list(pool.map(regenerate, infos))
    for path, info, (correct, broken) in zip(katas, infos, regenerated):
        assert broken == path.read_text() and correct != (REFERENCES / f"{info.reference}.py").read_text()


def test_check_reports_the_injected_bug(tmp_path):
    assert kata("new", "--bug", "eval-mode", "--seed", "1", "--no-verify", "--dir", str(tmp_path)).exit_code == 0
    kata_file = tmp_path / "01.py"
    still = json.loads(kata("check", "--json", str(kata_file)).output)
    assert still["kata"] == {"injected_bug": "still present"}
    kata_file.write_text((REFERENCES / "classifier.py").read_text())
    fixed = kata("check", str(kata_file))
    assert fixed.exit_code == 0 and "injected bug: fixed" in fixed.output


def test_from_refuses_a_bug_whose_symptom_the_check_cannot_see(tmp_path):
    script, before = SAMPLES / "clip_never_engages.py", sorted(SAMPLES.iterdir())
    result = kata("new", "--from", str(script), "--bug", "clip-order", "--seed", "0", "--dir", str(tmp_path))
    text = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert "`clip-order` was planted at 1 site of clip_never_engages.py but kata check could not see its symptom" in text
    assert "clip-order: advice" in text and "engaged at 0 of" in text
    assert not list(tmp_path.iterdir()) and sorted(SAMPLES.iterdir()) == before
    unchecked = kata("new", "--from", str(script), "--bug", "clip-order", "--no-verify", "--dir", str(tmp_path))
    assert unchecked.exit_code == 0 and "may not show its bug" in unchecked.output
    assert docstrings((tmp_path / "01.py").read_text()) == ["A PyTorch training script."]


def test_from_writes_a_kata_whose_bug_the_check_sees(tmp_path):
    """This script reads a variable by its name, which the disguise changes: the kata keeps the script's text."""
    script = tmp_path / "small_trainer.py"
    script.write_text((SAMPLES / "small_trainer.py").read_text().replace(
        "\nfor epoch", '\nprint(type(globals()["model"]).__name__)\n\nfor epoch'))
    result = kata("new", "--from", str(script), "--bug", "zero-grad", "--seed", "0", "--dir", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    assert "Kept small_trainer.py's own text: disguising it changed what it does." in result.output
    assert "(site 1 of 1)" in result.output and "Verified" in result.output
    assert read_metadata(tmp_path / "out" / "01.py").plain
    assert "grads-accumulate" in failed_probes(check(tmp_path / "out" / "01.py"))


NOISY_REWARD = """from pathlib import Path

import torch
import torch.nn.functional as F

runs = Path(COUNTER)  # how many times this script ran: its printed reward is never the same twice
run = int(runs.read_text()) + 1 if runs.exists() else 1
runs.write_text(str(run))
torch.manual_seed(0)
x = torch.randn(256, 8)
y = (x[:, 0] > 0).long()
model = torch.nn.Linear(8, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
for epoch in range(3):
    for i in range(0, 256, 32):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x[i:i + 32]), y[i:i + 32])
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.3f} reward {10.0 ** run:.1f}")
"""


def test_figures_that_vary_between_two_clean_runs_of_your_script_are_not_called_a_difference(tmp_path):
    """A learner's script prints a figure that is not the same from run to run (here: on purpose): once
    the kata's printed figures differ, the script runs once more without the bug, and only figures that repeat are
    compared; the one that does not is named with both clean runs' values."""
    script = tmp_path / "noisy.py"
    script.write_text(NOISY_REWARD.replace("COUNTER", repr(str(tmp_path / "runs"))))
    made = kata("new", "--from", str(script), "--bug", "no-step", "--plain", "--dir", str(tmp_path / "k"))
    assert made.exit_code == 0, made.output
    assert "printed figures repeat without the bug" in made.stderr
    said = " ".join(made.output.split("What you would observe", 1)[1].split("Find the cause", 1)[0].split())
    assert "(difficulty: easy)" in made.output and 'Its printed "loss" goes' in said, said
    assert 'Its printed "reward"' not in said and 'two runs of the script print different figures ("reward"' in said
    observed = read_metadata(tmp_path / "k" / "01.py").observed
    assert observed["shows"] == ["printed"] and "again" in observed["figures"]


FROM_SCRIPT = """\
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
x = torch.randn(600, 8)
y = (x[:, 0] + x[:, 1] > 0).long()
train_loader = DataLoader(TensorDataset(x[:400], y[:400]), batch_size=32, shuffle=True,
                          generator=torch.Generator().manual_seed(0))
val_loader = DataLoader(TensorDataset(x[400:], y[400:]), batch_size=100)
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)


def train_one_epoch(loader):
    model.train()
    for xb, yb in loader:
        loss = F.cross_entropy(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


@torch.no_grad()
def evaluate(loader):
    model.eval()
    correct = sum((model(xb).argmax(1) == yb).sum().item() for xb, yb in loader)
    return correct / len(loader.dataset)


for epoch in range(3):
    train_one_epoch(train_loader)
    print(f"epoch {epoch}  val acc {evaluate(val_loader):.3f}")
"""


def test_from_accepts_a_bug_whose_symptom_is_advice(tmp_path):
    """The training data as the only evaluation is advice, and that advice is val-on-train's symptom: the plant is
    verified, as a kata of a reference's is."""
    script = tmp_path / "train.py"
    script.write_text(FROM_SCRIPT)
    result = kata("new", "--from", str(script), "--bug", "val-on-train", "--seed", "0", "--dir", str(tmp_path / "k"))
    assert result.exit_code == 0, result.output
    *_, trains, prints = (tmp_path / "k" / "01.py").read_text().splitlines()  # disguised: names differ
    data = trains.strip().split("(")[1].rstrip(")")
    assert f"({data})" in prints and script.read_text() == FROM_SCRIPT
