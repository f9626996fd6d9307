"""Settings for every test run, including the notebooks and tutorials that nbval executes.

Notebooks run in their smoke mode (tiny budgets, the same code path) and tutorials load their reference
solutions, so CI checks that the exercises' checks pass with correct answers. Kernels inherit these.
"""

import os

os.environ.setdefault("OPENENV_LAB_SMOKE", "1")
os.environ.setdefault("OPENENV_LAB_SOLUTIONS", "1")
