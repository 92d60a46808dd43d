"""reported-metric: the accuracy a script prints after an evaluation is the accuracy of that evaluation.

What is observed. Every ``print`` of the checked process (to any file) is seen as
it is written, unchanged: the instrumentation wraps ``builtins.print`` (PRINT events) to hand its own arguments,
untouched, to the original, with a file object that passes each write through to
the real one and keeps a copy. Only printed text is read: a logger, a progress
bar's postfix, ``sys.stdout.write`` or a returned value are not. In that text, a
*reading* is a number right after an accuracy label: a word whose last part is
``acc``, ``accuracy`` or ``acc1`` / ``acc@1`` (``acc``, ``val_acc``, ``Accuracy:``,
``test/accuracy``, ``'acc': 0.9``, ``acc tensor(0.96)``), read as a fraction, a
percentage (``97.2%``) or a count ``N/M``, and a parenthesised value right after
it (``Accuracy: 475/500 (95%)``). Not read: labels that, with the words right
before them, name another statistic (top-k for k > 1: ``acc5``, ``acc@5``,
``top-5 acc``; balanced, macro, weighted or per-class accuracy; training
accuracy), ``acc`` as part of another word (``acc_steps``, ``grad_acc``). A label
followed by a phrase and a colon is read after the colon (``Accuracy of the
network on the 10000 test images: 96 %``) unless the phrase names another
statistic (``Accuracy for class: plane is 45.2 %``), holds another accuracy label
or punctuation that separates items (``acc went up | loss: 0.3``); the phrase may
name a class (``Accuracy of plane : 45 %``), so such a reading may also be the
accuracy over one class's samples. A label
qualified as the best or maximum so far (``best acc``) is a *best* reading.

Each print is placed on the run's timeline (:mod:`checker.session`). It is *tied*
to an evaluation when the last top-level forward before it was an evaluation
forward, no DataLoader pass of that forward was still running, and the next
forward is not one more of the same evaluation (a print inside an evaluation loop
is not judged). Its *candidates* come from the data the health gate already keeps
(:mod:`checker.probes._shared.class_scores`: each forward's class decisions, from the loss's own
input or else the model's output, against the batch's labels, one per sample):
for each DataLoader pass (or run of forwards without one) among the evaluation
forwards right before the print, correct / samples and the mean of its per-batch
accuracies; all those passes together; the same two for the run of training
forwards before them (a training accuracy printed beside a validation loss); for a
reading after a phrase only, the accuracy over each class's samples. A
best reading's candidates are the accuracies of every evaluation pass until then,
and 0 (a best not yet set).

Rule. A reading *matches* a candidate a when |value - a| is at most half a unit of
its last printed digit (at least 1e-5: float32 sums and means printed in full), or,
for a whole number, when a is up to one unit above it (a percentage truncated:
``100 * correct // total``); a bare number matches as a fraction or as a percentage. A reading that matches no
candidate may still sum up an earlier evaluation (``Teacher accuracy: 91 %`` printed
at the end, after the student's): it matches the accuracy (correct / samples) of any
evaluation before the one it is tied to (the last 64; in a distributed run, over
every rank's samples). A tied print *disagrees* when one of its readings matches none of
these. The probe fails when a print
disagrees and each of its evaluation passes ran exactly one scored forward per
batch; it cannot tell when only prints whose evaluation ran several scored
forwards per batch disagree (test-time augmentation, an ensemble, two models in
one loop: their combined decisions are not seen), or when no reading was tied to
an evaluation (nothing printed, a logger); it passes when every tied reading
matched; n/a when no evaluation forward was scored against labels (regression,
generation, per-token outputs).

Why a correct script does not fail. A correct accuracy is correct / samples of
the outputs it was computed from, and the health gate's decisions are those
outputs' argmax (the binary decision at 0 for scores, 1/2 for probabilities)
against the same labels; percentages, ``N/M`` counts, ``torch.cat`` of the
predictions, ``correct / len(loader.dataset)`` and a mean of per-batch accuracies
all land on a candidate within the printed precision. A count of batches, or of
batches times the batch size when the last batch is partial, in the denominator
does not (500 samples in batches of 128: 4 batches, 512 padded samples). Not
caught: an accuracy that is only logged, returned or stored; a wrong accuracy
under a label this rule does not read. A custom decision threshold, or accuracy
over another subset than the evaluated batches, would disagree: rare, and a
reason to read the message. Cost: only ``print`` calls, one regular expression
each; ties are worked out once, at the end of the run.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS, Finding
from checker.probes._shared.class_scores import OWNER, ClassScores

ID = "reported-metric"
USES = (OWNER,)  # the per-forward class decisions, shared with the health gate
TITLE = "the printed accuracy is the evaluation's"
SYMPTOM_ID, SYMPTOM = "printed-accuracy", "printed accuracy against outputs and labels"

FLOOR = 1e-5  # the smallest tolerance, as a fraction: float32 sums and means
MAX_PRINTS = 200  # prints with a reading kept for the summary
MAX_TEXT = 160
MAX_EARLIER = 64  # evaluations before a print whose accuracies it may sum up ("Teacher accuracy: ..." at the end)
QUALIFIERS = 3  # words right before a label read for what it qualifies (best val acc)
ACCURACY_WORDS = {"acc", "accuracy", "accu"}
TRAILING = {"1", "score", "pct", "percent"}  # parts allowed after the accuracy word (acc1, acc@1, accuracy_score)
BEST = {"best", "max", "maximum", "highest", "peak"}  # the best accuracy so far: judged against every earlier one
OTHER_STATISTICS = {"bal", "balanced", "macro", "weighted", "class", "per",
                    "train", "training", "trn", "grad", "mca"}
WORD = re.compile(r"[A-Za-z][A-Za-z0-9_@/.\-]*[A-Za-z0-9]|[A-Za-z]")
PARTS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
VALUE = re.compile(rf"""['"]?\s*[:=]?\s*(?:[A-Za-z_][\w.]*\()?\s*(?P<num>{NUMBER})(?:\s*/\s*(?P<den>\d+)(?![\d.]))?"""
                   rf"""(?P<pct>\s*%)?\)?""")
