"""The course's exercise checks: one module per lesson of ``tutorials/``, one check per exercise.

A lesson's notebook hands each answer to its check, e.g. ``check.count_finished(count_finished, echo)``.
The check runs the answer on cases it works out itself (never from the answer's own output): it gives the
answer a watched environment (`_exercise.WatchedEnv`) that counts the steps, the seeds, the legal moves
and the time they took, and compares. A wrong answer raises `NotYetRight`, an `AssertionError` whose
message names the likely mistake and what to do; a right one prints ``Exercise N: correct``.

The checks live in the package rather than beside the notebooks so that a lesson opened on Colab, where
only the package is installed, checks answers the same way. ``tests/course/`` feeds every check the
reference answer (``tutorials/solutions/``) and typical wrong ones.

Example:
    >>> from openenv_lab.course import lesson_06 as check
    >>> def mean_and_interval(values):  # the population standard deviation: a classic slip
    ...     import numpy as np
    ...     from scipy import stats
    ...     t = stats.t.ppf(0.975, len(values) - 1)
    ...     return float(np.mean(values)), t * float(np.std(values)) / len(values) ** 0.5
    >>> check.mean_and_interval(mean_and_interval)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    openenv_lab.course.NotYetRight: Exercise 2 (mean_and_interval) is not right yet: ... `ddof=1` ...
"""

from ._exercise import Exercise, NotYetRight, WatchedEnv, WatchedVectorEnv

NotYetRight.__module__ = __name__  # shown as openenv_lab.course.NotYetRight in tracebacks

__all__ = ["Exercise", "NotYetRight", "WatchedEnv", "WatchedVectorEnv"]
