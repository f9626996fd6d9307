"""The ``openenv-lab`` command: serve a bundled environment, measure one, or play games against one.

openenv-lab serve chess --port 8000 --opponent minimax     # an OpenEnv server for use from elsewhere
openenv-lab serve chess --port 0 --replicas 4             # four of them, each its own process
openenv-lab docker build chess --base-image IMG            # our chess server as a container image
openenv-lab docker run --space owner/name --trust-remote-code  # a Hub Space's image, on this machine
openenv-lab bench chess --base-url http://host:8000        # latency, bytes, sessions, seeds
openenv-lab play chess --games 3 --pgn games.pgn          # random agent vs the embedded server
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from .client.spaces import SERVER_TOKEN_VARIABLE
from .ranges import Range
from .servers import (
    BUNDLED_SERVERS,
    LOG_LEVELS,
    SERVE_RANGES,
    ServeOptions,
    ServerOption,
)

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return int(args.run(args) or 0)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="openenv-lab", description=__doc__.split("\n\n")[0])
    parser.set_defaults(command=None)
    commands = parser.add_subparsers(title="commands")

    serve = commands.add_parser("serve", help="run one of our OpenEnv servers", description=_serve.__doc__)
    servers = serve.add_subparsers(title="servers", dest="server", required=True)
    for spec in BUNDLED_SERVERS.values():
        sub = servers.add_parser(spec.name, help=spec.summary, description=spec.summary)
        sub.add_argument(
            "--host",
            default="127.0.0.1",
            help="interface to listen on (default: %(default)s; "
            "0.0.0.0 makes it reachable from other machines)",
        )
        sub.add_argument(
            "--port", type=_parse_port, default=8000, help="port (default: %(default)s; 0 picks a free one)"
        )
        sub.add_argument(
            "--max-sessions",
            type=_parse_in(SERVE_RANGES["max_sessions"]),
            default=None,
            help=f"concurrent sessions allowed (default: {spec.default_max_sessions})",
        )
        _add_serve_flags(sub, spec)
        sub.add_argument(
            "--token",
            default=None,
            help="require this token on every request (default: none on loopback; beyond it "
            "$OPENENV_LAB_TOKEN, else one generated and printed)",
        )
        sub.add_argument(
            "--token-from-env",
            action="store_true",
            help=f"require the token in ${SERVER_TOKEN_VARIABLE}, wherever bound (off the command line)",
        )
        sub.add_argument(
            "--no-token",
            action="store_true",
            help="beyond loopback, serve anyone without a token (behind a proxy that checks them)",
        )
        for option in spec.options:
            # A yes/no option is a flag (--mcp), and also takes a value (--mcp false).
            flag = {"nargs": "?", "const": True} if option.type is bool else {}
            sub.add_argument(
                "--" + option.name.replace("_", "-"),
                dest=option.name,
                type=_option_parser(option),
                default=option.default,
                choices=option.choices,
                help=f"{option.help}{f', {option.range}' if option.range else ''} (default: %(default)s)",
                **flag,
            )
        sub.add_argument(
            "--replicas",
            type=int,
            default=1,
            help="run this many copies, each its own process on loopback (ports PORT, PORT+1, ...; "
            "with --port 0, free ones), and print their URLs",
        )
        sub.add_argument(
            "--restart", action="store_true", help="with --replicas: start a copy again if it crashes"
        )
        sub.add_argument("--announce", action="store_true", help=argparse.SUPPRESS)
        sub.add_argument("--exit-with-parent", action="store_true", help=argparse.SUPPRESS)
        sub.set_defaults(command="serve", run=_serve, options=[o.name for o in spec.options])

    docker = commands.add_parser("docker", help="container images of our servers, and cleaning up")
    docker_commands = docker.add_subparsers(title="docker commands", dest="docker_command", required=True)
    build = docker_commands.add_parser(
        "build", help="build the image of one of our servers", description=_docker_build.__doc__
    )
    build.add_argument("server", choices=sorted(BUNDLED_SERVERS))
    build.add_argument(
        "--base-image",
        default=None,
        help="image to build on, with Python 3 of this interpreter's version "
        "(default: $OPENENV_LAB_DOCKER_BASE_IMAGE, else python:X.Y-slim; without registry access: "
        "scripts/offline-base-image.sh)",
    )
    build.add_argument("--tag", default=None, help="image tag (default: openenv-lab/SERVER:VERSION)")
    build.set_defaults(command="docker", run=_docker_build)
    run = docker_commands.add_parser(
        "run", help="run a server's container on 127.0.0.1 until Ctrl+C", description=_docker_run.__doc__
    )
    which = run.add_mutually_exclusive_group(required=True)
    which.add_argument("server", nargs="?", choices=sorted(BUNDLED_SERVERS), help="one of our servers")
    which.add_argument("--image", help="any OpenEnv image (its server listening on port 8000)")
    which.add_argument("--space", help="a Hugging Face Space 'owner/name': runs its image")
    run.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="with --space: run the Space's image, code written by its owner, on this machine",
    )
    run.add_argument("--port", type=_parse_port, default=None, help="port on 127.0.0.1 (default: a free one)")
    run.add_argument("--memory", default=None, help="memory limit, e.g. 2g")
    run.add_argument("--token", default=None, help="registry token for a private Space (default: $HF_TOKEN)")
    run.set_defaults(command="docker", run=_docker_run)
    prune = docker_commands.add_parser(
        "prune", help="remove containers left by processes that died", description=_docker_prune.__doc__
    )
    prune.add_argument("--all", action="store_true", help="also those of running processes")
    prune.set_defaults(command="docker", run=_docker_prune)

    bench = commands.add_parser(
        "bench", help="measure an environment: latency, bytes, sessions, seeds", description=_bench.__doc__
    )
    bench.add_argument("env", help="an id such as openenv/chess, or just chess")
    bench.add_argument("--base-url", default=None, help="a running server (default: the embedded one)")
    bench.add_argument("--steps", type=int, default=200, help="steps to time (default: %(default)s)")
    bench.add_argument("--json", action="store_true", help="print the report as JSON")
    bench.set_defaults(command="bench", run=_bench)

    card = commands.add_parser(
        "check",
        help="a report card of any OpenEnv server: exits 1 when a check fails",
        description=_check.__doc__,
    )
    card.add_argument("target", help="a server's URL, or an id such as openenv/chess (or just chess)")
    card.add_argument(
        "--base-url", default=None, help="with an id: a running server (default: the embedded one)"
    )
    card.add_argument(
        "--episodes", type=_parse_positive, default=20, help="random episodes (default: %(default)s)"
    )
    card.add_argument("--steps", type=_parse_positive, default=100, help="steps timed (default: %(default)s)")
    card.add_argument(
        "--token", default=None, help="a Bearer token the server requires (default: $OPENENV_LAB_TOKEN)"
    )
    card.add_argument(
        "--no-validate", action="store_true", help="skip openenv validate --url (it takes seconds)"
    )
    card.add_argument("--json", action="store_true", help="print the card as JSON")
    card.set_defaults(command="check", run=_check)

    play = commands.add_parser(
        "play", help="play games with a random agent and print the results", description=_play_chess.__doc__
    )
    games = play.add_subparsers(title="environments", dest="env", required=True)
    chess_parser = games.add_parser("chess", help="a random legal-move agent against the chess server")
    chess_parser.add_argument("--games", type=int, default=1, help="games to play (default: %(default)s)")
    chess_parser.add_argument(
        "--seed", type=int, default=0, help="seed of the first game (default: %(default)s)"
    )
    chess_parser.add_argument(
        "--opponent", default="random", help="random, greedy, minimax, stockfish or none"
    )
    chess_parser.add_argument("--agent-color", default="random", choices=["white", "black", "random"])
    chess_parser.add_argument("--base-url", default=None, help="a running chess server (default: start one)")
    chess_parser.add_argument("--pgn", default=None, help="also write the games to this PGN file")
    chess_parser.set_defaults(command="play", run=_play_chess)
    return parser


def _parse_port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is a number from 0 to 65535, got {text!r}")
    return port


def _parse_positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


def _add_serve_flags(parser: argparse.ArgumentParser, spec: Any) -> None:
    """The flags of `ServeOptions`' fields (each declared once, with its help, in ``servers/_run.py``)."""
    for field in ServeOptions.flag_fields():
        flag = "--" + field.name.replace("_", "-")
        help_text = field.metadata["help"].format(spec=spec)
        if field.type in (bool, "bool"):
            parser.add_argument(flag, action="store_true", help=help_text)
            continue
        if field.name == "log_level":
            parser.add_argument(
                flag, default=field.default, choices=LOG_LEVELS, help=f"{help_text} (default: %(default)s)"
            )
            continue
        never = field.metadata["never"]
        if field.default is not None:
            help_text += f" (default: %(default)s{'; 0: never' if never else ''})"
        parser.add_argument(
            flag, type=_parse_in(SERVE_RANGES[field.name], zero=never), default=field.default, help=help_text
        )


