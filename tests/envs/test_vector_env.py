"""``gym.make_vec("openenv/...")``: the native vector env, held to SyncVectorEnv's behaviour."""

from __future__ import annotations

import gc
import os
import signal
import threading
import time
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import data_equivalence
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import openenv_lab
from openenv_lab.client import (
    CapacityError,
    ConnectError,
    OpenEnvError,
    ProtocolError,
    SessionClosed,
    Timeout,
)
from openenv_lab.client import drivers as drivers_module
from openenv_lab.client import pool as pool_module
from openenv_lab.client._direct import DirectConnection
from openenv_lab.client.async_session import AsyncSession
from openenv_lab.client.batch import BatchedSession, SyncBatchedSession, SyncChannel
from openenv_lab.envs import OpenEnvVectorEnv
from openenv_lab.envs import _episode as episode_module
from openenv_lab.launch import EmbeddedServer, shared_embedded_server
from tests.conftest import HANG


@pytest.fixture(params=["sync", "asyncio"])
def channels(request, monkeypatch):
    """Sessions on our loopback servers over `SyncChannel` (what they get) or asyncio's `Channel` (what
    remote servers get): the tests that use this fixture hold both to the same behaviour."""
    monkeypatch.setattr(pool_module, "DIRECT_ON_LOOPBACK", request.param == "sync")
    return SyncBatchedSession if request.param == "sync" else BatchedSession


def masked_actions(envs, obs, rng: np.random.Generator) -> np.ndarray:
    """A random legal move for each sub-environment (drawn the same way for both vector envs); 0 for a
    sub-environment whose game just ended (no legal moves: its next step is an autoreset)."""
    return np.array([rng.choice(np.flatnonzero(mask)) if mask.any() else 0 for mask in obs["action_mask"]])


@pytest.mark.parametrize(
    ("multiplex", "num_envs", "sync"),
    [(True, 3, True), (True, 3, False), (False, 3, False), (True, 8, True), (True, 8, False)],
    ids=[
        "sync-channel",
        "asyncio-channel",
        "connection-per-session",
        "sync-channel-8",
        "asyncio-channel-8",
    ],
)
@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_same_results_as_sync_vector_env_on_the_same_seeds(
    chess_url, mode, multiplex, num_envs, sync, monkeypatch
):
    monkeypatch.setattr(pool_module, "DIRECT_ON_LOOPBACK", sync)
    options = {"opponent": "greedy", "max_moves": 12}  # short games: several autoresets
    ours = gym.make_vec(
        "openenv/chess", num_envs=num_envs, autoreset_mode=mode, multiplex=multiplex, **options
    )
    reference = SyncVectorEnv(
        [lambda: gym.make("openenv/chess", **options) for _ in range(num_envs)], autoreset_mode=mode
    )
    assert isinstance(ours, OpenEnvVectorEnv)
    kind = (SyncBatchedSession if sync else BatchedSession) if multiplex else AsyncSession
    assert all(type(session) is kind for session in ours._transport.seats)
    assert ours.metadata["autoreset_mode"] == reference.metadata["autoreset_mode"] == mode
    assert ours.observation_space == reference.observation_space
    assert ours.action_space == reference.action_space
    obs_a, info_a = ours.reset(seed=42)
    obs_b, info_b = reference.reset(seed=42)
    assert data_equivalence(obs_a, obs_b) and data_equivalence(info_a, info_b)
    rng_a, rng_b = np.random.default_rng(0), np.random.default_rng(0)
    ended = 0
    for _ in range(25):
        step_a = ours.step(masked_actions(ours, obs_a, rng_a))
        step_b = reference.step(masked_actions(reference, obs_b, rng_b))
        for a, b in zip(step_a, step_b, strict=True):
            assert data_equivalence(a, b), f"{a!r} != {b!r}"
        obs_a, obs_b = step_a[0], step_b[0]
        ended += int(step_a[2].sum() + step_a[3].sum())
    assert ended >= 3  # the autoreset paths were exercised
    ours.close()
    reference.close()


