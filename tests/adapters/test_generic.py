"""Schema inference of the generic adapter on JSON Schemas made by pydantic, as OpenEnv servers make them."""

from __future__ import annotations

import json
import re
from enum import Enum
from typing import Optional

import numpy as np
import pytest
from gymnasium import spaces
from pydantic import BaseModel, Field

from openenv_lab.adapters.generic import GenericAdapter, JSONText, UnicodeText
from openenv_lab.client import ProtocolError, StepResult


def adapter_for(
    action: type[BaseModel], observation: type[BaseModel], first: dict, **options
) -> GenericAdapter:
    adapter = GenericAdapter(**options)
    adapter.schema = {"action": action.model_json_schema(), "observation": observation.model_json_schema()}
    adapter._build_action_space(adapter.schema["action"])
    adapter._build_observation_space(StepResult(first, 0.0, False, {}))
    return adapter


class Empty(BaseModel):
    pass


def test_mcp_tool_calls_send_their_constant_and_can_include_arguments():
    from openenv_lab.servers import import_openenv_server

    mcp = import_openenv_server().CallToolAction  # the official MCP action model
    default = adapter_for(mcp, Empty, {})
    assert isinstance(default.action_space, UnicodeText)  # only the required tool_name
    assert default.encode_action("echo_message") == {"type": "call_tool", "tool_name": "echo_message"}

    chosen = adapter_for(mcp, Empty, {}, action_fields=["tool_name", "arguments"])
    assert isinstance(chosen.action_space["arguments"], JSONText)
    payload = chosen.encode_action({"tool_name": "echo_message", "arguments": '{"message": "hi"}'})
    assert payload == {"type": "call_tool", "tool_name": "echo_message", "arguments": {"message": "hi"}}
    mcp.model_validate(payload)  # the server's own model accepts it
    sample = chosen.action_space.sample()
    mcp.model_validate(chosen.encode_action(sample))  # and random actions are valid too

    with pytest.raises(ValueError, match="not in the action schema"):
        adapter_for(mcp, Empty, {}, action_fields=["tool"])


class Node(BaseModel):
    value: int = 0
    children: list[Node] = Field(default_factory=list)
    parent: Optional[Node] = None  # noqa: UP045 - the Optional form pydantic users write


class Tree(BaseModel):
    root: Node


class Move(BaseModel):
    steps: int = Field(..., ge=0, le=100_000)


class Unbounded(BaseModel):
    steps: int


def test_an_integer_action_without_bounds_gets_the_widest_integer_space_and_one_warning():
    from openenv_lab.adapters.schema import SAMPLE_SPAN, WideInteger

    with pytest.warns(UserWarning, match=r"'steps' is an integer without bounds") as said:
        adapter = adapter_for(Unbounded, Tree, {"root": {"value": 1, "children": []}})
    assert len(said) == 1 and "spec=Spec('mine', action='steps', actions=N))" in str(said[0].message)
    assert adapter.action_space == WideInteger() and 2**62 in adapter.action_space
    adapter.action_space.seed(0)
    samples = [int(adapter.action_space.sample()) for _ in range(200)]
    assert all(0 <= value < SAMPLE_SPAN for value in samples)  # ones a server takes, not +-2**63
    assert adapter.encode_action(np.int64(2**40)) == {"steps": 2**40}
    Unbounded.model_validate(adapter.encode_action(adapter.action_space.sample()))


class HalfBounded(BaseModel):
    above: int = Field(..., ge=5)
    below: int = Field(..., lt=0)


def test_a_one_sided_bound_is_kept_and_samples_start_from_it():
    with pytest.warns(UserWarning, match="without bounds"):
        adapter = adapter_for(HalfBounded, Empty, {})
    above, below = adapter.action_space["above"], adapter.action_space["below"]
    assert 4 not in above and 2**62 in above and 0 not in below and -(2**62) in below
    adapter.action_space.seed(1)
    for _ in range(100):
        HalfBounded.model_validate(adapter.encode_action(adapter.action_space.sample()))


