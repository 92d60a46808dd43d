"""What `kata new` says a kata shows is measured on that kata, beside the correct script, and sets its difficulty."""
from __future__ import annotations

import re

import pytest
from click.testing import CliRunner
from conftest import check

from katas.bugs import BUGS
from katas.catalogue import DIFFICULTIES, measured
from katas.cli import main
from katas.observation import Kind, Measured, Shows, cache_folder, describe, printed
from katas.workspace import metadata_path, read_metadata

LEVELS = list(DIFFICULTIES)


def kata(*args: str):
    return CliRunner().invoke(main, list(args), env={"NO_COLOR": "1", "COLUMNS": "200"})


def observation(output: str) -> str:
    """The words under "What you would observe", joined."""
    part = output.split("What you would observe", 1)[1].split("Find the cause", 1)[0]
    return " ".join(part.split())


def numbers(text: str) -> list[float]:
    return [float(n) for n in re.findall(r"(?<![\w.])\d+\.\d+", text)]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Zero-grad on the classifier twice (same seed), and no-step on it: the correct script runs once, then is
    cached; each kata is checked once more, apart, to read what it really prints."""
    folder = tmp_path_factory.mktemp("katas")
    results = {name: kata("new", "--bug", bug, "--ref", "classifier", "--seed", "1", "--dir", str(folder / name))
               for name, bug in (("zero-grad", "zero-grad"), ("again", "zero-grad"), ("no-step", "no-step"))}
    for name, result in results.items():
        assert result.exit_code == 0, result.output
    return {name: (result, folder / name / "01.py", check(folder / name / "01.py") if name != "again" else None)
            for name, result in results.items()}


def test_a_kata_whose_output_looks_normal_says_so_with_its_figures_and_is_not_easy(made):
    result, script, report = made["zero-grad"]
    said = observation(result.output)
    assert "look like a healthy run" in said and "What a measurement shows" in said, said
    assert "lurches" not in said and BUGS["zero-grad"].observe not in said  # the catalogue's prose is not used
    assert "(difficulty: easy)" not in result.output and read_metadata(script).observed["difficulty"] != "easy"
    shown = numbers(said.split("What a measurement shows")[0])
    printed_by_the_kata = numbers(report.output)
    assert len(shown) >= 8 and all(any(abs(n - p) <= 0.0051 for p in printed_by_the_kata) for n in shown), \
        (said, report.output)
    flagged = [f for f in report.findings if f.flagged]
    assert flagged and all(f.symptom in said for f in flagged)  # what the measurement shows: what the check sees


def test_a_kata_whose_printed_figures_differ_says_how_and_is_easy(made):
    result, script, report = made["no-step"]
    said = observation(result.output)
    assert "(difficulty: easy)" in result.output and read_metadata(script).observed["shows"] == [Shows.PRINTED]
    assert "look like a healthy run" not in said and "What a measurement shows" not in said
    train = re.search(r'Its printed "train" goes ([\d., ]+), where the correct script\'s goes ([\d., ]+)\.', said)
    assert train, said
    kata_values, correct_values = numbers(train[1]), numbers(train[2])
    printed_train = [float(m) for m in re.findall(r"train (\d+\.\d+)", report.output)]
    assert [round(v, 2) for v in printed_train] == kata_values  # what this kata prints
    assert kata_values[-1] > 2 * correct_values[-1]


def test_same_seed_same_file_and_same_words(made):
    (first, a, _), (second, b, _) = made["zero-grad"], made["again"]
    assert a.read_bytes() == b.read_bytes() and metadata_path(a).read_bytes() == metadata_path(b).read_bytes()
    assert observation(first.output) == observation(second.output)
    assert "and without it" in first.output and "and without it" not in second.output  # the correct run was cached
    assert len(list(cache_folder().glob("*.json"))) >= 1


def test_no_verify_gives_the_catalogues_prose_labelled_as_typical(tmp_path):
    result = kata("new", "--bug", "zero-grad", "--ref", "classifier", "--seed", "1", "--no-verify", "--dir", str(tmp_path))
    said = observation(result.output)
    level = measured()["bugs"]["zero-grad"]["classifier"]["difficulty"]
    assert result.exit_code == 0 and said.startswith(f"(difficulty: {level})")
    assert f"Typically (not measured on this script): {BUGS['zero-grad'].observe}" in said
    assert "under kata check" not in result.output


def cause_words(bug) -> list[str]:
    """What would name the cause: the bug's id and title, and the code its hints, why and fix quote."""
    quoted = re.findall(r"`([^`]+)`", " ".join([bug.why, bug.fix, *bug.hints]))
    return [bug.id, bug.title.lower(), *(q.lower() for q in quoted if re.search(r"[(._=@]", q))]


