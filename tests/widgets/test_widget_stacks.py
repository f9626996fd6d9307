"""The display bundles of our widgets on both ipywidgets lines: 8 (this environment) and 7.7.1 (Colab's
front end; the venv of Colab's versions that scripts/colab_tier.py builds, ``OPENENV_LAB_COLAB_PYTHON``).

Each bundle holds the live widget's view and a static picture beside it (``text/html``), which GitHub,
nbviewer and exported pages show where no widget front end runs. IPython's own formatter builds them, as
in a notebook: a display hook that raises would leave only the static picture and a traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
COLAB_PYTHON = os.environ.get("OPENENV_LAB_COLAB_PYTHON")

SCRIPT = """
import json, warnings
import gymnasium as gym, ipywidgets, numpy as np
from IPython.core.interactiveshell import InteractiveShell
import openenv_lab

shell = InteractiveShell.instance()
env = openenv_lab.RecordTrajectory(gym.make("openenv/echo", max_steps=3))
env.reset(seed=0)
for word in ("a", "bb", "ccc"):
    env.step(word)
curve = openenv_lab.RewardCurve(redraw_every=0)
for value in (1.0, 2.0, 0.5):
    curve.add_episode(value, length=3)
hello = openenv_lab.evaluate(lambda obs: "hello", "openenv/echo", episodes=4, max_steps=2, progress=False)
hi = openenv_lab.evaluate(lambda obs: "hi", "openenv/echo", episodes=4, max_steps=2, progress=False)
shown = {
    "viewer": openenv_lab.show(env),
    "curve": curve,
    "comparison": openenv_lab.compare(hello, hi, labels=("hello", "hi")),
}
out = {"ipywidgets": ipywidgets.__version__}
with warnings.catch_warnings():
    warnings.simplefilter("error")  # IPython reports a failing formatter as a warning
    for name, thing in shown.items():
        data, _ = shell.display_formatter.format(thing)
        out[name] = {mime: str(value)[:200] for mime, value in data.items()}
env.close()
print("BUNDLES " + json.dumps(out))
"""

STACKS = [pytest.param(sys.executable, id="ipywidgets-8")]
STACKS.append(
    pytest.param(
        COLAB_PYTHON,
        id="ipywidgets-7.7-colab",
        marks=pytest.mark.skipif(
            not COLAB_PYTHON, reason="no venv of Colab's versions (scripts/colab_tier.py; .ci/run sets it)"
        ),
    )
)


@pytest.mark.slow
@pytest.mark.parametrize("python", STACKS)
def test_each_display_holds_the_live_widget_and_a_static_picture(python):
    done = subprocess.run(
        [python, "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},  # this checkout's code, on that stack's packages
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("BUNDLES ")]
    bundles = json.loads(line.removeprefix("BUNDLES "))
    major = bundles.pop("ipywidgets").split(".")[0]
    assert major == ("7" if python == COLAB_PYTHON else "8")
    for name, bundle in bundles.items():
        assert "application/vnd.jupyter.widget-view+json" in bundle, (name, sorted(bundle))
        assert '"model_id"' in bundle["application/vnd.jupyter.widget-view+json"].replace("'", '"'), name
        static = bundle["text/html"]
        assert "<svg" in static or "<img" in static or "<div" in static, (name, static)