def test_sessions_on_one_of_our_servers_share_one_connection(chess_url, framework_counter, channels):
    envs = gym.make_vec("openenv/chess", num_envs=3, base_url=chess_url)
    connections = {id(session.channel) for session in envs._transport.seats}
    assert len(connections) == 1 and all(type(s) is channels for s in envs._transport.seats)
    assert openenv_lab.Client(chess_url).capacity()["active_sessions"] == 3
    envs.close()
    assert openenv_lab.Client(chess_url).capacity()["active_sessions"] == 0
    plain = gym.make_vec("openenv/chess", num_envs=2, base_url=chess_url, multiplex=False)
    assert all(isinstance(s, AsyncSession) for s in plain._transport.seats)
    plain.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the counter does not confirm seeds
        official = gym.make_vec("openenv/remote", num_envs=2, base_url=framework_counter)  # no /ws/batch
    assert all(isinstance(s, AsyncSession) for s in official._transport.seats)
    official.close()


def test_reset_mask_is_checked_as_gymnasium_checks_it(chess_url):
    envs = gym.make_vec("openenv/chess", num_envs=2, agent_color="white")
    reference = SyncVectorEnv([lambda: gym.make("openenv/chess", agent_color="white") for _ in range(2)])
    envs.reset(seed=0)
    reference.reset(seed=0)
    for bad in (np.zeros(2, dtype=np.bool_), np.array([0, 1]), np.ones(3, dtype=np.bool_), [True, False]):
        with pytest.raises((TypeError, ValueError)) as ours:
            envs.reset(options={"reset_mask": bad})
        with pytest.raises((TypeError, ValueError)) as theirs:
            reference.reset(options={"reset_mask": bad})
        assert type(ours.value) is type(theirs.value) and str(ours.value) == str(theirs.value)
    # An integer mask is refused, not used as indices (which would reset sub-environment 0 here).
    with pytest.raises(TypeError, match=r"dtype=np\.bool_"):
        envs.reset(options={"reset_mask": np.array([0, 1])})
    envs.close()
    reference.close()


def test_call_get_attr_and_set_attr_reach_the_sub_environments_as_sync_vector_env_does(chess_url):
    envs = gym.make_vec("openenv/chess", num_envs=2, agent_color="white")
    reference = SyncVectorEnv([lambda: gym.make("openenv/chess", agent_color="white") for _ in range(2)])
    obs, _ = envs.reset(seed=3)
    reference.reset(seed=3)
    masks, expected = envs.call("action_masks"), reference.call("action_masks")
    assert len(masks) == 2 and all(np.array_equal(a, b) for a, b in zip(masks, expected, strict=True))
    assert np.array_equal(masks[0], obs["action_mask"][0].astype(bool))
    assert envs.get_attr("action_space") == reference.get_attr("action_space")
    assert envs.get_attr("base_url") == (chess_url, chess_url)
    with pytest.raises(AttributeError, match=r"no attribute 'nope'.*action_masks"):
        envs.call("nope")
    with pytest.raises(ValueError, match="Got `3` values for 2 environments"):
        envs.set_attr("action_masks", [1, 2, 3])
    envs.close()
    reference.close()


def test_set_attr_of_a_reset_option_is_sent_from_each_sub_environments_next_reset(chess_url):
    """A curriculum: the opponent of each sub-environment changes between episodes (the chess server
    says in each reset's metadata which opponent it plays)."""
    envs = gym.make_vec("openenv/chess", num_envs=3, opponent="random", agent_color="white", raw_info=True)
    try:
        _, infos = envs.reset(seed=0)
        assert list(infos["metadata"]["opponent"]) == ["random"] * 3
        envs.set_attr("opponent", ["greedy", "random", "minimax"])
        assert envs.get_attr("opponent") == ("greedy", "random", "minimax")
        _, infos = envs.reset(seed=1)
        assert list(infos["metadata"]["opponent"]) == ["greedy", "random", "minimax"]
        envs.set_attr("max_moves", 1)  # one value for all; autoreset sends it too
        assert envs.get_attr("max_moves") == (1, 1, 1)
        obs, _ = envs.reset(seed=2)
        _, _, _, truncated, _ = envs.step(envs.action_space.sample(mask=tuple(obs["action_mask"])))
        assert truncated.all()  # the move limit of the new stage
        # A value no chess server takes is refused before any sub-environment changes.
        with pytest.raises(ValueError, match="agent_color must be 'white', 'black' or 'random'"):
            envs.set_attr("agent_color", ["black", "purple", "white"])
        assert envs.get_attr("agent_color") == ("white", "white", "white")
        envs.set_attr("opponent", None)  # the server's default again
        assert envs.get_attr("opponent") == (None, None, None)
        assert "opponent" not in envs.adapters[0].reset_options
    finally:
        envs.close()


