"""Hugging Face Spaces as OpenEnv servers: where a Space answers, its image, and the token it needs.

A Space ``owner/name`` serves at ``https://{owner}-{name}.hf.space`` (lower case, with ``_`` and ``.``
turned into ``-``, as the Hub names them) and runs the image ``registry.hf.space/{owner}-{name}:latest``.
A private or gated Space needs a Hugging Face token, sent as ``Authorization: Bearer <token>`` with every
HTTP request and WebSocket upgrade.

Tokens are sent only where they are meant to go: `space_headers` reads ``$HF_TOKEN`` for a Space, never
for a ``base_url`` the user typed (pass ``token=`` explicitly there).

``$OPENENV_LAB_SPACE_URL`` replaces the Hub's address for every Space (a template that may use
``{owner}``, ``{name}`` and ``{subdomain}``): a server on this machine can then stand in for a Space,
which is how the test suite exercises this without network.

Example:
    >>> space_url("openenv/Echo_Env")
    'https://openenv-echo-env.hf.space'
    >>> space_image("openenv/Echo_Env")
    'registry.hf.space/openenv-echo-env:latest'
    >>> space_headers("hf_xxx", {"X-Trace": "1"})
    {'X-Trace': '1', 'Authorization': 'Bearer hf_xxx'}
"""

from __future__ import annotations

import os
import re

__all__ = [
    "SERVER_TOKEN_VARIABLE",
    "SPACE_URL_VARIABLE",
    "TOKEN_VARIABLE",
    "space_headers",
    "space_image",
    "space_url",
    "split_space",
]

#: Replaces the Hub's address of every Space (a template with ``{owner}``, ``{name}``, ``{subdomain}``).
SPACE_URL_VARIABLE = "OPENENV_LAB_SPACE_URL"
#: Where the token of a Space comes from when ``token=`` is not given.
TOKEN_VARIABLE = "HF_TOKEN"
#: Where the token of our own servers comes from when ``token=`` is not given (the servers read the same
#: variable, `openenv_lab.servers._auth.TOKEN_VARIABLE`).
SERVER_TOKEN_VARIABLE = "OPENENV_LAB_TOKEN"

_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def split_space(space: str) -> tuple[str, str]:
    """``"owner/name"`` as ``(owner, name)``; a `ValueError` saying the expected form otherwise."""
    if isinstance(space, str):
        text = space.strip()
        for prefix in ("https://huggingface.co/spaces/", "huggingface.co/spaces/", "spaces/"):
            if text.startswith(prefix):
                text = text[len(prefix) :]
        parts = text.strip("/").split("/")
        if len(parts) == 2 and all(_PART.match(part) for part in parts):
            return parts[0], parts[1]
    raise ValueError(
        f"space must name a Hugging Face Space as 'owner/name' (e.g. 'openenv/echo_env'), got {space!r}"
    )


def _subdomain(owner: str, name: str) -> str:
    return re.sub(r"[._]", "-", f"{owner}-{name}").lower()


def space_url(space: str) -> str:
    """The base URL of the Space (``$OPENENV_LAB_SPACE_URL`` when set)."""
    owner, name = split_space(space)
    subdomain = _subdomain(owner, name)
    template = os.environ.get(SPACE_URL_VARIABLE)
    if template:
        return template.format(owner=owner, name=name, subdomain=subdomain).rstrip("/")
    return f"https://{subdomain}.hf.space"


def space_image(space: str) -> str:
    """The Docker image the Hub builds for the Space."""
    return f"registry.hf.space/{_subdomain(*split_space(space))}:latest"


def space_headers(token: str | bool | None, headers: dict[str, str] | None = None) -> dict[str, str]:
    """``headers`` plus the Space's ``Authorization``: from ``token``, else ``$HF_TOKEN`` (``token=False``
    sends none). An ``Authorization`` already in ``headers`` is kept as it is."""
    result = dict(headers or {})
    if token is False or any(key.lower() == "authorization" for key in result):
        return result
    if token is None or token is True:
        token = os.environ.get(TOKEN_VARIABLE) or None
    if token is not None:
        if not isinstance(token, str) or not token.strip():
            raise ValueError(f"token must be a Hugging Face token (text), got {token!r}")
        result["Authorization"] = f"Bearer {token.strip()}"
    return result
