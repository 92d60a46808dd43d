"""Where the learner commands find the katas, and how the progress and metadata files are kept safe."""
from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from katas.bugs import BUGS
from katas.cli import main
from katas.state import state_path
from katas.workspace import metadata_path, read_metadata, write_metadata

ROOT = Path(__file__).resolve().parent.parent


def kata(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args], env={"NO_COLOR": "1", "COLUMNS": "240"})


def plain(result) -> str:
    return " ".join(result.output.split())


def completions(line: str) -> list[str]:
    env = {"_KATA_COMPLETE": "bash_complete", "COMP_WORDS": line, "COMP_CWORD": str(len(line.split()) - 1)}
    return [row.split(",", 1)[1] for row in CliRunner().invoke(main, [], prog_name="kata", env=env).output.splitlines()]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Two katas, made once: 01 (eval-mode) and 02 (leak), in their reference's own text (fast to make)."""
    folder = tmp_path_factory.mktemp("made") / "katas"
    for bug in ("eval-mode", "leak"):
        assert kata("new", "--bug", bug, "--seed", "1", "--plain", "--no-verify", "--dir", folder).exit_code == 0
    return folder


@pytest.fixture
def project(made, tmp_path, monkeypatch):
    """A project holding the katas in its workspace, practice/, the current folder two levels below it."""
    shutil.copytree(made, tmp_path / "practice")
    (tmp_path / "src" / "deep").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "src" / "deep")
    return tmp_path


def test_kata_and_list_outside_any_kata_folder_say_how_to_start_and_create_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status = plain(kata())
    assert "No workspace yet: `kata new` starts one, practice/, with your first kata" in status
    assert "ready-made examples" not in status  # none here
    listed = kata("list")
    assert listed.exit_code == 0 and "No katas here." in plain(listed)
    missing = kata("hint", "01")
    assert missing.exit_code == 2 and "no workspace here or above" in missing.output
    assert list(tmp_path.iterdir()) == []


def test_learner_commands_find_the_kata_folder_upward_like_git(project, monkeypatch):
    assert "../../practice/: 2 katas, 0 passed, 2 to go" in plain(kata())
    doc = json.loads(kata("list", "--json").output)
    assert [k["path"] for k in doc["katas"]] == ["../../practice/01.py", "../../practice/02.py"]
    assert "Hint 1 of 3" in plain(kata("hint", "02"))
    assert "kata solution 01 --reveal" in plain(kata("solution", "01"))
    assert "nothing to reset" in plain(kata("reset", "01", "--yes"))
    assert completions("kata hint 0") == ["01", "02"]
    made = kata("new", "--bug", "leak", "--seed", "1", "--plain", "--no-verify")
    assert made.exit_code == 0 and "Wrote ../../practice/03.py" in plain(made) and "kata watch 03;" in plain(made)
    assert "Started your workspace" not in plain(made)
    monkeypatch.chdir(project / "practice")  # inside the kata folder itself
    assert [k["path"] for k in json.loads(kata("list", "--json").output)["katas"]] == ["01.py", "02.py", "03.py"]


def test_dir_names_a_kata_folder_that_is_not_found_from_here(made, tmp_path, monkeypatch):
    mine = tmp_path / "elsewhere" / "mine"
    shutil.copytree(made, mine)
    monkeypatch.chdir(tmp_path)
    assert "No katas here." in plain(kata("list"))
    assert [k["path"] for k in json.loads(kata("list", "--json", "--dir", mine).output)["katas"]] == [
        str(mine / "01.py"), str(mine / "02.py")]
    for _ in range(3):
        assert kata("hint", "02", "--dir", mine).exit_code == 0
    assert f"kata solution 02 --dir {mine} --reveal" in plain(kata("hint", "02", "--dir", mine))
    assert "nothing to reset" in plain(kata("reset", "01", "--dir", mine, "--yes"))
    watched = kata("watch", "09", "--dir", mine)
    assert watched.exit_code == 2 and f"no such script: {mine / '09.py'}" in watched.output
    assert completions(f"kata hint --dir {mine} 0") == ["01", "02"]
    made_there = kata("new", "--bug", "leak", "--seed", "1", "--plain", "--no-verify", "--dir", mine)
    assert f"kata watch 03 --dir {mine}" in plain(made_there)
    assert list(tmp_path.iterdir()) == [tmp_path / "elsewhere"]


