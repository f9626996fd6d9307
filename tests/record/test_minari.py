"""Recordings as Minari datasets: exported with `to_minari`, loaded back with Minari's own
``load_dataset``, and checked against the recording step by step.

(Minari's own ``DataCollector`` over our envs, with ``record_infos=True``, runs in the research
libraries' tier: it needs jax, tests/research_check.py.)"""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import polars as pl
import pytest

import openenv_lab
from openenv_lab.record import load_trajectory, to_minari
from openenv_lab.record.observations import decode, space_from_json

minari = pytest.importorskip("minari", reason="Minari is in the dev extra (Python 3.11 or later)")

FAMILIES = {
    "chess": ("openenv/chess", {"max_moves": 6}),
    "atari": ("openenv/atari", {"game": "breakout", "obs_type": "ram", "max_num_frames_per_episode": 60}),
    "finrl": ("openenv/finrl", {"split": "trade"}),
}


@pytest.fixture(autouse=True)
def minari_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))


def play(env, episodes: int, vector: bool = False) -> None:
    space = env.single_action_space if vector else env.action_space
    space.seed(0)
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=0)
    ended = 0
    while ended < episodes:
        if vector:
            actions = np.array([_legal(rng, {k: v[i] for k, v in obs.items()}) for i in range(env.num_envs)])
            obs, _, terminated, truncated, _ = env.step(actions)
            ended += int(np.logical_or(terminated, truncated).sum())
        else:
            action = _legal(rng, obs) if isinstance(obs, dict) else space.sample()
            obs, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                ended += 1
                obs, _ = env.reset()


def _legal(rng, obs) -> int:
    return int(rng.choice(np.flatnonzero(obs["action_mask"])))


@pytest.mark.parametrize("family", FAMILIES)
def test_an_exported_recording_loads_in_minari_step_by_step_the_same(tmp_path, family):
    env_id, options = FAMILIES[family]
    path = tmp_path / "run.parquet"
    env = openenv_lab.RecordTrajectory(gym.make(env_id, **options), path=path, observations=True)
    play(env, episodes=2)
    env.close()
    to_minari(path, f"openenv/{family}-test-v0", author="openenv_lab tests", algorithm_name="random")
    dataset = minari.load_dataset(f"openenv/{family}-test-v0")
    recording = load_trajectory(path)
    finished = recording.table.filter(~pl.col("cut_short"))
    assert dataset.total_episodes == finished["episode"].n_unique() == 2
    assert dataset.total_steps == finished.filter(pl.col("step") > 0).height
    spec = dataset.spec.env_spec
    assert spec.id == env_id and all(spec.kwargs[key] == value for key, value in options.items())
    assert (
        json.loads(dataset.storage.metadata["openenv_lab"])["schema_sha256"]
        == recording.metadata["schema_sha256"]
    )
    space = space_from_json(recording.metadata["observation_space"])
    assert dataset.observation_space == space
    episodes = finished.partition_by("episode", maintain_order=True)
    for episode, rows in zip(dataset.iterate_episodes(), episodes, strict=True):
        steps = rows.filter(pl.col("step") > 0)
        observations = [decode(space, data) for data in rows["observation"]]
        if isinstance(space, gym.spaces.Dict):
            for key in space:
                assert np.array_equal(episode.observations[key], np.stack([o[key] for o in observations]))
        else:
            assert np.array_equal(episode.observations, np.stack(observations))
        assert episode.rewards.tolist() == pytest.approx(steps["reward"].to_list())
        assert episode.terminations.tolist() == steps["terminated"].to_list()
        assert episode.truncations.tolist() == steps["truncated"].to_list()
        if family == "finrl":
            assert np.allclose(episode.actions, np.array([json.loads(a) for a in steps["action"]]))
            assert episode.infos["date"].tolist() == rows["date"].to_list()
        else:
            assert episode.actions.tolist() == steps["action"].to_list()
        if family == "chess":
            assert episode.infos["fen"].tolist() == rows["fen"].to_list()
        if family == "atari":
            assert episode.infos["lives"].tolist() == rows["lives"].to_list()


def test_a_vector_recording_exports_each_sub_environments_episodes(tmp_path):
    env_id, options = FAMILIES["chess"]
    envs = openenv_lab.RecordVectorTrajectory(
        gym.make_vec(env_id, num_envs=2, **options), path=tmp_path / "runs.parquet", observations=True
    )
    play(envs, episodes=4, vector=True)
    envs.close()
    dataset = to_minari(tmp_path / "runs.parquet", "openenv/chess-vector-v0")
    episodes = list(minari.load_dataset("openenv/chess-vector-v0").iterate_episodes())
    assert dataset.total_episodes == len(episodes) >= 4
    assert all(e.terminations[-1] or e.truncations[-1] for e in episodes)
    assert all(len(e.observations["board"]) == len(e.actions) + 1 for e in episodes)


def test_what_cannot_be_exported_says_why(tmp_path):
    env = openenv_lab.RecordTrajectory(gym.make("openenv/chess", max_moves=2), path=tmp_path / "a.parquet")
    play(env, episodes=1)
    env.close()
    with pytest.raises(ValueError, match=r"kept no observations.*observations=True"):
        to_minari(tmp_path / "a.parquet", "openenv/nothing-v0")
    with pytest.raises(ValueError, match=r"text.*observations=True"):
        openenv_lab.RecordTrajectory(gym.make("openenv/echo"), observations=True)
    env = openenv_lab.RecordTrajectory(gym.make("openenv/chess"), observations=True)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="no finished episode"):
        to_minari(env.trajectory, "openenv/unfinished-v0")
    env.close()