def test_set_attr_of_any_other_name_is_stored_with_a_warning_as_sync_vector_env_stores_it():
    envs = gym.make_vec("openenv/echo", num_envs=2)
    reference = SyncVectorEnv([lambda: gym.make("openenv/echo") for _ in range(2)])
    try:
        with pytest.warns(UserWarning, match=r"'stage' is neither a reset option.*reaches no server"):
            envs.set_attr("stage", [1, 2])
        reference.set_attr("stage", [1, 2])
        assert envs.get_attr("stage") == reference.get_attr("stage") == (1, 2)
        with pytest.warns(UserWarning, match="reaches no server"):
            envs.set_attr("stage", 3)
        assert envs.get_attr("stage") == (3, 3)
    finally:
        envs.close()
        reference.close()


def test_set_attr_sets_a_family_attribute_on_each_sub_environment():
    envs = gym.make_vec("openenv/atari", num_envs=2, game="pong")
    envs.set_attr("_frameskip", [2, 3])
    assert envs.get_attr("_frameskip") == (2, 3)
    envs.set_attr("_frameskip", 4)
    assert envs.get_attr("_frameskip") == (4, 4)
    envs.close()


def test_a_step_that_fails_while_its_second_half_is_in_flight_closes_the_env(chess_url, channels):
    envs = gym.make_vec("openenv/chess", num_envs=8, agent_color="white")
    obs, _ = envs.reset(seed=0)

    def broken(result, sent):
        raise RuntimeError("decoding failed")

    envs.adapters[0].decode = broken  # sub-environment 0 is in the first half
    with pytest.raises(RuntimeError, match="decoding failed"):
        envs.step(masked_actions(envs, obs, np.random.default_rng(0)))
    with pytest.raises(OpenEnvError, match="interrupted while its replies were decoded"):
        envs.step(masked_actions(envs, obs, np.random.default_rng(0)))
    deadline = time.monotonic() + 5
    while openenv_lab.Client(chess_url).capacity()["active_sessions"] != 0:
        assert time.monotonic() < deadline, "the sessions were not closed"
        time.sleep(0.05)


def test_reset_mask_resets_only_the_chosen(chess_url):
    envs = gym.make_vec("openenv/chess", num_envs=3, agent_color="white")
    obs, _ = envs.reset(seed=0)
    obs, *_ = envs.step(masked_actions(envs, obs, np.random.default_rng(1)))
    before = obs["board"].copy()
    obs, infos = envs.reset(options={"reset_mask": np.array([False, True, False])})
    np.testing.assert_array_equal(obs["board"][[0, 2]], before[[0, 2]])
    assert infos["_seed"].tolist() == [False, True, False]
    envs.close()


def test_atari_and_finrl_vectorise_too():
    atari = gym.make_vec("openenv/atari", num_envs=2, game="pong")
    obs, _ = atari.reset(seed=0)
    assert obs.shape == (2, 210, 160, 3) and obs.dtype == np.uint8
    obs, rewards, *_ = atari.step(np.array([0, 1]))
    assert rewards.shape == (2,)
    atari.close()
    finrl = gym.make_vec("openenv/finrl", num_envs=2)
    obs, infos = finrl.reset(seed=0)
    assert obs.shape == (2, 51) and infos["portfolio_value"].tolist() == [1_000_000.0] * 2
    finrl.close()


@pytest.mark.slow
def test_sessions_spread_round_robin_over_servers():
    with EmbeddedServer("chess", max_sessions=2) as a, EmbeddedServer("chess", max_sessions=3) as b:
        envs = gym.make_vec("openenv/chess", num_envs=5, base_urls=[a.base_url, b.base_url])
        urls = [episode.base_url for episode in envs.episodes]
        assert urls.count(a.base_url) == 2 and urls.count(b.base_url) == 3
        assert urls[:2] == [a.base_url, b.base_url]  # alternating while both have room
        envs.close()
        assert openenv_lab.Client(a.base_url).capacity()["active_sessions"] == 0