PHRASE = re.compile(r"[^:|;,=()\[\]{}\n]{1,80}?:")  # ``of the network on the 10000 test images:``
ASIDE = re.compile(rf"""\s*\(\s*(?P<num>{NUMBER})(?:\s*/\s*(?P<den>\d+)(?![\d.]))?(?P<pct>\s*%)?\s*\)""")


def parts_of(word: str) -> list[str]:
    """``val_acc`` → [val, acc]; ``testAccuracy`` → [test, accuracy]; ``Acc@1`` → [acc, 1]."""
    return [p.lower() for p in PARTS.findall(word)]


def other_statistic(parts: list[str]) -> bool:
    """Parts that say the number is another statistic than top-1 accuracy over samples: balanced, top-5, train ..."""
    if OTHER_STATISTICS & set(parts):
        return True
    return any(p == "top" and i + 1 < len(parts) and parts[i + 1].isdigit() and parts[i + 1] != "1"
               for i, p in enumerate(parts))


def accuracy_label(word: str, before: list[str]) -> str | None:
    """"current" for an accuracy label, "best" for the best accuracy so far, None for anything else. ``before``:
    the words right before it, with only spaces between (``best val acc``)."""
    parts = parts_of(word)
    where = [i for i, p in enumerate(parts) if p in ACCURACY_WORDS]
    if not where or not set(parts[where[-1] + 1:]) <= TRAILING:
        return None
    qualifiers = parts + [p for w in before for p in parts_of(w)]
    if other_statistic(qualifiers):
        return None
    return "best" if BEST & set(qualifiers) else "current"


def reading(match: re.Match) -> list[list[float]]:
    """The fractions a matched number may stand for, each with its tolerance: ``[[value, tolerance], ...]``."""
    text, den, percent = match["num"], match["den"], bool(match["pct"])
    value = float(text)
    if den is not None:
        if "." in text or "e" in text.lower() or not 0 <= value <= int(den) or int(den) == 0:
            return []  # not a count: "0.95/0.97"
        return [[value / int(den), FLOOR]]
    mantissa, _, exponent = text.lower().partition("e")
    decimals = len(mantissa.partition(".")[2]) - (int(exponent) if exponent else 0)
    half = 0.5 * 10.0 ** -decimals
    centre, tolerance = (value, half) if "." in mantissa or exponent else (value + half / 2, 1.5 * half)  # whole:
    if percent:  # rounded, or truncated (from value - half to value + 1)
        return [[centre / 100, max(tolerance / 100, FLOOR)]]
    return [[centre, max(tolerance, FLOOR)], [centre / 100, max(tolerance / 100, FLOOR)]]


def after_phrase(text: str, start: int) -> re.Match | None:
    """The value after ``: `` when an accuracy label is followed by a phrase and a colon (``Accuracy of the network
    on the test images: 96 %``), unless the phrase names another statistic or holds another accuracy label."""
    phrase = PHRASE.match(text, start)
    if phrase is None or not phrase.group()[:-1].strip():
        return None
    parts = [p for w in WORD.findall(phrase.group()) for p in parts_of(w)]
    if other_statistic(parts) or ACCURACY_WORDS & set(parts):
        return None
    return VALUE.match(text, phrase.end())


