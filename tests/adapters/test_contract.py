"""The adapter contract in `openenv_lab.adapters.base`'s docstring names every attribute an adapter has."""

from __future__ import annotations

import re

from openenv_lab.adapters import Adapter, base


def test_the_contract_tables_name_every_attribute_of_an_adapter():
    """A new declaration on `Adapter` must be added to the tables, where adapter authors read the contract."""
    named = set(re.findall(r"``(\w+)``", base.__doc__ or ""))
    declared = {
        name
        for name in [*vars(Adapter), *Adapter.__annotations__]
        if not name.startswith("_") and not callable(getattr(Adapter, name, None))
    }
    assert declared, "Adapter declares nothing? the test reads the wrong class"
    assert declared - named == set(), (
        f"attributes of Adapter missing from its contract tables: {declared - named}"
    )