def test_pending_and_done_together_are_a_usage_error(project):
    result = kata("list", "--pending", "--done")
    assert result.exit_code == 2 and "Usage:" in result.output and "exclude each other" in result.output


def test_a_diagnosis_shows_in_the_list_and_older_progress_files_still_load(project):
    state = state_path(project / "practice")
    state.write_text(json.dumps({"version": 1, "katas": {"01": {"status": "failing", "hints": 1, "revealed": False,
                                                                "checked_at": None}}}))
    assert [k["diagnosed"] for k in json.loads(kata("list", "--json").output)["katas"]] == [False, False]
    doc = json.loads(state.read_text())
    doc["katas"]["01"]["diagnosed"] = True
    state.write_text(json.dumps(doc))
    assert [k["diagnosed"] for k in json.loads(kata("list", "--json").output)["katas"]] == [True, False]
    assert "01 failing 1/3 +diagnosis ?" in plain(kata("list"))


def test_a_progress_file_that_is_not_json_is_kept_aside_not_overwritten(project):
    state = state_path(project / "practice")
    state.write_text("{half written")
    listed = kata("list")  # reading only: a warning, and the file stays where it is
    assert listed.exit_code == 0 and "is not valid JSON" in listed.stderr and state.read_text() == "{half written"
    hinted = kata("hint", "01")
    assert hinted.exit_code == 0 and "is not valid JSON; it is kept as" in hinted.stderr
    backups = list(state.parent.glob("state.json.bak-*"))
    assert [b.read_text() for b in backups] == ["{half written"] and backups[0].name in hinted.stderr
    assert json.loads(state.read_text())["katas"]["01"]["hints"] == 1


def test_a_progress_file_from_a_newer_version_is_refused_and_left_alone(project):
    state = state_path(project / "practice")
    state.write_text(json.dumps({"version": 99, "katas": {"01": {"status": "passed", "stars": 3}}}))
    before = state.read_text()
    for command in (("hint", "01"), ("list",)):
        result = kata(*command)
        assert result.exit_code == 2 and "written by a newer torch-katas (progress format 99" in result.output
    assert state.read_text() == before and not list(state.parent.glob("state.json.bak-*"))


def test_reset_refuses_a_kata_made_by_another_engine_without_naming_its_bug(project):
    path = project / "practice" / "01.py"
    write_metadata(path, replace(read_metadata(path), engine=1))
    path.write_text("my attempt\n")
    result = kata("reset", "01", "--yes")
    assert result.exit_code == 2 and "make a new kata with `kata new`" in result.output
    assert "eval-mode" not in result.output and BUGS["eval-mode"].title not in result.output
    assert path.read_text() == "my attempt\n"


def test_metadata_keeps_what_the_script_showed_before_and_reads_katas_written_without_it(project):
    """A kata from your own script remembers the symptoms its script had before; one written before that field
    existed (or from a reference) reads as having had none."""
    path = project / "practice" / "01.py"
    info = read_metadata(path)
    assert info.baseline == ()
    write_metadata(path, replace(info, baseline=("health: initial loss", "input-scale")))
    assert read_metadata(path) == replace(info, baseline=("health: initial loss", "input-scale"))
    doc = json.loads(metadata_path(path).read_text())
    del doc["baseline"]
    metadata_path(path).write_text(json.dumps(doc))
    assert read_metadata(path) == info


def test_katas_written_into_broken_before_workspaces_had_their_own_name_are_still_found(made, tmp_path, monkeypatch):
    shutil.copytree(made, tmp_path / "broken")  # no examples marker: a learner's own folder
    monkeypatch.chdir(tmp_path)
    assert "broken/: 2 katas, 0 passed, 2 to go" in plain(kata())
    assert "Wrote broken/03.py" in plain(kata("new", "--bug", "leak", "--seed", "1", "--plain", "--no-verify"))


