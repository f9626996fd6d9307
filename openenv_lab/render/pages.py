"""Static HTML: a trajectory replay that needs no kernel (GitHub, nbviewer, exported notebooks, e-mail).

`trajectory_html` renders every step's panes once (with the family's renderer), embeds them in one page
with a small scrubber (a range input, play/pause, the step table) written in plain JavaScript, and caps
the size: above ``max_bytes`` it keeps every k-th step and says so on the page, or refuses when
``sample=False``. `write_html` writes a page atomically.
"""

from __future__ import annotations

import html
import json
import os
import uuid
from pathlib import Path
from typing import Any, Protocol

from ..files import write_text_atomically
from .renderers import equity_curve_html, renderer_for, step_table

__all__ = ["DEFAULT_MAX_BYTES", "Recording", "side_by_side", "trajectory_html", "write_html"]


class Recording(Protocol):
    """What a page needs of a recording (an `openenv_lab.record.Trajectory`): this layer reads rows and
    metadata, and never imports the recording side."""

    metadata: dict[str, Any]

    @property
    def family(self) -> str: ...

    @property
    def episodes(self) -> list[int]: ...

    def episode(self, number: int) -> Any: ...


#: The largest page we write by default: notebooks and browsers slow down beyond this.
DEFAULT_MAX_BYTES = 20_000_000


def trajectory_html(
    trajectory: Recording,
    *,
    episode: int | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    sample: bool = True,
    fps: int = 4,
    title: str | None = None,
) -> str:
    """A self-contained HTML replay of one episode (the first by default); ``title`` goes before the
    env id and episode in its heading."""
    if not trajectory.episodes:
        return (
            "<p><i>Empty trajectory: nothing was recorded yet (reset and step the environment first).</i></p>"
        )
    number = trajectory.episodes[0] if episode is None else episode
    rows = trajectory.episode(number).table
    family = trajectory.family
    renderer = renderer_for(family)
    metadata = trajectory.metadata

    static_main = family == "finrl"  # one equity curve for every step (no per-step redraw)
    # Estimate the page from a few steps spread over the episode, then keep every k-th step if needed.
    probes = sorted({round(k * (rows.height - 1) / 19) for k in range(20)})
    sampled = [_step(renderer, rows, i, metadata, static_main) for i in probes]
    per_step = len(json.dumps(sampled)) / len(probes)
    estimate = per_step * rows.height
    stride = 1
    if estimate > max_bytes:
        if not sample:
            raise ValueError(
                f"This episode would make a page of about {estimate / 1e6:.0f} MB, over the "
                f"{max_bytes / 1e6:.0f} MB cap: pass sample=True to keep every k-th step, or max_bytes=..."
            )
        stride = int(-(-estimate // max_bytes))
    while True:
        steps = [_step(renderer, rows, i, metadata, static_main) for i in range(0, rows.height, stride)]
        if len(json.dumps(steps)) <= max_bytes or stride >= rows.height:
            break
        stride *= 2  # the estimate was short: halve again
    note = ""
    if stride > 1:
        note = f"Showing every {stride}th of {rows.height} steps to stay under {max_bytes / 1e6:.0f} MB."
    header = equity_curve_html(rows, cursor=None, metadata=metadata) if static_main else ""
    heading = f"{metadata.get('env_id', 'trajectory')} · episode {number}"
    title = f"{title} · {heading}" if title else heading
    return _page(title, header, steps, note, fps)


def _step(
    renderer: Any, rows: Any, index: int, metadata: dict[str, Any], static_main: bool
) -> dict[str, str]:
    panes = renderer(rows, index, metadata, main=not static_main)
    return {
        "main": "" if static_main else panes["main"],
        "side": panes["side"],
        "table": step_table(rows, index),
        "step": str(rows["step"][index]),
    }


def _page(title: str, header: str, steps: list[dict[str, str]], note: str, fps: int) -> str:
    uid = "oel" + uuid.uuid4().hex[:8]
    data = json.dumps(steps).replace("</", "<\\/")  # never close the script element early
    delay = max(20, int(1000 / max(1, fps)))
    return f"""<div id="{uid}" style="font-family:sans-serif">
<div style="font-weight:600;margin-bottom:4px">{html.escape(title)}</div>
{f'<div style="color:#a05a00;font-size:12px">{html.escape(note)}</div>' if note else ""}
{header}
<div style="display:flex;gap:16px;align-items:flex-start">
  <div class="main"></div><div class="side"></div><div class="table"></div>
</div>
<div style="margin-top:6px">
  <button class="play">&#9654; play</button>
  <input class="scrub" type="range" min="0" max="{len(steps) - 1}" value="0" style="width:320px">
  <span class="label"></span>
</div>
<script>
(function() {{
  var root = document.getElementById("{uid}"), steps = {data}, timer = null;
  var scrub = root.querySelector(".scrub"), button = root.querySelector(".play");
  function show(i) {{
    var f = steps[i];
    root.querySelector(".main").innerHTML = f.main;
    root.querySelector(".side").innerHTML = f.side;
    root.querySelector(".table").innerHTML = f.table;
    root.querySelector(".label").textContent = "step " + f.step;
  }}
  scrub.addEventListener("input", function() {{ show(+scrub.value); }});
  button.addEventListener("click", function() {{
    if (timer) {{ clearInterval(timer); timer = null; button.innerHTML = "&#9654; play"; return; }}
    button.innerHTML = "&#10074;&#10074; pause";
    timer = setInterval(function() {{
      if (+scrub.value >= steps.length - 1) {{ scrub.value = 0; }} else {{ scrub.value = +scrub.value + 1; }}
      show(+scrub.value);
    }}, {delay});
  }});
  show(0);
}})();
</script>
</div>"""


def side_by_side(*pages: str) -> str:
    """Pages (e.g. two replays) next to each other, wrapping on narrow screens."""
    columns = "".join(f"<div>{page}</div>" for page in pages)
    return f'<div style="display:flex;gap:32px;align-items:flex-start;flex-wrap:wrap">{columns}</div>'


def write_html(path: str | os.PathLike[str], page: str) -> Path:
    """Write a page as a complete HTML document, atomically (temporary file, then rename; see
    `openenv_lab.files.write_atomically` for the file's mode and the errors)."""
    head = '<!doctype html>\n<html><head><meta charset="utf-8"><title>openenv_lab</title></head><body>\n'
    return write_text_atomically(path, f"{head}{page}\n</body></html>\n", what="the page")