def _serve_options(args: argparse.Namespace) -> ServeOptions:
    """The `ServeOptions` the flags ask for (0 is None, no limit, where a flag takes it)."""
    values = {}
    for field in ServeOptions.flag_fields():
        value = getattr(args, field.name)
        values[field.name] = None if field.metadata["never"] and value == 0 else value
    return ServeOptions(**values)


def _parse_in(allowed: Range, *, zero: bool = False) -> Any:
    """An argparse type: a number in ``allowed`` (or 0, with ``zero``), else an error naming the range."""

    def parse(text: str) -> float:
        try:
            value: float = int(text) if allowed.integer else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {allowed}, got {text!r}") from None
        if not (allowed.contains(value) or (zero and value == 0)):
            also = " (or 0)" if zero else ""
            raise argparse.ArgumentTypeError(f"expected {allowed}{also}, got {text!r}")
        return value

    return parse


def _option_parser(option: ServerOption) -> Any:
    """The argparse type of a server's option: its type, and its range where it has one."""
    if option.type is bool:
        return _parse_bool
    if option.type is dict:
        return _parse_object
    if option.range is not None:
        return _parse_in(option.range)
    return option.type


def _parse_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r} ({exc})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object ({{...}}), got {text!r}")
    return value


def _parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _token(args: argparse.Namespace) -> str | None:
    """The token the server requires by its arguments: ``--token``, or ``--token-from-env``'s."""
    if not args.token_from_env:
        return args.token
    token = os.environ.get(SERVER_TOKEN_VARIABLE)
    if not token:
        raise SystemExit(f"--token-from-env: set ${SERVER_TOKEN_VARIABLE} to the token (it is unset)")
    return token