def test_recursive_models_do_not_recurse_forever():
    adapter = adapter_for(Move, Tree, {"root": {"value": 1, "children": [{"value": 2, "children": []}]}})
    root = adapter.observation_space["root"]
    assert isinstance(root["children"], spaces.Sequence)
    assert isinstance(root["children"].feature_space, JSONText)  # a Node inside a Node: JSON text
    observation = adapter.decode(StepResult({"root": {"value": 1, "children": []}}, 0.0, False, {}), None)
    assert observation.observation in adapter.observation_space


class Bounded(BaseModel):
    level: int = Field(..., gt=0, lt=5)
    share: float = Field(..., gt=0.0, lt=1.0)


def test_exclusive_bounds_are_exclusive():
    adapter = adapter_for(Bounded, Empty, {})
    assert adapter.action_space["level"] == spaces.Discrete(4, start=1)
    share = adapter.action_space["share"]
    assert 0.0 < share.low <= share.high < 1.0
    for _ in range(50):
        Bounded.model_validate(adapter.encode_action(adapter.action_space.sample()))


class Lists(BaseModel):
    prices: list[float] = Field(default_factory=list)
    ragged: list[list[int]] = Field(default_factory=list)
    note: Optional[str] = Field(default=None, min_length=3)  # noqa: UP045


def test_empty_first_lists_become_sequences_and_ragged_ones_json():
    adapter = adapter_for(Move, Lists, {"prices": [], "ragged": [[1], [2, 3]], "note": None})
    assert isinstance(adapter.observation_space["prices"], spaces.Sequence)
    assert isinstance(adapter.observation_space["ragged"], JSONText)
    later = adapter.decode(
        StepResult({"prices": [1.5, 2.5], "ragged": [[1, 2]], "note": None}, 0.0, False, {}), {}
    )
    assert later.observation in adapter.observation_space
    np.testing.assert_array_equal(later.observation["prices"], [1.5, 2.5])
    assert json.loads(later.observation["ragged"]) == [[1, 2]]
    assert later.observation["note"] == ""  # null, and the nullable string's space accepts ""


def test_a_numeric_list_that_changes_shape_is_a_clear_error():
    adapter = adapter_for(Move, Lists, {"prices": [1.0, 2.0], "ragged": [], "note": "abc"})
    from openenv_lab.client import ProtocolError

    with pytest.raises(ProtocolError, match="changed shape"):
        adapter.decode(StepResult({"prices": [1.0], "ragged": [], "note": "abc"}, 0.0, False, {}), {})


def test_json_text_samples_are_valid_json():
    space = JSONText(sample_value={})
    assert json.loads(space.sample()) == {}
    assert "[1, 2]" in space and "{oops" not in space


def test_reward_components_keep_finite_numbers_only():
    from openenv_lab.adapters.base import reward_components

    metadata = {
        "reward_components": {
            "market": 1,
            "costs": -0.5,
            "flag": True,
            "text": "x",
            "nan": float("nan"),
            "inf": float("-inf"),
            "huge": 10**400,  # an integer JSON allows and no float holds
            "big": 10**300,
        }
    }
    assert reward_components(metadata) == {"market": 1.0, "costs": -0.5, "big": 1e300}
    assert reward_components({"reward_components": [1, 2]}) == {}


class Board(BaseModel):
    board: list[list[int]] = Field(default_factory=list)
    turn: str = "white"
    note: str = ""


def test_a_specs_observation_keeps_the_fields_it_names_with_the_spaces_it_declares():
    from openenv_lab.adapters.spec import Spec

    first = {"board": [[0, 1], [1, 0]], "turn": "white", "note": "hi"}
    box = spaces.Box(0, 1, (2, 2), np.int64)
    declared = adapter_for(Move, Board, first, spec=Spec("b", observation={"board": box, "turn": None}))
    assert list(declared.observation_space) == ["board", "turn"]
    assert declared.observation_space["board"] == box  # declared; "turn" inferred from the schema
    assert isinstance(declared.observation_space["turn"], UnicodeText)
    named = adapter_for(Move, Board, first, spec=Spec("b", observation=["note"]))
    assert list(named.observation_space) == ["note"]
    everything = adapter_for(Move, Board, first, spec=Spec("b"))
    assert list(everything.observation_space) == ["board", "note", "turn"]  # a Dict sorts its keys
    with pytest.raises(ProtocolError, match=r"keeps observation fields \['score'\] that this server"):
        adapter_for(Move, Board, first, spec=Spec("b", observation=["board", "score"]))


