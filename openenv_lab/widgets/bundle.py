"""What a notebook front end is handed to show a widget, on ipywidgets 7.7 and 8 alike.

ipywidgets 8 widgets answer ``_repr_mimebundle_``; those of 7 (what Colab's front end speaks: 7.7.1) only
display themselves through ``_ipython_display_``. Our displayable objects (the viewer, the reward curve,
the evaluation report) build one bundle with both the live widget's view and a static picture beside it,
for renderers without a kernel (GitHub, nbviewer), so they need the widget's part as data on both.
"""

from __future__ import annotations

from typing import Any

__all__ = ["widget_bundle"]

#: The widget view's MIME type, in the protocol version both ipywidgets 7.7 and 8 front ends read.
VIEW_MIMETYPE = "application/vnd.jupyter.widget-view+json"


def widget_bundle(widget: Any, **kwargs: Any) -> dict[str, Any]:
    """The MIME bundle that displays ``widget``: ipywidgets' own on 8, the same data built on 7.

    Example:
        >>> import ipywidgets
        >>> bundle = widget_bundle(ipywidgets.HTML("<b>hi</b>"))
        >>> sorted(bundle)
        ['application/vnd.jupyter.widget-view+json', 'text/plain']
        >>> bundle[VIEW_MIMETYPE]["version_major"]
        2
    """
    own = getattr(widget, "_repr_mimebundle_", None)
    if own is not None:  # ipywidgets 8
        return dict(own(**kwargs))
    # ipywidgets 7.7: what Widget._ipython_display_ hands IPython's display, as data.
    plain = repr(widget)
    bundle: dict[str, Any] = {"text/plain": plain[:110] + "…" if len(plain) > 110 else plain}
    if widget._view_name is not None:
        bundle[VIEW_MIMETYPE] = {"version_major": 2, "version_minor": 0, "model_id": widget.model_id}
        widget._handle_displayed()  # on_displayed callbacks (7.x passes IPython's include/exclude nowhere)
    return bundle
