"""Docker: our servers, or any OpenEnv image, in a container published on 127.0.0.1 only.

OpenEnv environments ship as container images, and that is how an environment you do not trust should
run: isolated, not on the host beside your credentials. `DockerServer` starts one container through the
Docker SDK, waits for ``/health``, and removes the container on `DockerServer.stop` and at interpreter
exit. `build_image` builds our own servers' images (``openenv-lab docker build chess``) from wheels
gathered on the host, on a base image given as a build argument, so it works with no registry access
(``scripts/offline-base-image.sh`` makes such a base image). `prune` removes containers that a dead
process left behind; every container we start carries the ``openenv-lab`` label and its owner.

Isolation defaults: not privileged, every Linux capability dropped, no new privileges, no host mounts,
our images run as an unprivileged user,
the port published on 127.0.0.1 only, environment variables only those passed explicitly. Memory and
CPU limits are arguments (``memory="2g"``, ``cpus=1.5``).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..client import Client, LaunchError, OpenEnvError, Timeouts
from ..options import option_flags
from ..progress import Waiting, progress_wanted, wait_for_call
from ..servers import get_bundled_server

__all__ = ["CONTAINER_PORT", "LABEL", "DockerServer", "build_image", "default_image", "prune"]

LABEL = "openenv-lab"
CONTAINER_PORT = 8000  # OpenEnv's convention: the server listens on 8000 inside the container
NOT_RUNNING = "Docker is not running: start it, or drop launcher='docker' to use the embedded server."
# Every image holds every server's dependencies (not the client's, such as OpenCV): the install layer is
# then the same for chess, atari and finrl, and built once (see the Dockerfile).
EXTRAS = "[servers]"
BASE_IMAGE_VARIABLE = "OPENENV_LAB_DOCKER_BASE_IMAGE"


def _version() -> str:
    from ..version import __version__

    return __version__


def default_image(name: str) -> str:
    """The tag `build_image` gives a bundled server's image, e.g. ``openenv-lab/chess:0.1.0``."""
    return f"openenv-lab/{name}:{_version()}"


def _docker() -> Any:
    """A connected Docker client, or a `LaunchError` in one sentence (never the SDK's traceback)."""
    try:
        import docker
    except ImportError:
        raise LaunchError(
            "launcher='docker' needs the Docker SDK: pip install 'openenv-lab[docker]'"
        ) from None
    try:
        # Creating a container copies the image's files on storage drivers without copy-on-write (vfs):
        # allow minutes for an API call; a missing engine still fails at once.
        client = docker.from_env(timeout=300)
        client.ping()
    except Exception as exc:  # DockerException, requests' ConnectionError, a missing socket...
        raise LaunchError(f"{NOT_RUNNING} ({type(exc).__name__}: {str(exc)[:200]})") from None
    return client