@pytest.mark.slow
def test_slots_taken_after_the_capacity_reading_go_to_servers_with_room(monkeypatch):
    # Another client takes 3 of server a's 4 slots right after make_vec read a's capacity: the channel
    # of 2 sessions that a was given is refused, and the capacities are read again. (Nothing to collect:
    # the retry after a garbage collection, for slots held by unreferenced envs, stays out of it.)
    monkeypatch.setattr("openenv_lab.envs._episode.gc.collect", lambda: 0)

    with EmbeddedServer("echo", max_sessions=4) as a, EmbeddedServer("echo", max_sessions=4) as b:
        others: list[openenv_lab.Session] = []
        read = pool_module._capacity

        def read_then_lose_the_race(url, options):
            capacity = read(url, options)
            if url == a.base_url and not others:
                others.extend(openenv_lab.Session(a.base_url) for _ in range(3))
            return capacity

        monkeypatch.setattr(pool_module, "_capacity", read_then_lose_the_race)
        try:
            envs = gym.make_vec("openenv/echo", num_envs=4, base_urls=[a.base_url, b.base_url])
            urls = [episode.base_url for episode in envs.episodes]
            assert urls.count(a.base_url) == 1 and urls.count(b.base_url) == 3
            envs.reset(seed=0)
            infos = envs.step(np.array(["a", "b", "c", "d"], dtype=object))[4]
            assert infos["echoed_message"].tolist() == ["a", "b", "c", "d"]
            envs.close()
        finally:
            for session in others:
                session.close()
        assert openenv_lab.Client(b.base_url).capacity()["active_sessions"] == 0


@pytest.mark.slow
def test_slots_taken_at_every_reading_is_a_capacity_error_that_says_so(monkeypatch):
    monkeypatch.setattr("openenv_lab.envs._episode.gc.collect", lambda: 0)
    with EmbeddedServer("echo", max_sessions=2) as server:
        monkeypatch.setattr(pool_module, "_capacity", lambda url, options: (2, "/ws/batch", None))  # stale
        others = [openenv_lab.Session(server.base_url)]
        try:
            with pytest.raises(CapacityError, match=r"took the free slots.*3 times") as raised:
                gym.make_vec("openenv/echo", num_envs=2, base_url=server.base_url)
            assert raised.value.env_index == 0 and raised.value.server_url == server.base_url
        finally:
            others[0].close()
        assert openenv_lab.Client(server.base_url).capacity()["active_sessions"] == 0


@pytest.mark.slow
def test_not_enough_room_says_how_many_are_missing():
    with (
        EmbeddedServer("chess", max_sessions=2) as server,
        pytest.raises(CapacityError, match=r"num_envs=5 needs 5 sessions.*3 short"),
    ):
        gym.make_vec("openenv/chess", num_envs=5, base_url=server.base_url)


@pytest.mark.slow
def test_servers_without_a_capacity_route_are_filled_until_they_refuse(framework_counter):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        envs = gym.make_vec("openenv/remote", num_envs=2, base_url=framework_counter)  # it allows 2
        with pytest.raises(CapacityError, match="short"):
            gym.make_vec("openenv/remote", num_envs=1, base_url=framework_counter)
        envs.close()


@pytest.mark.slow
def test_a_server_that_is_down_is_named(chess_url):
    with EmbeddedServer("chess") as server:
        down = server.base_url
    with pytest.raises(ConnectError) as raised:
        gym.make_vec("openenv/chess", num_envs=2, base_urls=[chess_url, down])
    assert raised.value.env_index is None and raised.value.server_url == down  # no session placed yet
    assert str(raised.value).startswith(f"Server {down}: ")


@pytest.mark.slow
@pytest.mark.parametrize("num_envs", [2, 8])
def test_a_server_dying_mid_batch_names_the_sub_environment_and_closes_the_rest(
    chess_url, num_envs, channels
):
    with EmbeddedServer("chess") as dying:
        envs = gym.make_vec("openenv/chess", num_envs=num_envs, base_urls=[chess_url, dying.base_url])
        obs, _ = envs.reset(seed=0)
        before = openenv_lab.Client(chess_url).capacity()["active_sessions"]
        os.kill(dying._process.pid, signal.SIGKILL)
        with pytest.raises(SessionClosed) as raised:
            envs.step(masked_actions(envs, obs, np.random.default_rng(0)))
        assert raised.value.env_index % 2 == 1 and raised.value.server_url == dying.base_url
    # The healthy sessions were closed too (the server frees them just after the connection closes).
    deadline = time.monotonic() + 5
    while openenv_lab.Client(chess_url).capacity()["active_sessions"] != before - num_envs // 2:
        assert time.monotonic() < deadline, "the healthy sessions were not closed"
        time.sleep(0.05)
    assert envs.closed