class Order(BaseModel):
    action: str = "wait"
    x: Optional[int] = None  # noqa: UP045
    y: Optional[int] = None  # noqa: UP045


def test_actions_from_json_round_trip_and_say_why_when_they_do_not_fit():
    """`action_from_json` (TRL's tools and replays go through it) on each kind of action space, and
    `action_fields`, `describe_action` and `trajectory_metadata` beside it."""
    from openenv_lab.adapters.spec import Spec

    counted = adapter_for(Move, Empty, {}, spec=Spec("steps", action="steps", actions=[1, 5, 10]))
    assert counted.action_fields() == ["steps"] and counted.action_from_json({"steps": 5}) == 1
    assert counted.describe_action(2) == "10" and counted.encode_action(2) == {"steps": 10}
    with pytest.raises(ValueError, match=r"steps takes one of \[1, 5, 10\], got 7"):
        counted.action_from_json({"steps": 7})
    assert counted.trajectory_metadata() == {"server_names": [], "spec": "steps"}

    plain = adapter_for(Move, Empty, {})
    assert plain.action_fields() == ["steps"] and plain.action_from_json({"steps": 42}) == 42
    assert plain.describe_action(np.int64(42)) == "42"
    assert plain.action_from_json({"steps": 3.0}) == 3  # the same number
    for wrong in ("many", None, 3.5, 100_001, -1, [1]):  # never sent as something else, nor clipped
        said = re.escape(f"steps={wrong!r} does not fit its space Box(0, 100000")
        with pytest.raises(ValueError, match=said):
            plain.action_from_json({"steps": wrong})
    with pytest.raises(ValueError, match=r"The action needs 'steps'; it was given \['step'\]"):
        plain.action_from_json({"step": 1})
    plain.server_names = ["MoveEnvironment"]
    assert plain.trajectory_metadata() == {"server_names": ["MoveEnvironment"], "spec": None}

    both = adapter_for(HalfBounded, Empty, {}, action_fields=["below", "above"])
    assert both.action_fields() == ["below", "above"]
    assert both.action_from_json({"above": 6, "below": -3}) == {"above": 6, "below": -3}
    with pytest.raises(ValueError, match=r"above=4 does not fit"):
        both.action_from_json({"above": 4, "below": -3})

    orders = [{"action": "wait"}, {"action": "water", "x": 0, "y": 0}, {"action": "water", "x": 1, "y": 0}]
    whole = adapter_for(Order, Empty, {}, spec=Spec("orders", actions=orders))
    assert whole.action_from_json({"action": "water", "x": 1, "y": 0}) == 2
    assert whole.action_from_json({"action": "wait", "x": None, "y": None}) == 0  # unset fields: null
    assert whole.describe_action(1) == "{'action': 'water', 'x': 0, 'y': 0}"
    assert whole.encode_action(np.int64(1)) == {"action": "water", "x": 0, "y": 0}
    assert whole.action_from_json({"y": 0, "x": 1, "action": "water"}) == 2  # in any order
    assert both.describe_action({"above": 6, "below": -3}) == str({"above": 6, "below": -3})
    with pytest.raises(ValueError, match=r"is not one of this environment's 3 actions"):
        whole.action_from_json({"action": "water", "x": 5, "y": 0})


class Listed(BaseModel):
    legal_actions: list[int] = Field(default_factory=list)
    note: str = ""