def readings(text: str) -> list[dict]:
    """Accuracy readings in printed text: ``{"label", "text", "values": [[fraction, tolerance], ...], "best"}``."""
    found: list[dict] = []
    before: list[str] = []
    end = 0
    for word in WORD.finditer(text):
        if text[end:word.start()].strip():
            before = []
        match, phrased = VALUE.match(text, word.end()), False
        if match is None:
            match = after_phrase(text, word.end())
            phrased = match is not None
        kind = accuracy_label(word.group(), before[-QUALIFIERS:]) if match else None
        if kind:
            found += [{"label": word.group(), "text": m.group().strip(" :='\"").strip(), "values": values,
                       "best": kind == "best", "phrase": phrased}
                      for m in (match, ASIDE.match(text, match.end())) if m and (values := reading(m))]
        before.append(word.group())
        end = word.end()
    return found


@dataclass
class Observation:
    # per print tied to an evaluation, with a reading: {"text", "readings", "candidates" ([{"what", "accuracy",
    # "correct", "total"}]), "clean" (one scored forward per batch in each of its evaluation passes)}
    reports: list[dict] = field(default_factory=list)
    evaluations: int = 0  # evaluation forwards scored against labels
    untied: int = 0  # prints with a reading not tied to a finished evaluation (training, inside a loop)
    dropped: int = 0  # prints with a reading beyond MAX_PRINTS, not judged
    prints: int = 0
    blocks: list[dict] = field(default_factory=list)  # per run of evaluation forwards of one pass: {"correct",
    # "total"}; a report's "blocks" are the indices of those it is tied to (ranks of a distributed run are compared)


class Observer:
    def __init__(self, session):
        self.session = session
        self.pending: list[tuple[int, bool, str, list[dict]]] = []  # (forwards so far, in a pass, line, readings)
        self.prints = self.dropped = 0
        self.scores = session.shared(ClassScores)  # each forward's class decisions: the candidates' source
        session.on(Event.PRINT, ID, self.on_print)

    def on_print(self, text: str) -> None:
        self.prints += 1
        lines = [(line, found) for line in text.splitlines() if (found := readings(line))]
        if not lines:
            return
        if len(self.pending) >= MAX_PRINTS:
            self.dropped += 1
            return
        session = self.session
        last = session.forwards[-1] if session.forwards else None
        in_pass = last is not None and session.current is not None and last.pass_index == session.current.index
        for line, found in lines:
            self.pending.append((len(session.forwards), in_pass, line.strip()[:MAX_TEXT], found))

    def summary(self) -> Observation:
        obs = Observation(prints=self.prints, dropped=self.dropped)
        forwards = self.session.forwards
        phases = [self.session.phase(f) for f in forwards]
        rows = {i: row for i, row in self.scores.scored.items() if row["total"] and self.scores.usable(row)}
        obs.evaluations = sum(1 for i in rows if phases[i] == "eval")
        evaluated = [i for i in range(len(forwards)) if phases[i] == "eval"]
        blocks = [(group[0], group[-1] + 1, [rows[i] for i in group if i in rows])
                  for group in runs(evaluated, lambda i: forwards[i].pass_index)]
        blocks = [block for block in blocks if block[2]]
        obs.blocks = [{"correct": sum(r["correct"] for r in scored), "total": sum(r["total"] for r in scored)}
                      for _, _, scored in blocks]
        for position, in_pass, text, found in self.pending:
            tie = self._tie(position, in_pass, phases, [b for b in blocks if b[1] <= position], rows)
            if tie is None:
                obs.untied += 1
                continue
            candidates, clean, recent = tie
            report = {"text": text, "readings": found, "candidates": candidates, "clean": clean, "earlier": [],
                      "blocks": [blocks.index(block) for block in recent]}
            if any(r["best"] for r in found):
                report["earlier"] = sorted({c["accuracy"] for b in blocks if b[1] <= position
                                            for c in accuracies(b[2], "evaluation")})
            before = [i for i, b in enumerate(blocks) if b[1] <= recent[0][0]][-MAX_EARLIER:]
            report["before"] = [obs.blocks[i]["correct"] / obs.blocks[i]["total"] for i in before]
            report["before_blocks"] = before
            obs.reports.append(report)
        return obs

    def _tie(self, position: int, in_pass: bool, phases: list, blocks: list, rows: dict) -> tuple[list[dict], bool,
                                                                                                   list] | None:
        """The candidate accuracies of the evaluation a print at ``position`` reports on, whether each of its
        passes had one scored forward per batch, and its blocks; None when the print is not tied to a finished
        evaluation.
        ``blocks``: ``(first, end, scored rows)`` of each run of evaluation forwards of one pass that ended before."""
        forwards = self.session.forwards
        if position == 0 or in_pass or phases[position - 1] != "eval":
            return None
        last = forwards[position - 1]
        if position < len(forwards) and phases[position] == "eval" and forwards[position].pass_index == last.pass_index:
            return None  # the evaluation goes on after the print
        start = position
        while start > 0 and phases[start - 1] == "eval":
            start -= 1
        first_train = start
        while first_train > 0 and phases[first_train - 1] == "train":
            first_train -= 1
        candidates, clean, everything = [], True, []
        recent = [block for block in blocks if block[0] >= start]
        for first, _, scored in recent:
            everything += scored
            candidates += accuracies(scored, "evaluation")
            pass_index = forwards[first].pass_index
            if pass_index is not None and len(scored) != self.session.passes[pass_index].batches:
                clean = False
        if not candidates:
            return None
        if len(recent) > 1:
            candidates += accuracies(everything, "evaluation, all passes together")[:1]
        candidates += per_class(everything)
        candidates += accuracies([rows[i] for i in range(first_train, start) if i in rows], "training")
        return candidates, clean, recent


