"""Our own OpenEnv environments (chess, Atari, FinRL, echo), built on the ``openenv`` package's server
framework, and how to run them.

The public face for the layers that start servers (`openenv_lab.launch`, the CLI): the catalogue
(`BUNDLED_SERVERS`, `get_bundled_server`), `run_server` (the body of ``openenv-lab serve NAME`` and of an
embedded server process), `ANNOUNCE_PREFIX` (the line a server process prints with its URL) and
`import_openenv_server` (the framework without its Gradio web UI, for tests and benchmarks), how a server
process runs (`ServeOptions`: the ``serve`` flags every replica of a fleet shares) and the session limits
(`Limits`, `DEFAULT_IDLE_TIMEOUT`, `DEFAULT_STEP_TIMEOUT`, `DEFAULT_MAX_REPLY_BYTES`). Importing
it is cheap: ``openenv`` and the environments load only when an app is built, normally in a server
process of its own. The client side never imports this package.
"""

from ._app import import_openenv_server
from ._limits import DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_REPLY_BYTES, DEFAULT_STEP_TIMEOUT, Limits
from ._run import ANNOUNCE_PREFIX, LOG_LEVELS, SERVE_RANGES, ServeOptions, run_server
from .catalogue import BUNDLED_SERVERS, BundledServer, ServerOption, get_bundled_server

__all__ = [
    "ANNOUNCE_PREFIX",
    "BUNDLED_SERVERS",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_REPLY_BYTES",
    "DEFAULT_STEP_TIMEOUT",
    "LOG_LEVELS",
    "SERVE_RANGES",
    "BundledServer",
    "Limits",
    "ServeOptions",
    "ServerOption",
    "get_bundled_server",
    "import_openenv_server",
    "run_server",
]