class DockerServer:
    """A server in a Docker container: one of ours (by name) or any OpenEnv image.

    Args:
        name: a bundled server (``"chess"``, ``"atari"``, ``"finrl"``, ``"echo"``); its image defaults to
            `default_image` and ``**options`` become its command-line options.
        image: any OpenEnv image (its server must listen on port 8000), instead of or besides ``name``.
        host_port: the port on 127.0.0.1 to publish on; None lets Docker pick a free one. A port in use
            is replaced by a free one (with a warning).
        memory: memory limit, e.g. ``"2g"``; cpus: CPU limit, e.g. ``1.5``.
        max_sessions: concurrent sessions our server accepts (default: the server's own).
        environment: environment variables for the container (nothing else from this process is passed).
        build: build our image first when it is missing (with progress, on the base image named by
            ``$OPENENV_LAB_DOCKER_BASE_IMAGE`` if set) instead of failing.
        pull: pull ``image`` when it is missing (e.g. a Space's image from ``registry.hf.space``), with
            ``registry_token`` as the registry password when one is given.
        startup_timeout: seconds to wait for ``/health``.
        progress: show a download or a start that lasts (see `openenv_lab.progress`; by default where
            someone watches: a terminal or a notebook).

    Example:
        >>> from openenv_lab.launch import DockerServer
        >>> # skipped: needs a Docker engine; tests/launch/test_docker.py runs this
        >>> with DockerServer("chess", memory="1g") as server:  # doctest: +SKIP
        ...     server.base_url
        'http://127.0.0.1:32768'
    """

    def __init__(
        self,
        name: str | None = None,
        *,
        image: str | None = None,
        host_port: int | None = None,
        memory: str | None = None,
        cpus: float | None = None,
        max_sessions: int | None = None,
        environment: dict[str, str] | None = None,
        build: bool = False,
        pull: bool = False,
        registry_token: str | None = None,
        startup_timeout: float = 120.0,
        progress: bool | None = None,
        **options: Any,
    ) -> None:
        if name is None and image is None:
            raise ValueError("DockerServer needs a bundled server name or an image")
        if name is not None:
            spec = get_bundled_server(name)
            unknown = set(options) - {option.name for option in spec.options}
            if unknown:
                raise ValueError(f"The {name} server has no option(s) {sorted(unknown)}")
        elif options or max_sessions is not None:
            given = sorted(options) + (["max_sessions"] if max_sessions is not None else [])
            raise ValueError(f"Options {given} apply to our own servers only, not to image={image!r}")
        self.name = name
        self.image = image or default_image(name)  # type: ignore[arg-type]
        self.host_port = host_port
        self.memory = memory
        self.cpus = cpus
        self.max_sessions = max_sessions
        self.environment = dict(environment or {})
        self.build = build
        self.pull = pull
        self._registry_token = registry_token
        self.startup_timeout = startup_timeout
        self.progress = progress
        self.options = dict(options)
        self.base_url: str | None = None
        self.container: Any = None
        # Our images listen on 0.0.0.0 inside the container, so their server requires a token: one per
        # container, passed in its environment and sent by the clients of this launcher (`headers`).
        self._token = self.environment.get("OPENENV_LAB_TOKEN") or secrets.token_urlsafe(24)

    @property
    def headers(self) -> dict[str, str]:
        """What every request to the container must carry (its server's token)."""
        return {"Authorization": f"Bearer {self._token}"}

    @property
    def running(self) -> bool:
        """Whether our container is up (as Docker last reported it)."""
        if self.container is None:
            return False
        try:
            self.container.reload()
        except Exception:
            return False
        return self.container.status == "running"

    def command(self) -> list[str]:
        """The arguments given to the image's entry point (our servers' options)."""
        args: list[str] = []
        if self.max_sessions is not None:
            args += ["--max-sessions", str(self.max_sessions)]
        args += option_flags(self.options)
        return args

    def start(self) -> str:
        """Start the container (if it is not running) and return the base URL once ``/health`` answers."""
        if self.container is not None and self.base_url is not None:
            return self.base_url
        client = _docker()
        self._ensure_image(client)
        started = time.monotonic()
        self.container = self._run(client)
        with _lock:
            _running.add(self)
        try:
            self.container.reload()
            port = self.container.attrs["NetworkSettings"]["Ports"][f"{CONTAINER_PORT}/tcp"][0]["HostPort"]
            self.base_url = f"http://127.0.0.1:{port}"
            self._wait_healthy(started)
        except BaseException as exc:
            logs = self.logs()
            self.stop()
            if isinstance(exc, LaunchError):
                raise
            if not isinstance(exc, Exception):
                raise  # Ctrl+C: the container is gone, let the interrupt through
            raise LaunchError(
                f"The container of {self.image} failed to start: {exc}{_log_tail(logs)}"
            ) from exc
        return self.base_url

    def stop(self, timeout: float = 5.0) -> None:
        """Stop and remove the container. Safe to call twice."""
        container, self.container = self.container, None
        self.base_url = None
        with _lock:
            _running.discard(self)
        if container is None:
            return
        with contextlib.suppress(Exception):  # already gone, or the engine went away: removal says which
            container.stop(timeout=int(timeout))
        try:
            container.remove(force=True)
        except Exception as exc:
            if "No such container" not in str(exc) and "is already in progress" not in str(exc):
                warnings.warn(f"Could not remove container {container.short_id}: {exc}", stacklevel=2)

    def logs(self, tail: int = 50) -> str:
        """The container's last output lines."""
        if self.container is None:
            return ""
        try:
            return self.container.logs(tail=tail).decode(errors="replace")
        except Exception:
            return ""

    def __enter__(self) -> DockerServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<DockerServer {self.image} {self.base_url or 'stopped'}>"

    # ------------------------------------------------------------------ steps of start()

    def _ensure_image(self, client: Any) -> None:
        import docker

        try:
            client.images.get(self.image)
            return
        except docker.errors.ImageNotFound:
            pass
        if self.name is None and self.pull:
            self._pull(client)
            return
        if self.name is None:
            raise LaunchError(f"Docker image {self.image!r} not found: pull or build it first.")
        if self.image != default_image(self.name):
            raise LaunchError(f"Docker image {self.image!r} not found: build or pull it first.")
        if not self.build:
            raise LaunchError(
                f"Docker image {self.image!r} not found. Build it with "
                f"`openenv-lab docker build {self.name}` (add --base-image IMG without registry access), "
                "or pass build=True to build it now."
            )
        build_image(self.name, tag=self.image, progress=print if progress_wanted(self.progress) else None)

    def _pull(self, client: Any) -> None:
        auth = {"username": "user", "password": self._registry_token} if self._registry_token else None
        repository, _, tag = self.image.rpartition(":")
        try:
            wait_for_call(
                f"the image {self.image} to download",
                lambda: client.images.pull(repository or self.image, tag=tag or "latest", auth_config=auth),
                progress=self.progress,
            )
        except Exception as exc:
            raise LaunchError(
                f"Docker image {self.image!r} is not here and could not be pulled: {exc}. Without network, "
                "pull or load it elsewhere first; for a private Space, pass its token."
            ) from None

    def _run(self, client: Any) -> Any:
        import docker

        port = self.host_port
        if port is not None and not _port_free(port):
            warnings.warn(f"Port {port} is in use: publishing on a free port instead", stacklevel=3)
            port = None
        kwargs: dict[str, Any] = {
            "command": self.command(),
            "detach": True,
            "ports": {f"{CONTAINER_PORT}/tcp": ("127.0.0.1", port)},
            "labels": {
                LABEL: "1",
                f"{LABEL}.server": self.name or "",
                f"{LABEL}.owner": f"{socket.gethostname()}:{os.getpid()}",
            },
            "environment": {**self.environment, "OPENENV_LAB_TOKEN": self._token},
            "privileged": False,
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
        }
        if self.name is not None:
            kwargs["user"] = "65534:65534"  # our images need no root at run time
        if self.memory is not None:
            kwargs["mem_limit"] = self.memory
        if self.cpus is not None:
            kwargs["nano_cpus"] = int(self.cpus * 1e9)
        try:
            return client.containers.run(self.image, **kwargs)
        except docker.errors.APIError as exc:
            if port is not None and ("already allocated" in str(exc) or "address already in use" in str(exc)):
                warnings.warn(f"Port {port} is in use: publishing on a free port instead", stacklevel=3)
                kwargs["ports"] = {f"{CONTAINER_PORT}/tcp": ("127.0.0.1", None)}
                _remove_created(client, kwargs["labels"])
                return client.containers.run(self.image, **kwargs)
            _remove_created(client, kwargs["labels"])
            raise LaunchError(f"Docker could not start {self.image}: {exc.explanation or exc}") from None
        except Exception as exc:  # the engine timed out or went away mid-call
            _remove_created(client, kwargs["labels"])
            raise LaunchError(f"Docker could not start {self.image}: {exc}") from None

    def _wait_healthy(self, started: float) -> None:
        assert self.base_url is not None
        timeouts = Timeouts(connect=2.0, request=2.0)
        waiting = Waiting(
            f"the container of {self.image} to start", self.startup_timeout, progress=self.progress
        )
        with waiting:
            self._poll_health(started, timeouts, waiting)

    def _poll_health(self, started: float, timeouts: Timeouts, waiting: Waiting) -> None:
        while True:
            waiting.tick(self.container.status)
            self.container.reload()
            if self.container.status in ("exited", "dead"):
                code = self.container.attrs["State"].get("ExitCode")
                raise LaunchError(
                    f"The container of {self.image} exited with status {code} while starting."
                    + _log_tail(self.logs())
                )
            try:
                with Client(self.base_url, timeouts=timeouts, headers=self.headers) as client:
                    if client.health().get("status") == "healthy":
                        return
            except OpenEnvError:
                pass
            if time.monotonic() - started > self.startup_timeout:
                raise LaunchError(
                    f"The container of {self.image} did not become healthy within {self.startup_timeout:g} s."
                    + _log_tail(self.logs())
                )
            time.sleep(0.2)


