"""A forked child never collects its parent's garbage.

A DataLoader worker (or any process made by ``fork``) inherits every object of its parent,
garbage included: reference cycles the parent's collector has not reached yet. Collected in
the child, such garbage is finalised there, in a process that has none of its parent's
threads. A PyAV stream whose decoder ran with FFmpeg's frame threads (``thread_type =
"AUTO"``, as :mod:`robopipe.stats` and :mod:`robopipe.quality` decode) and that sits in a
cycle (an exception's traceback holding the frame that held it is enough) then waits forever
in ``avcodec_free_context`` for threads that exist only in the parent: the worker hangs, or
dies of SIGSEGV (seen in CI, a forked child of a test process).

So before each ``os.fork`` the parent freezes its objects (``gc.freeze``: moved to the
permanent generation, which no collection visits) and unfreezes them right after, in the
parent only. The child keeps them frozen: what it inherited is never collected there, and
what it allocates itself is collected as usual. Both calls are O(1) (CPython splices the
generation lists). Python's own ``gc.freeze`` documentation recommends freezing before a
fork for copy-on-write; here it is for correctness. Registered on import of :mod:`robopipe`.
"""

import gc
import os

_unfreeze_after = [False]  # in the parent: whether the objects were frozen by this fork


def _freeze_before_fork() -> None:
    # objects someone else froze stay frozen: unfreezing would undo their freeze too
    _unfreeze_after[0] = gc.get_freeze_count() == 0
    gc.freeze()


def _unfreeze_in_parent() -> None:
    if _unfreeze_after[0]:
        gc.unfreeze()


os.register_at_fork(before=_freeze_before_fork, after_in_parent=_unfreeze_in_parent)
