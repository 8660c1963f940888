"""The ``cel`` package's stderr lines are silenced while rules run, in any thread: a large write's
rules run in a worker thread while the event loop evaluates others, and the process's stderr must
be what it was once both are done, whichever leaves first."""

from __future__ import annotations

import sys
import threading

from controlplane.apis.apiextensions import cel


def test_rules_in_a_thread_and_on_the_loop_at_once_leave_stderr_as_it_was() -> None:
    before = sys.stderr
    entered, release = threading.Event(), threading.Event()

    def worker() -> None:  # a large write's rules, in a worker thread
        with cel._quiet():
            entered.set()
            release.wait(10)

    thread = threading.Thread(target=worker)
    thread.start()
    assert entered.wait(10)
    quieting = cel._quiet()
    quieting.__enter__()  # the loop's rules start while the thread's run
    assert sys.stderr is not before
    release.set()
    thread.join(10)  # the thread's leave first
    assert sys.stderr is not before  # the loop's are still running
    quieting.__exit__(None, None, None)
    assert sys.stderr is before