def test_the_legal_actions_field_is_the_specs_or_a_conventional_name():
    """`_find_legal_field`'s branches (mutants of each left the tests of this file passing)."""
    from openenv_lab.adapters.spec import Spec

    first = {"legal_actions": [0, 2], "note": ""}
    named = adapter_for(
        Move, Listed, first, spec=Spec("n", action="steps", actions=3, legal_actions="legal_actions")
    )
    assert (
        "action_mask" in named.observation_space.spaces
        and "legal_actions" not in named.observation_space.spaces
    )
    found = adapter_for(
        Move, Listed, first, spec=Spec("n", action="steps", actions=3)
    )  # the conventional name
    assert found.observation_space == named.observation_space
    plain = adapter_for(Move, Listed, first)  # no values known: the list stays an observation
    assert (
        "legal_actions" in plain.observation_space.spaces
        and "action_mask" not in plain.observation_space.spaces
    )
    said = "names 'moves' as the legal actions, but the observation has no such field: ['legal_actions', 'n"
    with pytest.raises(ProtocolError, match=re.escape(said)):
        adapter_for(Move, Listed, first, spec=Spec("n", action="steps", actions=3, legal_actions="moves"))
    said = "names legal actions but not the action's values: add actions=N (the count) or actions=[...] (the"
    with pytest.raises(ValueError, match=re.escape(said)):
        adapter_for(Move, Listed, first, spec=Spec("n", action="steps", legal_actions="legal_actions"))


def test_an_integer_among_a_list_of_types_is_an_integer_too():
    from openenv_lab.adapters.generic import _unbounded_integer

    assert _unbounded_integer({"type": ["integer", "null"]}) and _unbounded_integer(
        {"type": "integer", "minimum": 0}
    )
    assert not _unbounded_integer({"type": ["integer", "null"], "minimum": 0, "maximum": 3})
    assert not _unbounded_integer({"type": ["string", "null"]}) and not _unbounded_integer({"type": "number"})


def test_json_values_are_compared_as_sent():
    from openenv_lab.adapters.generic import _same

    assert _same(3, 3.0) and not _same(3, 3.5) and _same([1, 2], [1.0, 2.0]) and not _same([1, 2], [1, 2, 3])
    assert _same({"a": [1]}, {"a": [1]}) and not _same({"a": [1]}, {"a": [2]}) and not _same({"a": 1}, 1)
    assert _same([[1], [2, 3]], [[1], [2, 3]]) and not _same([[1], [2, 3]], [[1], [2, 4]])  # ragged
    assert _same("hi", "hi") and not _same("hi", "ho") and not _same(None, 0)
    assert not _same([1, "a"], ["1", "a"]) and not _same(["1"], [1]) and _same([1, "a"], [1, "a"])


def test_decoding_a_step_ends_rewards_and_masks_as_the_server_says():
    """`GenericAdapter.decode` on each of its paths (mutations of each left this file's tests passing; the
    servers' tests elsewhere see most of them, not all)."""
    from openenv_lab.adapters.spec import Spec

    spec = Spec("n", action="steps", actions=3, legal_actions="legal_actions")
    adapter = adapter_for(Move, Listed, {"legal_actions": [0, 1, 2], "note": ""}, spec=spec)
    step = adapter.decode(StepResult({"legal_actions": [2], "note": "hi"}, 0.5, False, {}), {"steps": 0})
    assert step.observation["action_mask"].tolist() == [0, 0, 1] and step.observation["note"] == "hi"
    assert adapter.legal_actions() == [2] and adapter.action_masks().tolist() == [False, False, True]
    assert (step.reward, step.terminated, step.truncated) == (0.5, False, False)
    # The info: the scalar fields (not the list of legal actions: the mask is in the observation)
    assert step.info == {"reward_missing": False, "note": "hi"}
    assert json.loads(adapter.render("ansi")) == {"legal_actions": [2], "note": "hi"}

    ended = adapter.decode(StepResult({"legal_actions": None}, None, True, {}), None)
    assert (ended.reward, ended.terminated, ended.truncated) == (0.0, True, False)
    assert ended.info["reward_missing"] is True and adapter.legal_actions() == []
    assert ended.observation["action_mask"].tolist() == [0, 0, 0] and ended.observation["note"] == ""
    cut = adapter.decode(StepResult({"legal_actions": [0]}, -1.0, True, {"truncated": True}), None)
    assert (cut.reward, cut.terminated, cut.truncated) == (-1.0, False, True)
    said = adapter.decode(StepResult({"legal_actions": [0]}, 1.0, False, {"truncated": True}), None)
    assert not said.terminated and not said.truncated  # "truncated" counts only when the episode is done
    levels = adapter_for(Move, Bounded, {"level": 1, "share": 0.5})
    with pytest.raises(
        ProtocolError, match=r"observation field 'level' = 'high', which its /schema does not"
    ):
        levels.decode(StepResult({"level": "high", "share": 0.5}, 0.0, False, {}), None)

    with pytest.warns(UserWarning, match="without bounds"):
        listed = adapter_for(Unbounded, Listed, {"legal_actions": [0, 7], "note": ""})
    step = listed.decode(StepResult({"legal_actions": [7, 9], "note": ""}, 1.0, False, {}), None)
    assert listed.legal_actions() == [7, 9] and "action_mask" not in step.observation
    assert "legal_actions" not in step.info  # a list of any length does not stack
    listed.decode(StepResult({"note": ""}, 1.0, False, {}), None)
    assert listed.legal_actions() == []