def _log_tail(logs: str, lines: int = 25) -> str:
    logs = logs.strip()
    if not logs:
        return " It printed nothing."
    return " Its output ended with:\n" + "\n".join(logs.splitlines()[-lines:])


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _remove_created(client: Any, labels: dict[str, str]) -> None:
    """Remove a container that was created but could not start (e.g. its port was taken)."""
    filters = {"label": [f"{key}={value}" for key, value in labels.items()], "status": "created"}
    with contextlib.suppress(Exception):  # best effort: `openenv-lab docker prune` catches the rest
        for container in client.containers.list(all=True, filters=filters):
            container.remove(force=True)


# ---------------------------------------------------------------------------------------------- images


def build_image(
    name: str,
    *,
    base_image: str | None = None,
    tag: str | None = None,
    progress: Callable[[str], None] | None = print,
) -> str:
    """Build our image for a bundled server and return its tag.

    The package and all its dependencies are gathered as wheels on this machine (with this machine's pip
    settings), so the build itself needs no package index. ``base_image`` (default:
    ``$OPENENV_LAB_DOCKER_BASE_IMAGE``, else ``python:X.Y-slim``) must provide Python 3 of the same minor
    version as this interpreter; without registry access ``scripts/offline-base-image.sh`` makes one.
    The images of all our servers share their install layer, so after the first the others build in
    seconds. The image the tag named before is removed once the build succeeds (unless another tag or a
    container still uses it), so rebuilding after an upgrade leaves no untagged image behind.
    ``progress`` receives each line of output (None: silent).
    """
    get_bundled_server(name)
    tag = tag or default_image(name)
    base_image = (
        base_image
        or os.environ.get(BASE_IMAGE_VARIABLE)
        or f"python:{sys.version_info.major}.{sys.version_info.minor}-slim"
    )
    say = progress or (lambda line: None)
    client = _docker()
    _check_python(client, base_image)
    replaced = _image_id(client, tag)
    with tempfile.TemporaryDirectory(prefix="openenv-lab-image-") as context:
        shutil.copy(Path(__file__).with_name("Dockerfile"), Path(context, "Dockerfile"))
        wheels = Path(context, "wheels")
        wheels.mkdir()
        source = _source_tree()
        if source is not None:  # an editable install: build from a clean copy, not the checkout's build/
            source = _clean_copy(source, Path(context, "source"))
        requirement = f"{source}{EXTRAS}" if source else f"openenv-lab{EXTRAS}=={_version()}"
        say(f"[1/2] gathering wheels for openenv-lab{EXTRAS}")
        _gather_wheels(requirement, wheels, say)
        if source is not None:
            shutil.rmtree(source)  # not part of the build context
        say(f"[2/2] building {tag} on {base_image}")
        stream = client.api.build(
            path=context,
            tag=tag,
            buildargs={"BASE_IMAGE": base_image, "SERVER": name, "EXTRAS": EXTRAS},
            rm=True,
            forcerm=True,
            decode=True,
        )
        recent: list[str] = []
        for chunk in stream:
            if "error" in chunk:
                raise LaunchError(
                    f"Building {tag} failed: {chunk['error'].strip()}\n" + "\n".join(recent[-20:])
                )
            for line in chunk.get("stream", "").splitlines():
                if line.strip():
                    recent.append(line)
                    say(line)
    if replaced is not None and replaced != _image_id(client, tag):
        _remove_replaced(client, replaced, tag, say)
    return tag


