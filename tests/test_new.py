"""`kata new` and `kata bugs`: what is written, where, never over a learner's work, and without torch."""
from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from click.testing import CliRunner
from conftest import REFERENCES, ROOT, check, failed_probes

from katas.bugs import BUGS
from katas.cli import main
from katas.engine.inject import inject
from katas.workspace import metadata_path, read_metadata

SHIPPED = ROOT / "broken"
SAMPLES = ROOT / "tests" / "engine_samples"


def kata(*args: str):
    return CliRunner().invoke(main, list(args))


def test_new_writes_the_next_number_and_says_what_you_would_observe(tmp_path):
    first = kata("new", "--bug", "leak", "--seed", "1", "--dir", str(tmp_path))
    second = kata("new", "--bug", "leak", "--seed", "1", "--dir", str(tmp_path))
    assert first.exit_code == second.exit_code == 0, first.output
    assert sorted(p.name for p in tmp_path.glob("*.py")) == ["01.py", "02.py"]
    text = " ".join(second.output.split())
    assert BUGS["leak"].observe in text
    assert f"kata check {tmp_path / '02.py'}" in text
    assert (tmp_path / "01.py").read_bytes() == (tmp_path / "02.py").read_bytes()


def test_same_inputs_and_seed_give_byte_identical_files(tmp_path):
    for folder in ("a", "b"):
        assert kata("new", "--seed", "42", "--dir", str(tmp_path / folder)).exit_code == 0
    assert (tmp_path / "a" / "01.py").read_bytes() == (tmp_path / "b" / "01.py").read_bytes()
    assert metadata_path(tmp_path / "a" / "01.py").read_bytes() == metadata_path(tmp_path / "b" / "01.py").read_bytes()


def test_different_seeds_pick_different_katas(tmp_path):
    for seed in range(8):
        assert kata("new", "--seed", str(seed), "--dir", str(tmp_path)).exit_code == 0
    assert len({read_metadata(p).bug for p in tmp_path.glob("*.py")}) >= 3


def test_a_random_bug_is_not_revealed(tmp_path):
    result = kata("new", "--seed", "3", "--dir", str(tmp_path))
    info = read_metadata(tmp_path / "01.py")
    bug = BUGS[info.bug]
    assert bug.id not in result.output and bug.title not in result.output
    assert bug.id not in metadata_path(tmp_path / "01.py").read_text()


def test_an_existing_file_is_never_overwritten_without_force(tmp_path):
    (tmp_path / "01.py").write_text("my work\n")
    refused = kata("new", "--bug", "leak", "--number", "1", "--dir", str(tmp_path))
    assert refused.exit_code == 2 and "--force" in refused.output
    assert (tmp_path / "01.py").read_text() == "my work\n"
    forced = kata("new", "--bug", "leak", "--number", "1", "--force", "--dir", str(tmp_path))
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


def test_from_plants_a_bug_in_the_users_own_script(tmp_path):
    script = ROOT / "tests" / "fixtures" / "general__trainer_class.py"
    result = kata("new", "--from", str(script), "--bug", "eval-mode", "--dir", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert "self.net.eval()" in script.read_text() and "self.net.eval()" not in (tmp_path / "01.py").read_text()
    assert read_metadata(tmp_path / "01.py").reference == str(script)


def test_from_a_file_that_is_not_python_is_a_clear_error(tmp_path):
    bad = tmp_path / "notes.py"
    bad.write_text("this is not ( python\n")
    result = kata("new", "--from", str(bad), "--dir", str(tmp_path / "out"))
    assert result.exit_code == 2 and "cannot read" in result.output


def test_new_never_imports_torch(tmp_path):
    code = ("import sys\nfrom katas.cli import main\n"
            f"try:\n    main(['new', '--seed', '5', '--dir', {str(tmp_path)!r}])\nexcept SystemExit:\n    pass\n"
            "print('torch imported:', 'torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "torch imported: False" in out.stdout, out.stderr
    assert (tmp_path / "01.py").exists()


def test_concurrent_new_calls_get_distinct_numbers(tmp_path):
    command = [sys.executable, "-m", "katas", "new", "--seed", "1", "--bug", "leak", "--dir", str(tmp_path)]
    with ThreadPoolExecutor(max_workers=20) as pool:
        results = list(pool.map(lambda _: subprocess.run(command, capture_output=True, timeout=120), range(20)))
    assert [r.returncode for r in results] == [0] * 20
    assert sorted(p.name for p in tmp_path.glob("*.py")) == [f"{n:02d}.py" for n in range(1, 21)]
    assert not list(tmp_path.glob(".new-*"))


def test_bugs_lists_the_catalogue_with_the_references_each_applies_to():
    doc = json.loads(kata("bugs", "--json").output)
    rows = {row["id"]: row for row in doc["bugs"]}
    assert list(rows) == list(BUGS)
    assert rows["log0"]["references"] == ["binary"]
    assert rows["scheduler"]["references"] == ["classifier"]
    assert rows["leak"]["probes"] == ["graphs-retained"]
    assert "kata new --bug ID" in kata("bugs").output


def test_shipped_examples_regenerate_byte_identically():
    katas = sorted(SHIPPED.glob("*.py"))
    assert len(katas) == len(BUGS)
    assert {read_metadata(p).bug for p in katas} == set(BUGS)
    for path in katas:
        info = read_metadata(path)
        source = (REFERENCES / f"{info.reference}.py").read_text()
        mutation = inject(BUGS[info.bug], source, info.seed)
        assert (mutation.source, mutation.site) == (path.read_text(), info.site)


def test_check_reports_the_injected_bug(tmp_path):
    assert kata("new", "--bug", "eval-mode", "--seed", "1", "--dir", str(tmp_path)).exit_code == 0
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
    assert "clip-order: pass" in text and "engaged at 0 of" in text
    assert not list(tmp_path.iterdir()) and sorted(SAMPLES.iterdir()) == before
    unchecked = kata("new", "--from", str(script), "--bug", "clip-order", "--no-verify", "--dir", str(tmp_path))
    assert unchecked.exit_code == 0 and "may not show its bug" in unchecked.output


def test_from_writes_a_kata_whose_bug_the_check_sees(tmp_path):
    result = kata("new", "--from", str(SAMPLES / "small_trainer.py"), "--bug", "zero-grad", "--seed", "0",
                  "--dir", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert "(site 1 of 1)" in result.output and "Verified" in result.output
    assert "grads-accumulate" in failed_probes(check(tmp_path / "01.py"))