class Color(str, Enum):
    red = "red"
    blue = "blue"


class Paint(BaseModel):
    metadata: dict = Field(default_factory=dict)  # every OpenEnv action has it: never an action field
    color: Color  # a $ref into $defs


class Palette(BaseModel):
    available_actions: list[str] = Field(default_factory=list)


def test_action_spaces_from_refs_enums_and_declared_spaces():
    from openenv_lab.adapters.spec import Spec

    paint = adapter_for(Paint, Palette, {"available_actions": ["red"]})
    assert paint.action_fields() == ["color"] and paint.action_space == spaces.Discrete(2)
    assert paint.encode_action(1) == {"color": "blue"} and paint.describe_action(1) == "blue"
    step = paint.decode(StepResult({"available_actions": ["blue"]}, 0.0, False, {}), None)
    assert step.observation["action_mask"].tolist() == [0, 1]  # an enum's values are masked by name

    box = spaces.Box(0.0, 1.0, (2,), np.float64)
    declared = adapter_for(Move, Empty, {}, spec=Spec("d", action="steps", action_space=box))
    assert declared.action_space == box
    assert declared.encode_action(np.array([0.25, 0.5])) == {"steps": [0.25, 0.5]}
    assert declared.action_from_json({"steps": [0.25, 0.5]}).tolist() == [0.25, 0.5]
    with pytest.raises(ValueError, match=r"has shape \(3,\), but its declared space is Box"):
        declared.action_from_json({"steps": [0.1, 0.2, 0.3]})
    with pytest.raises(
        ValueError, match=r"The spec 'd' gives the action's values: name its one field, action="
    ):
        adapter_for(HalfBounded, Empty, {}, spec=Spec("d", action_space=box))

    with pytest.raises(ValueError, match=r"There is no spec called 'nope'; there are atari, chess, connect4"):
        GenericAdapter(spec="nope")
    with pytest.raises(TypeError, match=r"spec must be a Spec or the name of one, got 3"):
        GenericAdapter(spec=3)
    assert GenericAdapter(spec="maze").spec.name == "maze"


class Swatch(BaseModel):
    color: Color  # a $ref into the observation schema's $defs
    shade: int = Field(0, ge=0, le=9)


def test_observation_spaces_from_refs_extra_fields_and_a_reset_schema():
    """`_build_observation_space`: $defs, fields the schema does not list (inferred from the first
    observation), the reset observation's own schema when the server has one, and the mask's attribute."""
    adapter = adapter_for(Move, Swatch, {"color": "red", "shade": 3, "extra": [1.5, 2.5]})
    assert adapter.observation_space["color"] == spaces.Discrete(2)
    assert adapter.observation_space["shade"] == spaces.Discrete(10)
    assert isinstance(adapter.observation_space["extra"], JSONText)  # not in the schema: JSON text
    assert adapter.env_attributes == ()
    reset = GenericAdapter()
    reset.schema = {
        "action": Move.model_json_schema(),
        "observation": Board.model_json_schema(),
        "reset_observation": Swatch.model_json_schema(),
    }
    reset._build_action_space(reset.schema["action"])
    reset._build_observation_space(StepResult({"color": "blue", "shade": 1}, 0.0, False, {}))
    assert sorted(reset.observation_space.spaces) == ["color", "shade"]
    from openenv_lab.adapters.spec import Spec

    spec = Spec("n", action="steps", actions=3, legal_actions="legal_actions")
    masked = adapter_for(Move, Listed, {"legal_actions": [0], "note": ""}, spec=spec)
    assert masked.env_attributes == ("action_masks",)
    assert masked.observation_space["action_mask"] == spaces.MultiBinary(3)