def _image_id(client: Any, tag: str) -> str | None:
    import docker.errors

    try:
        return str(client.images.get(tag).id)
    except docker.errors.ImageNotFound:
        return None


def _remove_replaced(client: Any, image_id: str, tag: str, say: Callable[[str], None]) -> None:
    """Remove the image that a rebuild took ``tag`` from: untagged, it would only hold disk (over a GB
    for each rebuild after an upgrade). Kept if it has another tag or a container (even a stopped one)
    still uses it."""
    import docker.errors

    short = image_id.removeprefix("sha256:")[:12]
    try:
        client.images.remove(image_id)
    except docker.errors.APIError as exc:
        say(f"kept the image {tag} had before ({short}): {exc.explanation or exc}")
    else:
        say(f"removed the image {tag} had before ({short})")


def _check_python(client: Any, base_image: str) -> None:
    import docker

    want = f"{sys.version_info.major}.{sys.version_info.minor}"
    try:
        out = client.containers.run(
            base_image,
            ["python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            remove=True,
            entrypoint=[],
        )
    except docker.errors.ImageNotFound:
        return  # not here yet: `docker build` pulls it (where a registry is reachable)
    except docker.errors.ContainerError as exc:
        raise LaunchError(f"The base image {base_image} has no working python3: {exc}") from None
    except docker.errors.APIError as exc:
        raise LaunchError(f"Could not use the base image {base_image}: {exc.explanation or exc}") from None
    have = out.decode().strip()
    if have != want:
        raise LaunchError(
            f"The base image {base_image} has Python {have}, but the wheels are gathered for Python {want} "
            f"(this interpreter): use a base image with Python {want}, e.g. python:{want}-slim."
        )


def _source_tree() -> Path | None:
    """The source checkout this package runs from (an editable install), if any."""
    root = Path(__file__).resolve().parents[2]
    pyproject = root / "pyproject.toml"
    if pyproject.is_file() and 'name = "openenv-lab"' in pyproject.read_text(encoding="utf-8"):
        return root
    return None


#: The checkout's top-level files a wheel's build reads: the metadata, the readme, the license and the
#: files shipped beside the package (pyproject.toml's ``license-files`` and ``data-files``).
_BUILD_FILES = ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in", "CHANGELOG.md", "CITATION.cff")


def _clean_copy(root: Path, target: Path) -> Path:
    """What a wheel of the checkout needs, without its build/, caches or egg-info (which would leak in)."""
    target.mkdir()
    for name in _BUILD_FILES:
        shutil.copy(root / name, target / name)
    shutil.copytree(
        root / "openenv_lab", target / "openenv_lab", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    return target


def _gather_wheels(requirement: str, wheels: Path, say: Callable[[str], None]) -> None:
    command = [sys.executable, "-m", "pip", "wheel", "--wheel-dir", str(wheels), requirement]
    # Fixed timestamps make our own wheel byte-identical from build to build, so Docker's cache keeps
    # the install layer when nothing changed (another server's image, a rebuild).
    env = {**os.environ, "SOURCE_DATE_EPOCH": "315532800"}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    assert process.stdout is not None
    recent: list[str] = []
    for line in process.stdout:
        line = line.rstrip()
        if not line or "is ignored: it is neither a file nor a directory" in line:
            continue  # pip's noise about unused index locations
        recent.append(line)
        if line.startswith(("Collecting", "Saved", "Building", "ERROR")):
            say("  " + line)
    if process.wait() != 0:
        raise LaunchError(f"pip could not gather the wheels for {requirement}:\n" + "\n".join(recent[-20:]))


# ---------------------------------------------------------------------------------------------- cleanup


def prune(*, everything: bool = False) -> list[str]:
    """Remove containers we started whose owner process is gone (``everything=True``: all of ours).

    Returns the short ids removed. `DockerServer` removes its container itself; this is for what a
    killed kernel left behind.
    """
    client = _docker()
    removed = []
    host = socket.gethostname()
    for container in client.containers.list(all=True, filters={"label": LABEL}):
        owner = container.labels.get(f"{LABEL}.owner", "")
        owner_host, _, pid = owner.rpartition(":")
        alive = owner_host == host and pid.isdigit() and _pid_alive(int(pid))
        if everything or not alive or container.status != "running":
            container.remove(force=True)
            removed.append(container.short_id)
    return removed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_running: set[DockerServer] = set()  # strong references: a dropped server's container still goes at exit
_lock = threading.Lock()


@atexit.register
def _stop_containers() -> None:
    with _lock:
        servers = list(_running)
    for server in servers:
        server.stop(timeout=2.0)
