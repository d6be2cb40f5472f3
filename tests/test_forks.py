"""A forked child never collects its parent's garbage (robopipe.forks)."""

import gc
import os
import signal
import time

import av
import pytest

import robopipe  # noqa: F401 (registers the fork hooks)

CHILD_S = 30  # a collection that ends does so in well under a second


@pytest.fixture
def no_automatic_collection():
    """The test's garbage stays uncollected until the fork (no collection in between)."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def drop_in_a_cycle(path) -> None:
    """Leave garbage as a failed decode does: a caught exception whose traceback holds the
    frame that held a PyAV stream, decoded with FFmpeg's frame threads."""
    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            stream.codec_context.thread_count = 2
            for _ in container.decode(stream):
                raise ValueError("a bad frame")
    except ValueError as error:
        cycle = [error]
        cycle.append(cycle)


def exit_code_of(pid: int) -> int:
    """The child's exit code; a child still running after CHILD_S is killed and fails."""
    deadline = time.monotonic() + CHILD_S
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail(f"the forked child still ran after {CHILD_S} s (its collection hung)")


def test_a_forked_child_leaves_a_frame_threaded_decoder_of_its_parent_alone(
    make_v21, no_automatic_collection
):
    video = next(make_v21(episodes=1, cameras=1).glob("videos/**/*.mp4"))
    drop_in_a_cycle(video)
    pid = os.fork()
    if pid == 0:
        try:
            gc.collect()  # without robopipe.forks: waits for the parent's FFmpeg threads
        finally:
            os._exit(0)
    assert exit_code_of(pid) == 0


def test_the_parent_collects_its_garbage_after_a_fork():
    assert gc.get_freeze_count() == 0
    pid = os.fork()
    if pid == 0:
        os._exit(0 if gc.get_freeze_count() > 0 else 1)  # the child keeps them frozen
    assert exit_code_of(pid) == 0
    assert gc.get_freeze_count() == 0  # the parent's objects back in its collection
