"""Randomized interview tasks: several disguised bugs, a candidate brief, an answer key, grading."""