def test_setup_reads_a_servers_schema_and_names_and_says_what_it_cannot_use():
    """`setup` on a real HTTP server answering hand-made ``/schema`` and ``/metadata``: schemas that are not
    OpenEnv's, parts of the wrong types, a server without ``/metadata``, a spec the server does not match
    (and ``check_identity=False``), and a spec that hands the server to a family adapter. (Mutants of each
    branch were reached by no test before: only the official-environment tests ran `setup`.)"""
    from openenv_lab.adapters.spec import Spec
    from openenv_lab.client import Client, EnvironmentMismatch
    from tests.peers.raw_servers import NotOpenEnvServer

    schema = {"action": Move.model_json_schema(), "observation": Swatch.model_json_schema()}
    first = StepResult({"color": "red", "shade": 3}, 0.0, False, {})

    def set_up(routes: dict, adapter: GenericAdapter | None = None) -> GenericAdapter:
        adapter = adapter or GenericAdapter()
        with NotOpenEnvServer(routes=routes) as server, Client(server.url, timeouts=5.0) as client:
            adapter.setup(client, first)
        return adapter

    plain = set_up({"/schema": schema})  # no /metadata: no names, and the spaces all the same
    assert plain.server_names == []
    assert plain.action_space == spaces.Box(0, 100_000, (), np.int64)
    assert plain.observation_space["shade"] == spaces.Discrete(10)
    named = set_up({"/schema": schema, "/metadata": {"name": "swatches"}})
    assert named.server_names == ["swatches"]

    for broken, missing in (
        ({"observation": schema["observation"]}, "action"),
        ({"action": schema["action"]}, "observation"),
        ({"action": ["steps"], "observation": schema["observation"]}, "action"),
    ):
        with pytest.raises(ProtocolError, match=rf"/schema has no '{missing}' JSON Schema; is it an OpenEnv"):
            set_up({"/schema": broken})
    wrong_types = {"action": {"properties": ["steps"]}, "observation": schema["observation"]}
    with pytest.raises(ProtocolError, match=r"/schema cannot be read as spaces \(AttributeError: "):
        set_up({"/schema": wrong_types})

    mine = Spec("mine", servers=("MineEnvironment",), action="steps", actions=3)
    with pytest.raises(EnvironmentMismatch, match=r"reports itself as swatches\. Point at") as mismatch:
        set_up({"/schema": schema, "/metadata": {"name": "swatches"}}, GenericAdapter(spec=mine))
    assert (mismatch.value.asked, mismatch.value.reported) == ("mine", ["swatches"])
    with pytest.raises(EnvironmentMismatch, match="reports itself as nothing"):
        set_up({"/schema": schema}, GenericAdapter(spec=mine))
    unchecked = GenericAdapter(spec=mine)
    unchecked.check_identity = False
    assert set_up({"/schema": schema}, unchecked).action_space == spaces.Discrete(3)
    anywhere = Spec("anywhere", action="steps", actions=4)  # no servers named: it fits any
    assert set_up({"/schema": schema}, GenericAdapter(spec=anywhere)).action_space == spaces.Discrete(4)

    with pytest.raises(
        ValueError, match=r"hands this server to the chess adapter: make the env with gym\.make"
    ):
        set_up({"/schema": schema, "/metadata": {"name": "chess_env"}})  # found by its name