def test_no_observation_names_its_bugs_cause(made):
    """Every measured observation of the catalogue (each bug on each reference) and those `kata new` just wrote."""
    said = [(BUGS[bug], " ".join(entry["lines"])) for bug, refs in measured()["bugs"].items() for entry in refs.values()]
    said += [(BUGS[read_metadata(script).bug], observation(result.output)) for result, script, _ in made.values()]
    assert len(said) > 80
    for bug, text in said:
        named = [word for word in cause_words(bug) if re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text.lower())]
        assert not named, (bug.id, named, text)


def figures(text: str) -> list[tuple]:
    return [(p.label, p.kind, p.values, p.percent) for p in printed(text)]


def test_an_accuracy_is_a_percentage_or_a_ratio_never_a_count():
    assert figures("Test set: Average loss: 0.0011, Accuracy: 9800/10000 (98%)\n") == [
        ("Average loss", Kind.LOSS, (0.0011,), False), ("Accuracy (%)", Kind.ACCURACY, (98.0,), True),
        ("Accuracy", Kind.ACCURACY, (0.98,), False)]
    wrong = describe(run("Accuracy: 38/256 (3800%)\n"), run("Accuracy: 38/256 (15%)\n"), "hard")  # as printed
    assert wrong.shows == (Shows.PRINTED,) and wrong.lines == (
        'Its printed "Accuracy (%)" goes 3800.0%, where the correct script\'s goes 15.0%.',)
    assert figures("Accuracy of the network on the 10000 test images: 54 %\n") == [
        ("Accuracy of the network on the 10000 test images", Kind.ACCURACY, (54.0,), True)]
    assert figures("Got 215 / 2048 with accuracy 10.50\nAcc: 11.719% (30/256)\n") == [
        ("with accuracy", Kind.ACCURACY, (10.5,), False), ("Acc", Kind.ACCURACY, (11.719,), True)]
    assert figures("Epoch [1/5], Step [100/600], Loss: 0.2000\nTrain Epoch: 1 [0/60000 (0%)]\tLoss: 2.305\n"
                   "loss 0.25 at step 3\n") == [("Loss", Kind.LOSS, (0.2, 2.305, 0.25), False)]  # one figure: one key
    assert figures("Cost at epoch 1 is 2.3015\nCost at epoch 2 is 2.3044\n") == [
        ("Cost at epoch 1 is", Kind.LOSS, (2.3015, 2.3044), False)]


def test_bare_numbers_and_rewards_are_values_never_called_losses():
    assert figures("0 0.6931\n1 0.5012\n2, 0.4\n") == [
        ("2nd number of a line of bare numbers", Kind.VALUE, (0.6931, 0.5012, 0.4), False)]
    assert figures("tensor([[0.9500, 0.0500],\n        [0.0174, 0.9826]])\n[0.5, 0.25]\n") == []  # rows of a tensor
    assert figures("Episode 10\tLast reward: 9.00\tAverage reward: 10.06\n") == [
        ("Last reward", Kind.VALUE, (9.0,), False), ("Average reward", Kind.VALUE, (10.06,), False)]
    rewards = describe(run("Average reward: 10.06\nAverage reward: 30.5\n"),
                       run("Average reward: 10.06\nAverage reward: 120.0\n"), "medium")
    assert rewards.shows == (Shows.PRINTED,) and "loss" not in rewards.text.lower()


def test_figures_that_read_the_same_are_no_difference_and_a_sick_correct_run_is_not_called_healthy():
    same = describe(run("Accuracy: 400.00\n"), run("Accuracy: 400.00\n", symptoms=[("health", "chance")]), "hard")
    assert same.shows == () and same.difficulty == "hard", same.text
    assert "healthy" not in same.text and "look like the correct script's" in same.text
    assert "healthy run" in describe(run("loss 0.3\n"), run("loss 0.3\n"), "hard").text