def test_a_sub_environment_that_does_not_answer_in_time_is_named_and_nothing_hangs(hanging_counter):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the counter does not confirm seeds
        envs = gym.make_vec(
            "openenv/remote", num_envs=3, base_url=hanging_counter, timeouts=openenv_lab.Timeouts(request=1)
        )
        envs.reset(seed=0)
    sessions = list(envs._transport.seats)
    started = time.monotonic()
    with (
        pytest.raises(Timeout, match=r"did not reply within 1 s") as raised,
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("error")  # scalar Box actions reach the space check as arrays: no warning
        envs.step(np.array([1, HANG, 1]))  # sub-environment 1's step stalls for a minute
    assert time.monotonic() - started < 10  # the batch's deadline, not the stalled step
    assert raised.value.env_index == 1 and raised.value.server_url == hanging_counter
    assert envs.closed and all_closed(sessions)  # sub-environments 0 and 2 too


def test_an_interrupted_step_closes_every_session(hanging_counter):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        envs = gym.make_vec("openenv/remote", num_envs=3, base_url=hanging_counter)
        envs.reset(seed=0)
    sessions = list(envs._transport.seats)

    def interrupt(*_):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.5)  # Ctrl+C while sub-environment 1 stalls
    try:
        with pytest.raises(KeyboardInterrupt):
            envs.step(np.array([1, HANG, 1]))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert envs.closed and all_closed(sessions)  # none is left with a reply on its way
    with pytest.raises(
        OpenEnvError, match=r"closed \(a step was interrupted \(KeyboardInterrupt\).*make a new"
    ):
        envs.step(np.array([1, 1, 1]))


@pytest.fixture(scope="module")
def slow_chess():
    """Chess whose opponent searches for about half a second a move (minimax, depth 4)."""
    with EmbeddedServer("chess", opponent="minimax", opponent_depth=4) as server:
        yield server.base_url


@pytest.mark.slow
def test_a_slow_step_on_a_sync_channel_times_out_naming_the_sub_environment(slow_chess):
    envs = gym.make_vec("openenv/chess", num_envs=2, base_url=slow_chess, agent_color="white")
    assert all(isinstance(s, SyncBatchedSession) for s in envs._transport.seats)
    obs, _ = envs.reset(seed=0)
    # Now, not at make_vec: opening and resetting take longer.
    for channel in {s.channel for s in envs._transport.seats}:
        channel.timeouts = openenv_lab.Timeouts(request=0.25)
    started = time.monotonic()
    with pytest.raises(Timeout, match=r"did not reply within 0\.25 s") as raised:
        envs.step(masked_actions(envs, obs, np.random.default_rng(0)))
    assert raised.value.env_index == 0 and raised.value.server_url == slow_chess
    assert time.monotonic() - started < 5
    assert envs.closed and all(s.closed for s in (envs._transport.seats if envs._transport else []))
    wait_until_no_sessions(slow_chess)


def test_an_interrupted_step_on_a_sync_channel_closes_every_session(slow_chess):
    envs = gym.make_vec("openenv/chess", num_envs=2, base_url=slow_chess, agent_color="white")
    sessions = list(envs._transport.seats)
    assert all(isinstance(s, SyncBatchedSession) for s in sessions)
    obs, _ = envs.reset(seed=0)

    def interrupt(*_):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.2)  # Ctrl+C while the opponents think
    try:
        with pytest.raises(KeyboardInterrupt):
            envs.step(masked_actions(envs, obs, np.random.default_rng(0)))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert envs.closed and all(s.closed for s in sessions)
    with pytest.raises(OpenEnvError, match=r"closed \(a step was interrupted \(KeyboardInterrupt\)"):
        envs.step(np.array([1, 1]))
    wait_until_no_sessions(slow_chess)


@pytest.mark.slow
def test_vector_envs_dropped_without_close_free_their_sessions(channels):
    """Running a notebook cell again rebinds ``envs``: the dropped env's sessions go back to the server."""
    with EmbeddedServer("echo", max_sessions=8) as server:
        threads = []
        for _ in range(4):  # if dropped envs kept their sessions, the third would find the server full
            envs = gym.make_vec("openenv/echo", num_envs=4, base_url=server.base_url)
            assert all(type(s) is channels for s in envs._transport.seats)
            envs.reset(seed=0)
            transport = envs._transport
            threads.append(transport.loop.thread if hasattr(transport, "loop") else None)
        del envs
        for thread in threads:
            if thread is not None:
                thread.join(5)
                assert not thread.is_alive()  # their event-loop threads ended too
        wait_until_no_sessions(server.base_url)


