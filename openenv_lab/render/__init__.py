"""Drawing recorded steps, without widgets: per-family HTML fragments and self-contained replay pages.

- `openenv_lab.render.renderers`: how each family draws one recorded step (board, screen, equity curve),
  from the rows alone; `register_renderer` adds a family;
- `openenv_lab.render.pages`: a whole episode as one HTML page with a scrubber that needs no kernel
  (GitHub, nbviewer, exported notebooks), written atomically.

This layer reads recorded rows and metadata only: it never talks to servers, never imports the recording
side (`openenv_lab.record`), and needs neither ipywidgets nor a kernel. The live widgets
(`openenv_lab.widgets`) draw with the same fragments, so a page and a widget always show the same thing.
"""

from .pages import DEFAULT_MAX_BYTES, side_by_side, trajectory_html, write_html
from .renderers import register_renderer, renderer_for, step_table

__all__ = [
    "DEFAULT_MAX_BYTES",
    "register_renderer",
    "renderer_for",
    "side_by_side",
    "step_table",
    "trajectory_html",
    "write_html",
]
