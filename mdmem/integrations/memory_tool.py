"""A backend for Claude's memory tool over an mdmem workspace (extra ``mdmem[anthropic]``).

::

    from anthropic import Anthropic
    from mdmem.integrations.memory_tool import MdmemMemoryTool

    memory = MdmemMemoryTool("my-agent")  # /memories is the workspace root; or folder="notes"
    runner = Anthropic().beta.messages.tool_runner(
        model="claude-sonnet-4-5", max_tokens=2048, tools=[memory], messages=[...]
    )

The answers are the reference backend's (``BetaLocalFilesystemMemoryTool``) word for word;
see :mod:`mdmem.integrations.memory_files` for what differs on purpose.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

import anyio.to_thread
from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool, ToolError
from anthropic.types.beta import (
    BetaCacheControlEphemeralParam,
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)

from mdmem import Workspace
from mdmem.errors import MdmemError
from mdmem.integrations.memory_files import MemoryFiles

__all__ = ["AsyncMdmemMemoryTool", "MdmemMemoryTool"]

T = TypeVar("T")
WorkspaceLike = Workspace | str | os.PathLike[str] | None


def _files(workspace: WorkspaceLike, folder: str) -> MemoryFiles:
    ws = workspace if isinstance(workspace, Workspace) else Workspace.open(workspace)
    return MemoryFiles(ws, folder)


def _answer(files: MemoryFiles, run: Callable[[], T]) -> T:
    """mdmem's errors become the tool result Claude reads (``is_error``), never a crash; a
    file system error names the path as Claude knows it (under /memories), not the machine's."""
    try:
        return run()
    except MdmemError as exc:
        raise ToolError(str(exc)) from None
    except OSError as exc:
        where = files.shown(exc.filename) if exc.filename else "/memories"
        raise ToolError(f"{where}: {exc.strerror or exc}") from None


class MdmemMemoryTool(BetaAbstractMemoryTool):
    """The memory tool over a workspace (an open one, a path, or the one found from here)."""

    def __init__(
        self,
        workspace: WorkspaceLike = None,
        *,
        folder: str = "",
        cache_control: BetaCacheControlEphemeralParam | None = None,
    ) -> None:
        super().__init__(cache_control=cache_control)
        self.files = _files(workspace, folder)

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return _answer(self.files, lambda: self.files.view(command.path, command.view_range))

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return _answer(self.files, lambda: self.files.create(command.path, command.file_text))

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return _answer(
            self.files,
            lambda: self.files.str_replace(command.path, command.old_str, command.new_str),
        )

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return _answer(
            self.files,
            lambda: self.files.insert(command.path, command.insert_line, command.insert_text),
        )

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return _answer(self.files, lambda: self.files.delete(command.path))

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return _answer(self.files, lambda: self.files.rename(command.old_path, command.new_path))

    def clear_all_memory(self) -> str:
        return _answer(self.files, self.files.clear_all)


class AsyncMdmemMemoryTool(BetaAsyncAbstractMemoryTool):
    """:class:`MdmemMemoryTool` for the async client: each command runs in a worker thread
    (file locks and fsync never block the event loop)."""

    def __init__(
        self,
        workspace: WorkspaceLike = None,
        *,
        folder: str = "",
        cache_control: BetaCacheControlEphemeralParam | None = None,
    ) -> None:
        super().__init__(cache_control=cache_control)
        self.files = _files(workspace, folder)

    async def _run(self, run: Callable[[], str]) -> str:
        return await anyio.to_thread.run_sync(lambda: _answer(self.files, run))

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return await self._run(lambda: self.files.view(command.path, command.view_range))

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return await self._run(lambda: self.files.create(command.path, command.file_text))

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return await self._run(
            lambda: self.files.str_replace(command.path, command.old_str, command.new_str)
        )

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return await self._run(
            lambda: self.files.insert(command.path, command.insert_line, command.insert_text)
        )

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return await self._run(lambda: self.files.delete(command.path))

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return await self._run(lambda: self.files.rename(command.old_path, command.new_path))

    async def clear_all_memory(self) -> str:
        return await self._run(self.files.clear_all)
