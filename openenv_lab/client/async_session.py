"""`AsyncSession`: the asyncio twin of `Session`, for driving many sessions at once from one event loop.

Same protocol, same errors, same timeouts: it is the event loop's driver
(`openenv_lab.client.drivers.LoopDriver`) on the ``/ws`` format. Vector environments drive their sessions
from one event loop in a background thread (`openenv_lab.client.loop.LoopTransport`), so N round trips
overlap instead of adding up.
"""

from __future__ import annotations

from .drivers import AsyncPlay, LoopDriver, OneSession

__all__ = ["AsyncSession"]


class AsyncSession(OneSession, AsyncPlay, LoopDriver):
    """A live session with an OpenEnv server, for asyncio code. Open it with `AsyncSession.open`.

    Example:
        >>> import asyncio
        >>> from openenv_lab.client import AsyncSession
        >>> async def first_fen(url):
        ...     async with await AsyncSession.open(url) as session:
        ...         return (await session.reset(seed=0, agent_color="white")).observation["fen"]
        >>> from openenv_lab.launch import shared_embedded_server
        >>> asyncio.run(first_fen(shared_embedded_server("chess").base_url))
        'rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1'
    """

    async def __aenter__(self) -> AsyncSession:
        return self