@pytest.mark.slow
def test_an_interrupt_while_recv_decodes_closes_the_env(monkeypatch):
    with EmbeddedServer("echo", max_sessions=4) as server:
        envs = gym.make_vec("openenv/echo", num_envs=4, base_url=server.base_url)
        envs.reset(seed=0)
        real = drivers_module.read_reply

        def interrupted(*args):
            monkeypatch.setattr(drivers_module, "read_reply", real)
            raise KeyboardInterrupt

        monkeypatch.setattr(drivers_module, "read_reply", interrupted)
        envs.send(("hi",) * 4)
        with pytest.raises(KeyboardInterrupt):
            envs.recv()  # the batch's replies were read off the wire, not handed over
        assert envs.closed  # not left waiting for replies that already came
        with pytest.raises(OpenEnvError, match=r"interrupted \(KeyboardInterrupt\)"):
            envs.send(("hi",) * 4)
        wait_until_no_sessions(server.base_url)


@pytest.mark.slow
@pytest.mark.parametrize("interrupted", [1, 2])
def test_ctrl_c_while_make_vec_opens_a_channel_leaves_no_session(monkeypatch, interrupted):
    """Ctrl+C during the handshake of the first channel, or of the second once the first is open (raised
    there deterministically: a signal timed from another thread may land in a finalizer that a garbage
    collection runs, where Python swallows it)."""
    real = SyncChannel.__init__
    opened = []

    def interrupted_open(self, *args, **kwargs):
        if len(opened) + 1 == interrupted:
            raise KeyboardInterrupt
        real(self, *args, **kwargs)
        opened.append(self)

    monkeypatch.setattr(SyncChannel, "__init__", interrupted_open)
    monkeypatch.setattr(pool_module, "_chunks", lambda count, most: [count // 2, count - count // 2])
    with EmbeddedServer("echo", max_sessions=4) as server:
        with pytest.raises(KeyboardInterrupt):
            gym.make_vec("openenv/echo", num_envs=4, base_url=server.base_url)
        assert len(opened) == interrupted - 1
        wait_until_no_sessions(server.base_url)  # the first channel's sessions too
    assert not [t for t in threading.enumerate() if t.name == "openenv-lab-keepalive"]


@pytest.mark.slow
def test_a_collection_on_a_keepalive_thread_still_frees_the_sessions(monkeypatch):
    """A garbage collection may run the finalizer of a dropped env on a thread holding a connection's lock."""
    real = DirectConnection._idle_duties
    collect = threading.Event()

    def idle(self):
        if collect.is_set():
            collect.clear()
            gc.collect()  # where an automatic collection may land: this thread allocates under the lock
        return real(self)

    monkeypatch.setattr(DirectConnection, "_idle_duties", idle)
    with EmbeddedServer("echo", max_sessions=4) as server:
        gc.disable()
        try:
            envs = gym.make_vec("openenv/echo", num_envs=4, base_url=server.base_url)
            envs.reset(seed=0)
            envs.unwrapped.itself = envs.unwrapped  # a reference cycle: only a collection frees it
            del envs
            collect.set()
            wait_until_no_sessions(server.base_url)
        finally:
            gc.enable()


@pytest.mark.slow
def test_an_interrupt_while_closing_still_closes_every_channel(monkeypatch):
    real = SyncChannel.close
    fired = []

    def close(self):
        real(self)
        if not fired:
            fired.append(self)
            raise KeyboardInterrupt  # Ctrl+C during the first channel's closing handshake

    monkeypatch.setattr(SyncChannel, "close", close)
    with EmbeddedServer("echo", max_sessions=4) as one, EmbeddedServer("echo", max_sessions=4) as two:
        envs = gym.make_vec("openenv/echo", num_envs=4, base_urls=[one.base_url, two.base_url])
        envs.reset(seed=0)
        with pytest.raises(KeyboardInterrupt):
            envs.close()
        assert fired
        wait_until_no_sessions(one.base_url)
        wait_until_no_sessions(two.base_url)


def wait_until_no_sessions(url: str) -> None:
    deadline = time.monotonic() + 10
    while openenv_lab.Client(url).capacity()["active_sessions"] != 0:
        assert time.monotonic() < deadline, "the sessions were not closed"
        time.sleep(0.05)


def all_closed(sessions) -> bool:
    """Every session closed, connections dropped mid-request included (none still closing)."""
    return all(session.closed and session._closing is None for session in sessions)


def test_bad_actions_name_the_sub_environment_and_leave_nothing_in_flight(chess_url):
    envs = gym.make_vec("openenv/chess", num_envs=3, base_url=chess_url)
    obs, _ = envs.reset(seed=0)
    for call in (envs.send, envs.step):
        with pytest.raises(ValueError, match=r"Sub-environment 2: Action np\.int64\(-5\) is not in"):
            call(np.array([0, 0, -5]))
        with pytest.raises(ValueError, match=rf"{call.__name__}\(\) got 2 actions for 3 sub-environments"):
            call(np.array([0, 0]))
    assert envs._in_flight == {}
    envs.step(masked_actions(envs, obs, np.random.default_rng(0)))  # nothing was left half-sent
    envs.close()


def test_an_array_of_actions_is_checked_at_once_and_a_bad_one_still_named(chess_url, monkeypatch):
    envs = gym.make_vec("openenv/chess", num_envs=3, base_url=chess_url, agent_color="white")
    obs, _ = envs.reset(seed=0)
    calls = []
    original = episode_module.contains  # the check of one action (the batch's is vector.py's own name)
    monkeypatch.setattr(episode_module, "contains", lambda space, x: calls.append(x) or original(space, x))
    envs.step(masked_actions(envs, obs, np.random.default_rng(0)))  # legal moves, as an array
    assert calls == []  # the batch was checked as one MultiDiscrete array, no action alone
    with pytest.raises(ValueError, match=r"Sub-environment 1: Action np\.int64\(9999\) is not in"):
        envs.step(np.array([0, 9999, 0]))
    assert len(calls) == 2  # then each alone, up to the bad one
    with pytest.raises(ValueError, match=r"Sub-environment 0: Action np\.True_ is not in"):
        envs.step(np.array([True, False, True]))  # in the batched MultiDiscrete, not in Discrete
    del calls[:]
    envs.step(list(masked_actions(envs, obs, np.random.default_rng(0))))  # a list: checked one by one
    assert len(calls) == 3
    envs.close()


def test_base_urls_must_be_a_list_and_timeouts_may_be_seconds():
    with pytest.raises(TypeError, match=r"base_urls takes a list .* pass base_url='http://127\.0\.0\.1:1'"):
        gym.make_vec("openenv/echo", num_envs=2, base_urls="http://127.0.0.1:1")
    with pytest.raises(TypeError, match="timeouts must be a Timeouts"):
        gym.make_vec("openenv/echo", num_envs=2, timeouts="5")
    envs = gym.make_vec("openenv/echo", num_envs=2, timeouts=7)
    assert envs.timeouts == openenv_lab.Timeouts(connect=7, request=7, close=7)
    envs.close()


@pytest.mark.parametrize(
    ("spelling", "mode"),
    [
        ("next_step", AutoresetMode.NEXT_STEP),
        ("same_step", AutoresetMode.SAME_STEP),
        ("SameStep", AutoresetMode.SAME_STEP),
        (AutoresetMode.SAME_STEP, AutoresetMode.SAME_STEP),
    ],
)
def test_autoreset_mode_by_name_value_or_member(spelling, mode):
    envs = gym.make_vec("openenv/echo", num_envs=1, autoreset_mode=spelling)
    assert envs.autoreset_mode is mode and envs.metadata["autoreset_mode"] is mode
    envs.close()


@pytest.mark.parametrize("bad", ["disabled", "sometimes"])
def test_unsupported_autoreset_modes_are_refused(bad):
    with pytest.raises(ValueError, match="use 'next_step' or 'same_step'"):
        OpenEnvVectorEnv(1, "echo", autoreset_mode=bad)


@pytest.mark.parametrize("bad", [0, -2, 2.5, True])
def test_num_envs_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="num_envs must be a positive integer"):
        OpenEnvVectorEnv(bad, "chess")


def test_works_inside_a_running_event_loop(chess_url):
    import asyncio

    async def inside() -> tuple[int, ...]:
        envs = gym.make_vec("openenv/chess", num_envs=2)
        obs, _ = envs.reset(seed=0)
        envs.close()
        return obs["board"].shape

    assert asyncio.run(inside()) == (2, 19, 8, 8)


def test_send_recv_gives_the_same_results_as_step(chess_url, channels):
    """EnvPool-style: send all, recv all, results put back in env order equal `step`'s on the same seeds."""
    options = {"opponent": "greedy", "max_moves": 12}
    ours = gym.make_vec("openenv/chess", num_envs=3, **options)
    reference = gym.make_vec("openenv/chess", num_envs=3, **options)
    obs_a, _ = ours.reset(seed=7)
    obs_b, _ = reference.reset(seed=7)
    rng_a, rng_b = np.random.default_rng(0), np.random.default_rng(0)
    ended = 0
    for _ in range(20):
        ours.send(masked_actions(ours, obs_a, rng_a))
        *step_a, infos = ours.recv()
        order = np.argsort(infos["env_id"])
        assert sorted(infos["env_id"].tolist()) == [0, 1, 2]
        step_a = [_take(x, order) for x in step_a]
        step_b = reference.step(masked_actions(reference, obs_b, rng_b))[:4]
        for a, b in zip(step_a, step_b, strict=True):
            assert data_equivalence(a, b), f"{a!r} != {b!r}"
        obs_a, obs_b = step_a[0], step_b[0]
        ended += int(step_a[2].sum() + step_a[3].sum())
    assert ended >= 3  # autoresets happened through send()
    ours.close()
    reference.close()


def _take(batch, order):
    if isinstance(batch, dict):
        return {key: value[order] for key, value in batch.items()}
    return batch[order]


@pytest.mark.slow
def test_recv_returns_whichever_finished_first(channels):
    with (
        EmbeddedServer("chess") as fast,
        EmbeddedServer("chess", opponent="minimax", opponent_depth=4) as slow,
    ):
        # Frequent pings: the slow server's pongs arrive before its reply, and must not pass for one.
        keepalive = openenv_lab.Keepalive(interval=0.05)
        envs = gym.make_vec(
            "openenv/chess", num_envs=2, base_urls=[slow.base_url, fast.base_url], keepalive=keepalive
        )
        obs, _ = envs.reset(seed=0)
        envs.send(masked_actions(envs, obs, np.random.default_rng(0)))
        obs_fast, rewards, *_, infos = envs.recv(batch_size=1)
        assert infos["env_id"].tolist() == [1]  # env 0 waits for the minimax opponent
        assert obs_fast["board"].shape == (1, 19, 8, 8) and rewards.shape == (1,)
        assert infos["fen"].shape == infos["_fen"].shape == (1,)  # info rows are the batch's rows too
        with pytest.raises(ValueError, match="Sub-environment 0 has a step in flight"):
            envs.send(np.array([0]), env_ids=[0])
        with pytest.raises(ValueError, match="in flight: recv"):
            envs.step(np.array([0, 0]))
        envs.send(masked_actions(envs, obs_fast, np.random.default_rng(1)), env_ids=infos["env_id"])
        _, _, _, _, infos = envs.recv(batch_size=2)
        assert sorted(infos["env_id"].tolist()) == [0, 1]
        with pytest.raises(ValueError, match="Nothing is in flight"):
            envs.recv()
        with pytest.raises(ValueError, match="got 1 actions for 2"):
            envs.send(np.array([0]))
        with pytest.raises(IndexError, match="5 is not a sub-environment"):
            envs.send(np.array([0]), env_ids=[5])
        envs.close()


@pytest.mark.slow
def test_a_server_dying_during_send_recv_names_the_sub_environment(chess_url):
    with EmbeddedServer("chess") as dying:
        envs = gym.make_vec("openenv/chess", num_envs=2, base_urls=[chess_url, dying.base_url])
        obs, _ = envs.reset(seed=0)
        os.kill(dying._process.pid, signal.SIGKILL)
        envs.send(masked_actions(envs, obs, np.random.default_rng(0)))
        with pytest.raises(SessionClosed) as raised:
            envs.recv()
        assert raised.value.env_index == 1 and raised.value.server_url == dying.base_url
    assert envs.closed


def test_servers_of_other_environments_are_a_protocol_error_that_says_so():
    urls = [shared_embedded_server("echo").start(), shared_embedded_server("finrl").start()]
    with pytest.raises(ProtocolError, match=r"has other spaces than sub-environment 0.*servers of one"):
        gym.make_vec("openenv/remote", num_envs=2, base_urls=urls)
