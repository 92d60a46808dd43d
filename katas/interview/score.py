"""The answer key's rubric, and the part of it that a grade decides.

Per planted bug: :data:`FIX` points when ``kata grade`` finds it fixed and the script still trains (the health gate
passes), then :data:`EXPLANATION` and :data:`FOLLOW_UP` points that the interviewer gives in the conversation.
Every new symptom the candidate introduced costs :data:`NEW_SYMPTOM` points. ``kata grade`` computes the first
and the last; the rest is the interviewer's, and the maximum counts it.
"""
from __future__ import annotations

from dataclasses import dataclass

FIX = 2
EXPLANATION = 1
FOLLOW_UP = 1
NEW_SYMPTOM = 1
PER_BUG = FIX + EXPLANATION + FOLLOW_UP


@dataclass(frozen=True)
class Score:
    bugs: int
    fixed: int  # bugs that `kata grade` finds fixed
    trains: bool  # the script still trains (see katas.interview.grade.Grade.trains): fixes count only then
    new_symptoms: int

    @property
    def fix_points(self) -> int:
        return FIX * self.fixed if self.trains else 0

    @property
    def penalty(self) -> int:
        return NEW_SYMPTOM * self.new_symptoms

    @property
    def points(self) -> int:
        """What the grade decides: fix points less the new symptoms' cost."""
        return self.fix_points - self.penalty

    @property
    def maximum(self) -> int:
        return PER_BUG * self.bugs

    @property
    def conversation(self) -> int:
        """The points left to the interviewer: explanation and follow-up, per bug."""
        return (EXPLANATION + FOLLOW_UP) * self.bugs

    def breakdown(self) -> str:
        trains = "" if self.trains or not self.fixed else " (none count: the script no longer trains)"
        return (f"fixes {self.fixed} × {FIX} = {FIX * self.fixed}{trains}, new symptoms −{self.penalty}; "
                f"up to {self.conversation} more for explanations and follow-ups in the interview")

    def to_json(self) -> dict:
        return {"points": self.points, "maximum": self.maximum, "fix_points": self.fix_points, "penalty": self.penalty,
                "trains": self.trains, "conversation_points": self.conversation}


def rubric(bugs: int) -> str:
    """The rubric as the answer key states it."""
    return f"""For each of the {bugs} bugs:

- {FIX} points: fixed, as `kata grade` confirms (the symptom is gone and the script still trains);
- {EXPLANATION} point: the candidate explains the cause in their own words (the **Why** above); when
  `kata grade` reports that `kata check --diagnose` was used, the check named the causes: ask for more than that;
- {FOLLOW_UP} point: a sound answer to one follow-up question.

Subtract {NEW_SYMPTOM} point for every new symptom `kata grade` reports (a problem the candidate introduced).
A fix that breaks training earns no fix points: the health gate fails where the task's own run passed it, or
still fails once every bug is fixed. Maximum: {PER_BUG * bugs} points.
`kata grade` computes the fix points and the new symptoms' cost; add the interview's points to its score."""