def test_a_spec_read_from_the_sessions_state_or_the_general_one_with_a_warning():
    """`_resolve_spec`: the spec of this instance from the probed session's state (`Spec.from_state`), the
    general spec where that returns None, and a warning where the state cannot be read."""
    from openenv_lab.adapters.spec import Spec
    from openenv_lab.client import Client
    from tests.peers.raw_servers import NotOpenEnvServer

    def sized(state: dict) -> Spec | None:
        return Spec("sized", action="steps", actions=state["n"]) if "n" in state else None

    general = Spec("general", action="steps", actions=2, from_state=sized)
    schema = {"action": Move.model_json_schema(), "observation": Swatch.model_json_schema()}
    first = StepResult({"color": "red", "shade": 3}, 0.0, False, {})

    def set_up(state: dict | None) -> GenericAdapter:
        adapter = GenericAdapter(spec=general)
        read = None if state is None else (lambda: state)
        with NotOpenEnvServer(routes={"/schema": schema}) as server, Client(server.url, timeouts=5) as client:
            adapter.setup(client, first, read)
        return adapter

    five = set_up({"n": 5})
    assert (five.spec.name, five.action_space) == ("sized", spaces.Discrete(5))
    kept = set_up({"game": "other"})
    assert (kept.spec.name, kept.action_space) == ("general", spaces.Discrete(2))
    with pytest.warns(
        UserWarning,
        match=r"Could not read the state of http://127\.0\.0\.1:\d+ for the spec "
        r"'general' \(\w+: .*\); its spaces are the general ones",
    ) as caught:
        unread = set_up(None)  # no session to ask: a short one is opened, and this server has no /ws
    assert (unread.spec.name, unread.action_space) == ("general", spaces.Discrete(2))
    assert caught[0].filename == __file__  # pointing at the caller's line (through the env, the user's)


def test_a_legal_choice_is_drawn_from_the_listed_ids_with_the_spaces_generator():
    """`legal_choice` (random play where the observation lists legal ids for an unbounded integer action):
    each listed id drawn, repeatably from the space's seed; None wherever it does not apply."""
    from openenv_lab.adapters.generic import legal_choice

    wide = spaces.Box(-(2**40), 2**40, (), np.int64)
    wide.seed(0)
    draws = [legal_choice(wide, [3, 7, 2**35]) for _ in range(60)]
    assert {int(d) for d in draws} == {3, 7, 2**35}  # every id, not only the first
    assert all(d.dtype == np.int64 and d.shape == () for d in draws)
    narrow = spaces.Box(0, 100, (), np.int32)
    assert legal_choice(narrow, [5]).dtype == np.int32  # in the space's own dtype
    wide.seed(0)
    again = [legal_choice(wide, [3, 7, 2**35]) for _ in range(60)]
    assert [int(d) for d in again] == [int(d) for d in draws]

    for space, legal in (
        (wide, None),
        (wide, []),
        (spaces.Discrete(9), [1]),  # a bounded action: the mask's business
        (spaces.Box(-1.0, 1.0, (), np.float32), [0]),  # not an integer space
        (wide, ["e2e4"]),  # ValueError
        (wide, [None]),  # TypeError
        (wide, [2**70]),  # OverflowError
        (wide, [2**41]),  # outside the space
    ):
        assert legal_choice(space, legal) is None, (space, legal)


def test_ansi_is_the_last_observation_and_other_modes_and_tools_are_refused():
    adapter = adapter_for(Move, Swatch, {"color": "red", "shade": 3})
    with pytest.raises(NotImplementedError, match="GenericAdapter cannot render in mode 'rgb_array'"):
        adapter.render("rgb_array")
    with pytest.raises(AttributeError, match="This environment has no MCP tools"):
        adapter.tool_action("echo_message", message="hi")


class Slot(int, Enum):
    left = 0
    middle = 1
    right = 2


class Tallies(BaseModel):
    legal_actions: list[int] = Field(default_factory=list, max_length=4)
    count: int = 0
    grid: list[int] = Field(default_factory=list)


class Slots(BaseModel):
    legal_actions: list[Slot] = Field(default_factory=list)