def _serve(args: argparse.Namespace) -> int:
    """Serve one of our OpenEnv environments over HTTP and WebSocket until Ctrl+C."""
    from .servers import get_bundled_server, run_server

    needs = get_bundled_server(args.server).missing()
    if needs is not None:
        print(f"openenv-lab serve: {needs}", file=sys.stderr)
        return 1
    options = {name: getattr(args, name) for name in args.options}
    try:
        serve_options = _serve_options(args)
    except ValueError as exc:
        print(f"openenv-lab serve: {exc}", file=sys.stderr)
        return 2
    if args.replicas != 1:
        return _serve_fleet(args, serve_options, options)
    try:
        run_server(
            args.server,
            host=args.host,
            port=args.port,
            max_sessions=args.max_sessions,
            announce=args.announce,
            exit_with_parent=args.exit_with_parent,
            token=_token(args),
            open_to_all=args.no_token,
            serve_options=serve_options,
            **options,
        )
    except (OSError, ValueError) as exc:
        print(f"openenv-lab serve: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl+C is how the banner says to stop it: no traceback
        pass
    return 0


def _serve_fleet(args: argparse.Namespace, serve_options: ServeOptions, options: dict[str, Any]) -> int:
    """Several copies of a server, each its own process; prints their URLs and crashes until Ctrl+C.

    Every flag of ``serve`` reaches every replica: the token (there by its environment, never on a command
    line), the session and message limits, the log level and the environment's options."""
    import warnings

    from .client.errors import LaunchError
    from .launch import Fleet

    if args.replicas < 1:
        print(f"openenv-lab serve: --replicas must be at least 1, got {args.replicas}", file=sys.stderr)
        return 2
    if args.host != "127.0.0.1":
        print("openenv-lab serve: --replicas serves on 127.0.0.1 only", file=sys.stderr)
        return 2
    try:
        fleet = Fleet(
            args.server,
            args.replicas,
            max_sessions=args.max_sessions,
            restart=args.restart,
            token=_token(args),
            serve_options=serve_options,
            **options,
        )
    except ValueError as exc:
        print(f"openenv-lab serve: {exc}", file=sys.stderr)
        return 2
    if args.port:
        for offset, server in enumerate(fleet.servers):
            server.port = args.port + offset
    warnings.simplefilter("ignore", RuntimeWarning)  # crashes are printed below instead
    try:
        urls = fleet.start()
        print(f"{args.replicas} {args.server} servers (Ctrl+C stops them all):", flush=True)
        for url in urls:
            print(url, flush=True)
        reported = 0
        while True:
            time.sleep(0.5)
            for crash in fleet.crashes[reported:]:
                reported += 1
                state = "restarted" if crash.restarted else "not restarted (add --restart)"
                print(
                    f"server {crash.replica} at {crash.url} exited ({crash.returncode}): {state}", flush=True
                )
    except LaunchError as exc:
        print(f"openenv-lab serve: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        fleet.stop()


def _docker_build(args: argparse.Namespace) -> int:
    """Build the Docker image of one of our servers from wheels gathered here (no package index needed
    during the build); the server listens on port 8000 in the container."""
    from .client.errors import LaunchError
    from .launch import build_image

    try:
        tag = build_image(args.server, base_image=args.base_image, tag=args.tag)
    except LaunchError as exc:
        print(f"openenv-lab docker build: {exc}", file=sys.stderr)
        return 1
    print(f"built {tag}: gym.make('openenv/{args.server}', launcher='docker') uses it")
    return 0


def _docker_run(args: argparse.Namespace) -> int:
    """Run the container of one of our servers, of any OpenEnv image or of a Hugging Face Space's image on
    127.0.0.1, print its URL, and stop and remove it on Ctrl+C."""
    from .client.errors import LaunchError
    from .client.spaces import TOKEN_VARIABLE, space_image
    from .launch import DockerServer

    try:
        if args.space is not None:
            if not args.trust_remote_code:
                print(
                    f"openenv-lab docker run: the image of {args.space} is code written by the Space's "
                    "owner; add --trust-remote-code to run it on this machine",
                    file=sys.stderr,
                )
                return 2
            token = args.token or os.environ.get(TOKEN_VARIABLE)
            server = DockerServer(
                image=space_image(args.space),
                host_port=args.port,
                memory=args.memory,
                pull=True,
                registry_token=token,
            )
        else:
            server = DockerServer(args.server, image=args.image, host_port=args.port, memory=args.memory)
    except ValueError as exc:
        print(f"openenv-lab docker run: {exc}", file=sys.stderr)
        return 2
    previous = signal.getsignal(signal.SIGINT)
    try:
        url = server.start()
        # From here Ctrl+C sets a flag rather than raising where it lands: a KeyboardInterrupt inside a
        # call to the Docker engine could leave its connection half-used, and the removal waiting on it.
        interrupted = threading.Event()
        signal.signal(signal.SIGINT, lambda *_: interrupted.set())
        token = server.headers["Authorization"].removeprefix("Bearer ")
        print(f"{server.image} at {url} with token {token} (Ctrl+C stops and removes it)", flush=True)
        while not interrupted.wait(0.5):
            if not server.running:
                print("openenv-lab docker run: the container exited", file=sys.stderr)
                return 1
        return 0
    except LaunchError as exc:
        print(f"openenv-lab docker run: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # while the container starts
        return 0
    finally:
        signal.signal(signal.SIGINT, previous)
        server.stop()


def _docker_prune(args: argparse.Namespace) -> int:
    """Remove the containers openenv_lab started for processes that are gone (a killed kernel's)."""
    from .client.errors import LaunchError
    from .launch import prune

    try:
        removed = prune(everything=args.all)
    except LaunchError as exc:
        print(f"openenv-lab docker prune: {exc}", file=sys.stderr)
        return 1
    print(f"removed {len(removed)} container(s)" + (": " + " ".join(removed) if removed else ""))
    return 0


def _bench(args: argparse.Namespace) -> int:
    """Time random steps of an environment and check its server: sessions accepted, seeds honoured."""
    import json

    import gymnasium as gym

    from .bench import bench
    from .client import OpenEnvError

    try:
        report = bench(args.env, base_url=args.base_url, steps=args.steps)
    except gym.error.NameNotFound as exc:
        known = ", ".join(
            sorted(name.split("/", 1)[1] for name in gym.registry if name.startswith("openenv/"))
        )
        print(f"openenv-lab bench: {exc} Ours are: {known}", file=sys.stderr)
        return 2
    except (OpenEnvError, ValueError, gym.error.Error) as exc:
        print(f"openenv-lab bench: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(report.as_dict(), indent=2) if args.json else report)
    return 0


def _check(args: argparse.Namespace) -> int:
    """Check an OpenEnv environment: the official runtime criteria, gymnasium's checker, determinism under
    seed, the state contract, observations against the schema, rewards against their range, episode
    endings, capacity, latency and a random baseline. Exits 1 when a check fails, so it can gate CI."""
    import gymnasium as gym

    from .client import OpenEnvError
    from .report_card import check

    options = {"token": args.token} if args.token else {}
    try:
        card = check(
            args.target,
            base_url=args.base_url,
            episodes=args.episodes,
            steps=args.steps,
            validate=not args.no_validate,
            progress=not args.json,
            **options,
        )
    except (OpenEnvError, ValueError, gym.error.Error) as exc:
        print(f"openenv-lab check: {exc}", file=sys.stderr)
        return 2
    print(card.to_json() if args.json else card)
    return 0 if card.passed else 1


def _play_chess(args: argparse.Namespace) -> int:
    """Play chess games with a random legal-move agent through gym.make("openenv/chess") and print them."""
    import chess
    import chess.pgn
    import gymnasium as gym

    from .client import OpenEnvError
    from .envs import register_envs
    from .files import check_writable, write_text_atomically

    register_envs()  # done by importing the package already; said here because this function relies on it

    if args.games < 1:
        print("openenv-lab play: --games must be at least 1", file=sys.stderr)
        return 2
    if args.seed < 0:
        print(f"openenv-lab play: --seed must be 0 or more, got {args.seed}", file=sys.stderr)
        return 2
    if args.pgn:
        try:  # before playing: a path that cannot be written would lose the games
            check_writable(args.pgn, "the games")
        except OSError as exc:
            print(f"openenv-lab play: {exc}", file=sys.stderr)
            return 2
    started = time.perf_counter()
    try:
        env = gym.make(
            "openenv/chess", base_url=args.base_url, opponent=args.opponent, agent_color=args.agent_color
        )
    except (OpenEnvError, ValueError) as exc:
        print(f"openenv-lab play: {exc}", file=sys.stderr)
        return 1
    where = args.base_url or f"the embedded server at {env.unwrapped.base_url}"
    print(f"Playing {args.games} game(s): random agent vs {args.opponent} opponent on {where}")
    scores: Counter[str] = Counter()
    games: list[chess.pgn.Game] = []
    try:
        for number in range(1, args.games + 1):
            game, board, outcome = _play_one_chess_game(env, seed=args.seed + number - 1)
            scores[outcome["score"]] += 1
            game.headers["Round"] = str(number)
            games.append(game)
            print(
                f"  game {number}: agent played {outcome['agent_color']}, {outcome['result']} "
                f"({outcome['end_reason'].replace('_', ' ')}) after {outcome['moves']} agent moves, "
                f"return {outcome['return']:+.1f}"
            )
    except OpenEnvError as exc:
        print(f"openenv-lab play: {exc}", file=sys.stderr)
        return 1
    finally:
        env.close()
    print("\nFinal position of the last game:")
    print(board.unicode(borders=True, empty_square="·"))
    print(
        f"\nAgent: {scores['win']} won, {scores['draw']} drawn, {scores['loss']} lost "
        f"in {time.perf_counter() - started:.1f} s"
    )
    if args.pgn:
        text = "\n\n".join(str(game) for game in games) + "\n"
        try:
            write_text_atomically(args.pgn, text, what="the games")
        except OSError as exc:
            print(f"openenv-lab play: {exc}", file=sys.stderr)
            return 1
        print(f"Games written to {args.pgn}")
    return 0


def _play_one_chess_game(env: Any, *, seed: int) -> tuple[Any, Any, dict[str, Any]]:
    """One game; the moves are replayed on a python-chess board to make a PGN game."""
    import chess
    import chess.pgn

    obs, info = env.reset(seed=seed)
    board = chess.Board()
    if info["opponent_move"]:  # "": none
        board.push_uci(info["opponent_move"])
    agent_color = info["agent_color"]
    env.action_space.seed(seed)
    total, moves = 0.0, 0
    terminated = truncated = False
    while not (terminated or truncated):
        action = env.action_space.sample(mask=obs["action_mask"])
        move = env.unwrapped.adapter.action_to_move(action)
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        moves += 1
        board.push_uci(move)
        if info["opponent_move"]:
            board.push_uci(info["opponent_move"])
    game = chess.pgn.Game.from_board(board)
    opponent = env.unwrapped.adapter.reset_options.get("opponent", "server default")
    names = {"white": "openenv_lab random agent", "black": f"{opponent} opponent"}
    if agent_color == "black":
        names = {"white": names["black"], "black": names["white"]}
    game.headers.update(
        Event="openenv-lab play chess",
        Site=env.unwrapped.base_url,
        Date=datetime.date.today().strftime("%Y.%m.%d"),
        White=names["white"],
        Black=names["black"],
        Result=info.get("result") or "*",
        Termination=info["end_reason"],
    )
    winner = {"1-0": "white", "0-1": "black"}.get(info.get("result") or "")
    score = "draw" if winner is None else ("win" if winner == agent_color else "loss")
    outcome = {
        "agent_color": agent_color,
        "result": info.get("result"),
        "end_reason": info["end_reason"],
        "moves": moves,
        "return": total,
        "score": score,
    }
    return game, board, outcome


if __name__ == "__main__":
    raise SystemExit(main())
