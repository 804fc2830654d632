"""A progress line a person can read, instead of a dot per test (``make test``).

With ``--progress-lines`` a passed test prints nothing of its own; every ``EVERY_S``
seconds, and when the last test is done, the controller prints one line::

    progress:  412/1158 tests (36%) | 0:03:10 | 0 failed, 2 skipped

A failure still prints its ``F`` and its report at the end, and pytest's closing summary
(``1158 passed in ...``) stays. ``make test`` loads it: ``-p tests.progress
--progress-lines``.
"""

from __future__ import annotations

import time

import pytest

EVERY_S = 30.0


def pytest_addoption(parser):
    parser.addoption("--progress-lines", action="store_true", default=False,
                     help="a progress line every 30 s instead of a dot per test")


class Progress:
    """The controller's counts: tests in the session, done, failed, skipped."""

    def __init__(self, config):
        self.config = config
        self.total = 0
        self.done = self.failed = self.skipped = 0
        self.start = self.last = time.monotonic()

    def line(self) -> str:
        share = f" ({100 * self.done // self.total}%)" if self.total else ""
        elapsed = time.strftime("%H:%M:%S", time.gmtime(time.monotonic() - self.start))
        return (f"progress: {self.done:4d}/{self.total} tests{share} | {elapsed[1:]} | "
                f"{self.failed} failed, {self.skipped} skipped")

    def say(self) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            if reporter._tw.width_of_current_line:  # after an F or s on this line
                reporter._tw.line()
            reporter.write_line(self.line())
        self.last = time.monotonic()

    def count(self, report) -> None:
        """One test's outcome, from its call report (a failed or skipped setup too)."""
        if report.when == "call" or (report.when == "setup" and not report.passed):
            self.done += 1
            self.failed += report.failed
            self.skipped += report.skipped
            if self.done == self.total or time.monotonic() - self.last >= EVERY_S:
                self.say()


def _on(config) -> bool:
    """Whether this process reports progress: the option given, and not an xdist worker."""
    return config.getoption("--progress-lines") and not hasattr(config, "workerinput")


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    if _on(config):
        config._podracer_progress = Progress(config)


def pytest_collection_finish(session):  # one process, no workers
    progress = getattr(session.config, "_podracer_progress", None)
    if progress is not None:
        progress.total = len(session.items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):  # the controller, once per worker
    progress = getattr(node.config, "_podracer_progress", None)
    if progress is not None:
        progress.total = max(progress.total, len(ids))


def pytest_runtest_logreport(report):
    progress = _CURRENT.get("progress")
    if progress is not None:
        progress.count(report)


def pytest_report_teststatus(report, config):
    """A passed test prints no dot (the progress lines stand for it)."""
    if _on(config) and report.passed and report.when == "call":
        return report.outcome, "", "PASSED"
    return None


_CURRENT: dict = {}


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session):
    _CURRENT["progress"] = getattr(session.config, "_podracer_progress", None)
