"""``python -m openenv_lab`` is the ``openenv-lab`` command."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