def runs(indices: list[int], key) -> list[list[int]]:
    """Runs of consecutive indices with the same key (the same DataLoader pass)."""
    groups: list[list[int]] = []
    for i in indices:
        if groups and groups[-1][-1] == i - 1 and key(groups[-1][-1]) == key(i):
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def accuracies(rows: list[dict], what: str) -> list[dict]:
    """correct / samples over ``rows``, and the mean of their per-batch accuracies when it differs."""
    if not rows:
        return []
    correct, total = sum(r["correct"] for r in rows), sum(r["total"] for r in rows)
    found = [{"what": what, "accuracy": correct / total, "correct": correct, "total": total}]
    mean = sum(r["correct"] / r["total"] for r in rows) / len(rows)
    if abs(mean - correct / total) > 1e-12:
        found.append({"what": f"{what}, mean of per-batch accuracies", "accuracy": mean, "correct": None,
                      "total": None})
    return found


def per_class(rows: list[dict]) -> list[dict]:
    """The accuracy over each class's samples: what a label followed by a phrase may report (``Accuracy of plane :
    45 %``). Only such readings are matched against them."""
    counts, hits = Counter(), Counter()
    for row in rows:
        counts.update(row["counts"])
        hits.update(row["hits"])
    return [{"what": f"evaluation, class {label}", "accuracy": hits.get(label, 0) / n, "correct": hits.get(label, 0),
             "total": n, "per_class": True} for label, n in sorted(counts.items()) if n]


# -- the judge -----------------------------------------------------------------------------------------------


def matches(entry: dict, accuracies: list[float]) -> bool:
    return any(abs(value - a) <= tolerance * (1 + 1e-9) + 1e-12 for value, tolerance in entry["values"] for a in accuracies)


def disagreeing(report: dict) -> list[dict]:
    """The report's readings that match no candidate: a best-so-far one none of the evaluations until then."""
    overall = [c["accuracy"] for c in report["candidates"] if not c.get("per_class")] + report.get("before", [])
    every = [c["accuracy"] for c in report["candidates"]] + report.get("before", [])
    return [r for r in report["readings"] if not matches(r, [0.0, *report["earlier"]] if r["best"] else
                                                         every if r.get("phrase") else overall)]


def _recomputed(report: dict) -> str:
    """The accuracy of the last evaluation pass before the print, in words."""
    c = [c for c in report["candidates"] if c["correct"] is not None and c["what"] == "evaluation"][-1]
    return f"{c['accuracy']:.3f} ({c['correct']} of {c['total']} samples)"


