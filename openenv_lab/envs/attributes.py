"""gymnasium's ``call``, ``get_attr`` and ``set_attr`` over the sub-environments of `OpenEnvVectorEnv`.

A sub-environment of our vector env is a session and its adapter, not a ``gymnasium.Env``; these give it
the attributes its single env (`OpenEnvEnv`) would have, so code written for ``SyncVectorEnv`` (sb3-contrib's
``envs.call("action_masks")``, say) works unchanged. ``set_attr`` of a reset option of the family (chess's
``opponent``, Atari's ``difficulty``: `Adapter.reset_option_names`) changes what each sub-environment sends
from its next reset on, the way a curriculum moves to its next stage.
"""

from __future__ import annotations

import warnings
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
        ``values`` is a list or tuple, else to ``values`` for all.

        A reset option of the family (`Adapter.reset_option_names`: chess's ``opponent``, ``agent_color``,
        ...; Atari's ``mode``, ``difficulty``; FinRL's ``split``) is sent from each sub-environment's next
        reset on (``None``: the server's default), checked first, for every sub-environment, so a bad value
        changes none. The family's own attributes are set on its adapter. Any other name is stored and read
        back by `get_attr`, as ``SyncVectorEnv`` does, with a warning that it reaches no server.

        Example:
            >>> import gymnasium as gym, openenv_lab
            >>> envs = gym.make_vec("openenv/chess", num_envs=2, opponent="random")
            >>> envs.set_attr("opponent", ["greedy", "minimax"])  # from each one's next reset on
            >>> envs.get_attr("opponent")
            ('greedy', 'minimax')
            >>> envs.close()
        """
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(
                "Values must be a list or tuple with length equal to the number of environments. "
                f"Got `{len(values)}` values for {self.num_envs} environments."
            )
        pairs = list(zip(self.adapters, values, strict=True))
        if all(name in adapter.reset_option_names for adapter, _ in pairs):
            for adapter, value in pairs:
                if value is not None:
                    adapter.check_reset_option(name, value)
            for adapter, value in pairs:
                adapter.set_reset_option(name, value)
            return
        if all(name in adapter.env_attributes for adapter, _ in pairs):
            for adapter, value in pairs:
                setattr(adapter, name, value)
            return
        options = ", ".join(self.adapters[0].reset_option_names) or "they have none"
        warnings.warn(
            f"envs.set_attr({name!r}, ...): {name!r} is neither a reset option of these environments "
            f"({options}) nor one of their attributes: it is stored and get_attr reads it back, as "
            "SyncVectorEnv does, but it reaches no server",
            UserWarning,
            stacklevel=2,
        )
        stored = self._stored_attributes()
        for i, value in enumerate(values):
            stored[i][name] = value

    def _stored_attributes(self) -> list[dict[str, Any]]:
        """What `set_attr` stored for names that reach no server, per sub-environment."""
        stored: list[dict[str, Any]] | None = self.__dict__.get("_set_attributes")
        if stored is None or len(stored) != self.num_envs:
            stored = [{} for _ in range(self.num_envs)]
            self.__dict__["_set_attributes"] = stored
        return stored

    def _sub_environment_attribute(self, i: int, name: str) -> Any:
        adapter = self.adapters[i]
        if name in adapter.env_attributes:
            return getattr(adapter, name)
        if name in adapter.reset_option_names:
            return adapter.reset_options.get(name)  # None: the server's default
        stored = self._stored_attributes()[i]
        if name in stored:
            return stored[name]
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
            known = sorted([*adapter.env_attributes, *adapter.reset_option_names, *shared])
            raise AttributeError(f"Sub-environments have no attribute {name!r}; they have {known}")
        return shared[name]()
