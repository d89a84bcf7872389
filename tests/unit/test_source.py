"""The file source without a mount: real inotify on a temporary directory, in trio. Each way
a file changes gives exactly the update it should, a slow compile never holds back the next
edit, and a source that cannot watch says so."""

from __future__ import annotations

import errno
import os
import shutil
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import inotify_simple
import pytest
import trio

from mokkafs.errors import ProfileError
from mokkafs.obs.status import Status
from mokkafs.profile.compile import Options
from mokkafs.profile.resolve import compile_text
from mokkafs.source import Update, inotify
from mokkafs.source import file as file_source
from mokkafs.source.file import FileSource
from mokkafs.source.inotify import Watches
from mokkafs.state import State
from tests.helpers.mounts import SHIPPED_PROFILES

A100, H100, T4 = ((SHIPPED_PROFILES / f"{n}.yaml").read_text() for n in ("a100", "h100", "t4"))
OPTIONS = Options(node_name="n")


def gpus(state: State | None) -> int:
    assert state is not None
    return sum(1 for f in state.functions if f.kind == "gpu")


def compile_profile(text: str, filename: str) -> State:
    return compile_text(text, filename, OPTIONS)


@asynccontextmanager
async def running(source: FileSource) -> AsyncIterator[trio.MemoryReceiveChannel[Update]]:
    send, recv = trio.open_memory_channel[Update](16)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(source.run, send)
        yield recv
        nursery.cancel_scope.cancel()


async def next_update(recv: trio.MemoryReceiveChannel[Update]) -> Update:
    with trio.fail_after(20):
        return await recv.receive()


async def settled(source: FileSource) -> None:
    """Until the source has read the file after its watch was set (its first read)."""
    with trio.fail_after(20):
        while source.reads == 0:  # noqa: ASYNC110  (a count the source keeps, no event)
            await trio.sleep(0.01)


def write_in_place(path: Path, text: str) -> None:
    with open(path, "r+") as f:
        f.truncate(0)
        f.write(text)


def profile_in(tmp_path: Path, text: str = A100) -> Path:
    path = tmp_path / "config" / "node.yaml"
    path.parent.mkdir()
    path.write_text(text)
    return path


def loaded_source(tmp_path: Path) -> tuple[Path, FileSource]:
    """A source of a profile in ``tmp_path``, its first State read."""
    path = profile_in(tmp_path)
    source = FileSource(path, compile_profile)
    trio.run(source.initial)
    return path, source


def test_each_way_a_file_changes_is_one_update(tmp_path: Path) -> None:
    path = profile_in(tmp_path)
    source = FileSource(path, compile_profile)
    assert gpus(trio.run(source.initial)) == 8 and source.generation == 2

    async def main() -> None:
        async with running(source) as updates:
            await settled(source)
            write_in_place(path, T4)
            first = await next_update(updates)
            assert gpus(first.state) == 4 and first.state and first.state.generation == 2
            path.write_text(T4)  # the same bytes: no update; the next one is H100's
            tmp = path.with_name(".swp")
            tmp.write_text(H100)
            os.rename(tmp, path)  # an editor's rename over
            second = await next_update(updates)
            assert gpus(second.state) == 8 and second.state and second.state.generation == 3

    trio.run(main)


def test_a_configmap_swap_is_one_update(tmp_path: Path) -> None:
    root = tmp_path / "config"
    root.mkdir()
    (root / "..2024_01").mkdir()
    (root / "..2024_01/node.yaml").write_text(A100)
    os.symlink("..2024_01", root / "..data")
    os.symlink("..data/node.yaml", root / "node.yaml")
    source = FileSource(root / "node.yaml", compile_profile)
    trio.run(source.initial)

    async def main() -> None:
        async with running(source) as updates:
            await settled(source)
            (root / "..2024_02").mkdir()
            (root / "..2024_02/node.yaml").write_text(T4)
            os.symlink("..2024_02", root / "..data_tmp")
            os.rename(root / "..data_tmp", root / "..data")  # what the kubelet does
            shutil.rmtree(root / "..2024_01")
            update = await next_update(updates)
            assert gpus(update.state) == 4

    trio.run(main)


class SlowCompiles:
    """A compile that, for text marked ``# slow``, says it started and then waits to be
    released (as a compile that takes a minute)."""

    def __init__(self) -> None:
        self.started = threading.Semaphore(0)
        self.release = threading.Event()

    def __call__(self, text: str, filename: str) -> State:
        if "# slow" in text:
            self.started.release()
            self.release.wait(60)
        return compile_profile(text, filename)

    async def wait_started(self) -> None:
        assert await trio.to_thread.run_sync(self.started.acquire, True, 20)


def save(path: Path, text: str) -> None:
    """Write a profile from the loop (a local file of a few KiB: not worth a thread)."""
    path.write_text(text)


def with_slow_compiles(tmp_path: Path, body: Callable[[Path, SlowCompiles,
                                                     trio.MemoryReceiveChannel[Update]],
                                                    Awaitable[None]]) -> None:
    """Run ``body(path, slow, updates)`` against a running source whose compiles are
    ``slow``, releasing any still waiting at the end."""
    path = profile_in(tmp_path)
    slow = SlowCompiles()
    source = FileSource(path, slow)
    trio.run(source.initial)

    async def main() -> None:
        async with running(source) as updates:
            await settled(source)
            await body(path, slow, updates)

    try:
        trio.run(main)
    finally:
        slow.release.set()