def judge(obs: Observation, facts: RunFacts) -> Finding:
    if not obs.evaluations:
        why = "no evaluation forward's outputs could be scored against class labels"
        return Finding(ID, TITLE, NOT_APPLICABLE, message=f"not judged: {why}", observed=why)
    if not obs.reports:
        why = (f"no accuracy was printed after a finished evaluation ({obs.prints} prints seen"
               + (f", {obs.untied} with an accuracy during training or inside a loop" if obs.untied else "")
               + "; a logger, a progress bar or a file written directly is not read)")
        return Finding(ID, TITLE, CANNOT_TELL, "0 printed accuracies", "≥ 1", why)
    readings_count = sum(len(r["readings"]) for r in obs.reports)
    bad = [r for r in obs.reports if disagreeing(r)]
    failing = [r for r in bad if r["clean"]]
    measured = f"{sum(len(disagreeing(r)) for r in bad)} of {readings_count} printed accuracies"
    if failing:
        worst = failing[0]
        shown = disagreeing(worst)[0]
        seen = (f"after an evaluation the script printed \"{worst['text']}\", but that evaluation's outputs against "
                f"its labels give an accuracy of {_recomputed(worst)}")
        if len(failing) > 1:
            seen += f" ({len(failing)} prints like this)"
        message = (f"{seen}: the printed {shown['label']} ({shown['text']}) is not correct predictions over samples "
                   "evaluated; look at what its denominator counts (batches, or batches times the batch size when the "
                   "last batch is partial, are not samples)")
        return Finding(ID, TITLE, FAIL, measured, "0", message, observed=seen)
    if bad:
        report = bad[0]
        why = (f"\"{report['text']}\" matches none of the accuracies recomputed ({_recomputed(report)}), but its "
               "evaluation ran several scored forwards per batch (test-time augmentation, an ensemble or two models), "
               "whose combined decisions are not seen")
        return Finding(ID, TITLE, CANNOT_TELL, measured, "0", why)
    example = obs.reports[-1]
    seen = f"each of the {readings_count} accuracies printed after an evaluation matched its outputs against its labels"
    return Finding(ID, TITLE, PASS, measured, "0",
                   f"{seen} (last: \"{example['text']}\", recomputed {_recomputed(example)})", observed=seen)


def judge_ranks(observations: list[Observation], facts: list[RunFacts]) -> Finding:
    """In a distributed run a printed accuracy must be that of the whole evaluation: each print's candidate is
    recomputed from the same evaluation (by order) of every rank that evaluated, correct and samples summed over
    ranks. An accuracy of the printing rank's own shard alone disagrees, unless the print says it is one rank's
    (the words rank, local or shard in it)."""
    evaluating = [obs for obs in observations if obs.blocks]
    merged = Observation(evaluations=sum(o.evaluations for o in observations),
                         untied=sum(o.untied for o in observations), dropped=sum(o.dropped for o in observations),
                         prints=sum(o.prints for o in observations))
    own: dict[int, tuple[int, dict]] = {}  # id of a merged report -> (rank, its own shard's evaluation candidate)
    for rank, obs in enumerate(observations):
        for report in obs.reports:
            blocks = report.get("blocks", [])
            aligned = blocks and all(len(o.blocks) > max(blocks) for o in evaluating)
            training = [c for c in report["candidates"] if c["what"].startswith("training")]
            if not aligned:
                merged.reports.append({**report, "clean": False})
                continue
            correct = sum(o.blocks[b]["correct"] for o in evaluating for b in blocks)
            total = sum(o.blocks[b]["total"] for o in evaluating for b in blocks)
            whole = {"what": "evaluation", "accuracy": correct / total, "correct": correct, "total": total}
            # a print that says it is one rank's own ("rank 1: acc ...", "local acc") may report its shard
            own_words = re.search(r"\b(rank|local|shard)\b", report["text"], re.IGNORECASE)
            mine_too = [c for c in report["candidates"] if c["what"].startswith("evaluation")] if own_words else []
            before = [sum(o.blocks[b]["correct"] for o in evaluating) / sum(o.blocks[b]["total"] for o in evaluating)
                      for b in report.get("before_blocks", [])]
            merged.reports.append({**report, "candidates": [whole, *mine_too, *training], "before": before})
            mine = next((c for c in report["candidates"] if c["what"] == "evaluation" and c["correct"] is not None),
                        None)
            if mine is not None and len(evaluating) > 1:
                own[id(merged.reports[-1])] = (rank, mine)
    finding = judge(merged, facts[0])
    if finding.status == FAIL:
        shard = next(((rank, c) for r in merged.reports if r["clean"] and disagreeing(r) and id(r) in own
                      for rank, c in [own[id(r)]]
                      if all(matches(reading, [c["accuracy"]]) for reading in disagreeing(r))), None)
        if shard is not None:
            rank, c = shard
            finding.message = (f"{finding.message.split(': the printed')[0]}: the printed accuracy is rank {rank}'s own "
                               f"shard's ({c['correct']} of {c['total']} samples), not the evaluation over all "
                               f"{len(observations)} ranks; sum the counts over ranks (all_reduce) before dividing")
    return finding
