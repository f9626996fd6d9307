"""gymnasium's ``call``, ``get_attr`` and ``set_attr`` over the sub-environments of `OpenEnvVectorEnv`.

A sub-environment of our vector env is a session and its adapter, not a ``gymnasium.Env``; these give it
the attributes its single env (`OpenEnvEnv`) would have, so code written for ``SyncVectorEnv`` (sb3-contrib's
``envs.call("action_masks")``, say) works unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..adapters import Adapter
    from ._episode import Episode

__all__ = ["SubEnvironmentAttributes"]


class SubEnvironmentAttributes:
    """The ``call``/``get_attr``/``set_attr`` half of a vector env whose sub-environments are adapters."""

    num_envs: int
    adapters: list[Adapter]
    episodes: list[Episode]
    single_action_space: Any
    single_observation_space: Any
    render_mode: str | None
    metadata: dict[str, Any]
    spec: Any

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call the method ``name`` of every sub-environment (or read the attribute, if it is not one), as
        ``SyncVectorEnv.call`` does: e.g. ``envs.call("action_masks")`` for sb3-contrib's masking.

        A sub-environment's attributes are those its single env would expose for the family (chess:
        ``action_masks``; Atari: ``ale``, ``get_action_meanings``; FinRL: ``layout``, ``tickers``), plus
        ``action_space``, ``observation_space``, ``np_random``, ``np_random_seed``, ``render_mode``,
        ``metadata``, ``spec``, ``render``, ``adapter`` and ``base_url``.
        """
        results = []
        for i in range(self.num_envs):
            value = self._sub_environment_attribute(i, name)
            results.append(value(*args, **kwargs) if callable(value) else value)
        return tuple(results)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """The attribute ``name`` of every sub-environment (methods are called, as gymnasium does)."""
        return self.call(name)

    def set_attr(self, name: str, values: list[Any] | tuple[Any, ...] | Any) -> None:
        """Set the attribute ``name`` of every sub-environment: to ``values[i]`` for sub-environment i when
        ``values`` is a list or tuple, else to ``values`` for all. Only the family's own attributes (those
        its single env exposes) can be set; the rest belong to the vector env."""
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(
                "Values must be a list or tuple with length equal to the number of environments. "
                f"Got `{len(values)}` values for {self.num_envs} environments."
            )
        for adapter, value in zip(self.adapters, values, strict=True):
            if name not in adapter.env_attributes:
                raise AttributeError(
                    f"Sub-environments have no attribute {name!r} that can be set; the family's own are "
                    f"{list(adapter.env_attributes) or 'none'}"
                )
            setattr(adapter, name, value)

    def _sub_environment_attribute(self, i: int, name: str) -> Any:
        adapter = self.adapters[i]
        if name in adapter.env_attributes:
            return getattr(adapter, name)
        shared = {
            "action_space": lambda: self.single_action_space,
            "observation_space": lambda: self.single_observation_space,
            "np_random": lambda: self.episodes[i].np_random,
            "np_random_seed": lambda: self.episodes[i].np_random_seed,
            "render_mode": lambda: self.render_mode,
            "metadata": lambda: self.metadata,
            "spec": lambda: self.spec,
            "render": lambda: lambda: adapter.render(self.render_mode) if self.render_mode else None,
            "adapter": lambda: adapter,
            "base_url": lambda: self.episodes[i].base_url,
        }
        if name not in shared:
            known = sorted([*adapter.env_attributes, *shared])
            raise AttributeError(f"Sub-environments have no attribute {name!r}; they have {known}")
        return shared[name]()