def test_figures_that_vary_between_clean_runs_are_not_compared():
    kata, correct, again = run("reward 12.0\nloss 0.9\n"), run("reward 40.0\nloss 0.3\n"), run("reward 95.0\nloss 0.3\n")
    said = describe(kata, correct, "medium", again)
    assert [line for line in said.lines if "reward" in line and "goes" in line] == [], said.text
    assert said.shows == (Shows.PRINTED,) and 'printed "loss" goes 0.90' in said.text  # the loss repeats: compared
    assert 'two runs of the script print different figures ("reward" 40.00, then 95.00)' in said.text
    noisy = describe(run("reward 12.0\n"), run("reward 40.0\n"), "medium", again)
    assert noisy.shows == () and noisy.difficulty == "medium"


def test_a_planted_run_may_take_five_times_the_correct_scripts():
    from katas.commands.common import limits_of
    from katas.commands.new import planted_limits

    assert planted_limits(limits_of(300, 30, None), 20.0).timeout == 100
    assert planted_limits(limits_of(300, 30, None), 1.0).timeout == 30
    assert planted_limits(limits_of(60, 30, None), 200.0).timeout == 60


def test_printed_figures_are_read_by_their_labels():
    found = printed("epoch 0  train 1.1343  val 0.3935  acc 0.956  lr 9.66e-03\n"
                    "Epoch 1/10, Loss: 0.25, Acc@1: 95.5%\nstep 3 | val_loss nan | top5 0.99\nepoch 1  train 0.366\n")
    assert [(p.label, p.kind, p.percent) for p in found] == [
        ("train", Kind.LOSS, False), ("val", Kind.LOSS, False), ("acc", Kind.ACCURACY, False), ("Loss", Kind.LOSS, False),
        ("Acc@1", Kind.ACCURACY, True), ("val_loss", Kind.LOSS, False)]
    assert [str(p.values) for p in found] == ["(1.1343, 0.366)", "(0.3935,)", "(0.956,)", "(0.25,)", "(95.5,)", "(nan,)"]


def run(printed_text: str = "", problem: str = "", losses=(1.3, 0.25), symptoms=()) -> Measured:
    return Measured(not problem, problem, printed(printed_text), losses, 3.0, tuple(symptoms))


def test_an_error_is_what_differs_and_a_script_that_prints_nothing_is_judged_by_its_loss():
    correct = run("epoch 0 loss 1.20\nepoch 1 loss 0.30\n")
    crashed = describe(run(problem="the script raised RuntimeError: mat1 and mat2 shapes cannot be multiplied"),
                       correct, "hard")
    assert crashed.difficulty == "easy" and crashed.shows == (Shows.ERROR,)
    assert crashed.lines == ("It does not run to its end, where the correct script does: the script raised "
                             "RuntimeError: mat1 and mat2 shapes cannot be multiplied.",)
    silent = describe(run(losses=(1.4, 1.39)), run(), "medium")  # a loss it never prints is nothing the learner sees
    assert silent.difficulty == "medium" and silent.shows == () and "1.40 to 1.39" in silent.text
    assert silent.lines[-2:] == ("What a measurement shows:", "- the loss its training computes (it prints none): "
                                 "from 1.40 to 1.39, where the correct script's goes from 1.30 to 0.25")
    quiet = describe(run(losses=(1.3, 0.27), symptoms=[("learning-rate curve", "...")]), run(), "easy")
    assert quiet.difficulty == "medium" and quiet.shows == () and "- learning-rate curve: ..." in quiet.lines
    assert "accuracy" not in quiet.text + silent.text
    already = ("scale of the first layer's inputs", "an RMS of 112")  # your own script showed it before the bug
    mine = describe(run(symptoms=[already, ("learning-rate curve", "...")]), run(symptoms=[already]), "medium")
    assert mine.lines[-2:] == ("What a measurement shows:", "- learning-rate curve: ...")


def test_an_accuracy_an_accuracy_cannot_be_differs_even_in_percent():
    correct = run("acc 95.1%\nacc 97.0%\n")
    assert describe(run("acc 96.2%\nacc 97.5%\n"), correct, "hard").difficulty == "hard"
    assert describe(run("acc 96.2%\nacc 812.5%\n"), correct, "hard").shows == (Shows.PRINTED,)
    assert describe(run("acc 0.951\nacc 0.84\n"), run("acc 0.951\nacc 0.97\n"), "hard").shows == (Shows.PRINTED,)