def test_observation_fields_are_read_as_observations_with_the_schemas_defs_and_named_by_path():
    """What `_build_observation_space` passes on for each field: observation rules (integers without bounds
    stay in 32 bits; only actions get `WideInteger`), the ``$defs`` (the listed legal ids' too, and both
    schemas' where the reset observation has its own) and the field's path, which errors name. (Each
    argument swapped for another left the tests passing.)"""
    from openenv_lab.adapters.spec import Spec

    int32 = spaces.Box(-(2**31), 2**31 - 1, (), np.int64)
    with pytest.warns(UserWarning, match="without bounds"):
        adapter = adapter_for(Unbounded, Tallies, {"legal_actions": [1, 2], "count": 0, "grid": [0, 0]})
    assert adapter.observation_space["legal_actions"].feature_space == int32  # listed: any length
    assert adapter.observation_space["count"] == int32
    with pytest.raises(ProtocolError, match=r"^observation\.legal_actions holds 5 items, more than the"):
        adapter.decode(
            StepResult({"legal_actions": [1, 2, 3, 4, 5], "count": 0, "grid": [0, 0]}, 0.0, False, {}), None
        )
    with pytest.raises(ProtocolError, match=r"^observation\.grid changed shape from \(2,\)"):
        adapter.decode(StepResult({"legal_actions": [], "count": 0, "grid": [0, 0, 0]}, 0.0, False, {}), None)
    with pytest.warns(UserWarning, match="without bounds"):
        slots = adapter_for(Unbounded, Slots, {"legal_actions": [0, 2]})
    assert slots.observation_space["legal_actions"].feature_space == spaces.Discrete(3)  # through $defs

    declared = Spec("d", observation={"grid": spaces.Box(0, 9, (2,), np.int64)})
    shaped = adapter_for(Move, Tallies, {"legal_actions": [], "count": 0, "grid": [0, 0]}, spec=declared)
    with pytest.raises(ProtocolError, match=r"^observation\.grid has shape \(3,\), but its declared space"):
        shaped.decode(StepResult({"grid": [0, 0, 0]}, 0.0, False, {}), None)

    for reset_schema in (
        Swatch.model_json_schema(),  # its own $defs
        {"properties": {"color": {"$ref": "#/$defs/Color"}}},  # the observation schema's
    ):
        reset = GenericAdapter()
        reset.schema = {
            "action": Move.model_json_schema(),
            "observation": Swatch.model_json_schema()
            if "$defs" not in reset_schema
            else Board.model_json_schema(),
            "reset_observation": reset_schema,
        }
        reset._build_action_space(reset.schema["action"])
        reset._build_observation_space(StepResult({"color": "blue"}, 0.0, False, {}))
        assert reset.observation_space["color"] == spaces.Discrete(2), reset_schema


class Word(BaseModel):
    word: str = Field(..., max_length=3)


def test_an_action_that_breaks_its_schema_is_named_by_its_path():
    """`action_from_json` on a value its field's schema, or the spec's declared space, refuses: the error
    names ``action.<field>`` (the path `_build_action_space` gives each field)."""
    from openenv_lab.adapters.spec import Spec

    words = adapter_for(Word, Empty, {})
    with pytest.raises(
        ValueError, match=r"^action\.word holds 6 characters, more than the schema's maxLength of 3"
    ):
        words.action_from_json({"word": "abcdef"})
    declared = Spec("d", action="steps", action_space=spaces.Box(0, 1, (2,), np.float32))
    pairs = adapter_for(Move, Empty, {}, spec=declared)
    with pytest.raises(ValueError, match=r"^action\.steps has shape \(3,\), but its declared space is Box"):
        pairs.action_from_json({"steps": [0, 0, 0]})


def test_a_constant_behind_a_ref_is_sent_as_it_is_and_not_an_action_field():
    adapter = GenericAdapter()
    adapter.schema = {
        "action": {
            "properties": {
                "kind": {"$ref": "#/$defs/Kind"},
                "steps": {"type": "integer", "minimum": 0, "maximum": 4},
            },
            "$defs": {"Kind": {"const": "move"}},
        },
        "observation": Empty.model_json_schema(),
    }
    adapter._build_action_space(adapter.schema["action"])
    assert adapter.action_space == spaces.Discrete(5)
    assert adapter.encode_action(3) == {"kind": "move", "steps": 3}
