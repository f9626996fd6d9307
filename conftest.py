"""Settings for every test run, including the notebooks and tutorials that nbval executes.

Notebooks run in their smoke mode (tiny budgets, the same code path) and tutorials load their reference
solutions, so CI checks that the exercises' checks pass with correct answers. Kernels inherit these.
"""

import importlib.util
import os

# RLlib (Ray 2.60) pins gymnasium 1.2.2: openenv_lab/rllib.py is tested in an environment of its own
# (tests/test_rllib.py); here its doctests are collected only where RLlib imports.
collect_ignore = [] if importlib.util.find_spec("tree") else ["openenv_lab/rllib.py"]  # tree: dm_tree

os.environ.setdefault("OPENENV_LAB_SMOKE", "1")
os.environ.setdefault("OPENENV_LAB_SOLUTIONS", "1")
# No progress bars in tests (the kernels nbval runs would otherwise show waits; tests that check them ask).
os.environ.setdefault("OPENENV_LAB_PROGRESS", "0")