def test_a_slow_compile_never_holds_back_the_next_edit(tmp_path: Path) -> None:
    async def body(path: Path, slow: SlowCompiles,
                   updates: trio.MemoryReceiveChannel[Update]) -> None:
        save(path, H100 + "# slow\n")
        await slow.wait_started()
        save(path, T4)  # while the slow one still compiles
        update = await next_update(updates)
        assert gpus(update.state) == 4  # the newer edit, not the slow one
        slow.release.set()
        with trio.move_on_after(0.5):  # the abandoned compile sends nothing
            late = await updates.receive()
            pytest.fail(f"an abandoned compile was delivered: {late}")

    with_slow_compiles(tmp_path, body)


def test_the_same_bytes_saved_again_during_a_compile_are_delivered(tmp_path: Path) -> None:
    """A save of the very bytes a slow compile is working on abandons that compile; the
    step it starts must still deliver them (the bytes count as seen only once sent)."""

    async def body(path: Path, slow: SlowCompiles,
                   updates: trio.MemoryReceiveChannel[Update]) -> None:
        save(path, H100 + "# slow\n")
        await slow.wait_started()
        save(path, H100 + "# slow\n")  # again, while the first compile runs
        await slow.wait_started()  # the second step's
        slow.release.set()
        update = await next_update(updates)
        assert gpus(update.state) == 8 and update.state and update.state.generation == 2
        save(path, T4)
        after = await next_update(updates)  # the next is T4's: one update for the two
        assert gpus(after.state) == 4 and after.state and after.state.generation == 3

    with_slow_compiles(tmp_path, body)


def test_two_steps_that_read_the_same_new_bytes_deliver_them_once(tmp_path: Path) -> None:
    """A save's events can start a second step while the first is still sending what it
    read: the second, having read the same bytes, must not load them again."""
    path, source = loaded_source(tmp_path)
    read = Update(compile_profile(T4, str(path)), None, 0.0), file_source._digest(T4)
    both = threading.Barrier(2)  # both steps have read before either is back on the loop

    def load() -> tuple[Update, bytes | None]:
        both.wait(20)
        return read

    source._load = load  # type: ignore[method-assign]

    async def main() -> list[Update]:
        send, recv = trio.open_memory_channel[Update](16)
        async with trio.open_nursery() as nursery:
            for _ in range(2):
                nursery.start_soon(source._step, send, trio.CancelScope())
        send.close()
        return [update async for update in recv]

    updates = trio.run(main)
    assert len(updates) == 1 and gpus(updates[0].state) == 4 and source.generation == 3


def test_errors_are_updates_and_a_failed_read_forgets_the_bytes(tmp_path: Path) -> None:
    path, source = loaded_source(tmp_path)

    async def main() -> None:
        async with running(source) as updates:
            await settled(source)
            path.write_text(A100 + "gpus: 8\n")
            bad = await next_update(updates)
            assert isinstance(bad.error, ProfileError) and "not a section" in str(bad.error)
            text = path.read_text()
            path.unlink()
            gone = await next_update(updates)
            assert "no such file" in str(gone.error)
            path.write_text(A100)  # the bytes served before the bad edit: still news
            back = await next_update(updates)
            assert gpus(back.state) == 8
            assert text != A100

    trio.run(main)


class Unwatchable(Watches):
    """Watches that cannot be set, as when the kernel's inotify limits are reached."""

    fail = True

    def follow(self, directory: Path, beside: Path | None = None) -> str | None:
        if Unwatchable.fail:
            return f"no inotify watch on {directory}: No space left on device"
        return super().follow(directory, beside)


def test_a_source_that_cannot_watch_says_so_and_sighup_retries(tmp_path: Path,
                                                              expected_logs: list[str]) -> None:
    expected_logs.append("cannot follow .*: no inotify watch")
    path = profile_in(tmp_path)
    source = FileSource(path, compile_profile, watches=Unwatchable)
    trio.run(source.initial)
    status = Status(serving=True, watch=source)

    async def main() -> None:
        async with running(source) as updates:
            await settled(source)
            assert not source.following and "No space left" in str(source.follow_error)
            report = status.report()
            assert report["ready"] is False and report["following"] is False
            Unwatchable.fail = False
            source.reload()  # SIGHUP: watch again, and read
            update = await next_update(updates)
            assert update.state is not None and source.following
            assert status.report()["ready"] is True

    try:
        trio.run(main)
    finally:
        Unwatchable.fail = True


def test_no_inotify_instance_is_a_source_that_cannot_watch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, expected_logs: list[str]) -> None:
    """The user's inotify instances used up (EMFILE at inotify_init1): the source serves on,
    says why it does not follow, and a SIGHUP tries again, after which changes are seen."""
    expected_logs.append("cannot follow .*: no inotify instance")
    real = inotify_simple.INotify
    limit = [True]

    def instance(nonblocking: bool = False) -> inotify_simple.INotify:
        if limit[0]:
            raise OSError(errno.EMFILE, "Too many open files")
        return real(nonblocking=nonblocking)

    monkeypatch.setattr(inotify, "INotify", instance)
    path, source = loaded_source(tmp_path)

    async def main() -> None:
        async with running(source) as updates:
            await settled(source)
            assert not source.following
            assert "max_user_instances" in str(source.follow_error)
            limit[0] = False
            source.reload()  # SIGHUP
            assert (await next_update(updates)).state is not None and source.following
            path.write_text(T4)
            assert gpus((await next_update(updates)).state) == 4

    trio.run(main)


def test_the_directory_comes_back(tmp_path: Path) -> None:
    path, source = loaded_source(tmp_path)

    async def main() -> None:
        async with running(source) as updates:
            await settled(source)
            shutil.rmtree(path.parent)
            gone = await next_update(updates)
            assert gone.error is not None and source.following  # an ancestor is watched
            path.parent.mkdir()
            path.write_text(T4)
            back = await next_update(updates)
            assert gpus(back.state) == 4

    trio.run(main)