@pytest.fixture
def clone(tmp_path, monkeypatch):
    """A fresh clone's layout: the shipped examples in broken/ and nothing else, as the current folder."""
    shutil.copytree(ROOT / "broken", tmp_path / "broken", ignore=shutil.ignore_patterns("state.*", "backup"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_in_a_fresh_clone_kata_new_starts_a_workspace_beside_the_examples_never_in_them(clone, monkeypatch):
    shipped = files(clone / "broken")
    examples = len(list((clone / "broken").glob("*.py")))
    status = plain(kata())
    assert "No workspace yet: `kata new` starts one, practice/, with your first kata" in status
    assert f"broken/ holds {examples} ready-made examples to check: kata check broken/01.py" in status
    missing = kata("hint", "03")
    assert missing.exit_code == 2 and "no workspace here or above" in missing.output and "--dir broken" in missing.output
    made = plain(kata("new", "--bug", "leak", "--seed", "1", "--plain", "--no-verify"))
    assert "Started your workspace practice/" in made and "Wrote practice/01.py" in made and "kata watch 01;" in made
    assert "practice/: 1 kata, 0 passed, 1 to go" in plain(kata())
    monkeypatch.chdir(clone / "broken")  # from inside the examples, the workspace beside them
    made = plain(kata("new", "--bug", "leak", "--seed", "2", "--plain", "--no-verify"))
    assert "Wrote ../practice/02.py" in made and "Started" not in made
    assert "../practice/ is already a workspace" in plain(kata("init"))
    assert files(clone / "broken") == shipped
    assert sorted(p.name for p in clone.iterdir()) == ["broken", "practice"]
    assert "/practice/" in (ROOT / ".gitignore").read_text().splitlines()  # this repository does not track it


def test_kata_init_starts_a_workspace_and_refuses_the_examples(clone):
    shipped = files(clone / "broken")
    refused = kata("init", "broken")
    assert refused.exit_code == 2 and "broken holds the shipped examples" in refused.output
    assert "the default: practice/" in refused.output
    assert "Started your workspace practice/. Make your first kata: kata new" in plain(kata("init"))
    assert (clone / "practice" / ".kata").is_dir() and "No katas yet. Start with: kata new" in plain(kata())
    assert "practice/ is already a workspace; nothing to do" in plain(kata("init", "practice"))
    elsewhere = plain(kata("init", "mine"))
    assert "Started your workspace mine/. Make your first kata: kata new --dir mine" in elsewhere
    assert files(clone / "broken") == shipped and files(clone / "mine") == {}


def test_progress_on_an_example_is_kept_in_the_workspace_not_in_broken(clone):
    """A hint or a check of a shipped example records its progress in the learner's workspace beside the
    examples, in a section of its own; a hint starts the workspace if there is none (as `kata new` would), a check
    alone starts none."""
    shipped = files(clone / "broken")
    alone = kata("check", "broken/03.py")
    assert alone.exit_code == 1 and "Started your workspace" not in alone.output and not (clone / "practice").exists()
    hinted = kata("hint", "broken/03.py")
    assert hinted.exit_code == 0 and "Hint 1 of 3" in hinted.stdout
    assert "Started your workspace practice/" in hinted.stderr
    assert kata("new", "--bug", "leak", "--seed", "1", "--plain", "--no-verify").exit_code == 0
    assert kata("hint", "01").exit_code == 0
    checked = kata("check", "broken/03.py")
    assert checked.exit_code == 1 and "injected bug: still present" in plain(checked)
    state = json.loads(state_path(clone / "practice").read_text())
    assert state["katas"]["01"]["hints"] == 1
    assert (state["examples"]["03"]["hints"], state["examples"]["03"]["status"]) == (1, "failing")
    listed = json.loads(kata("list", "--json", "--dir", "broken").output)["katas"]
    assert [(k["kata"], k["status"], k["hints"]) for k in listed if k["status"] != "to do"] == [("03", "failing", 1)]
    assert [k["kata"] for k in json.loads(kata("list", "--json").output)["katas"]] == ["01"]
    assert files(clone / "broken") == shipped


def test_resetting_an_example_keeps_the_learners_version_in_the_workspace_not_in_broken(clone):
    shipped = files(clone / "broken")
    edited = clone / "broken" / "03.py"
    edited.write_text(edited.read_text() + "# my attempt\n")
    reset = kata("reset", "broken/03.py", "--yes")
    assert reset.exit_code == 0, reset.output
    backup = clone / "practice" / ".kata" / "backup" / "examples" / "03.1.py"
    assert f"your version is in {backup.relative_to(clone)}" in plain(reset) or str(backup) in plain(reset)
    assert backup.read_text().endswith("# my attempt\n")
    assert files(clone / "broken") == shipped  # the example as shipped, and nothing written beside it
