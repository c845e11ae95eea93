"""Spark's progress while one maintenance action runs, told through a plain callback (the run's log).

An Iceberg procedure is one SQL statement that can run for minutes; without this the run log says
nothing meanwhile. The action's jobs carry a job tag of their own, also shown in Spark's UI (not a job
group: Iceberg's actions set groups of their own), and a daemon thread polls Spark's status tracker
for that tag: jobs, stages and tasks done of total. Its first poll, a second after the action started
(or one interval, if shorter), says that the action runs; from then on it reports when Spark has
started the action's first job, then at most once per interval and only when something moved; every
line names the Spark application. Spark's progress when the action ended is not a line of its own:
it goes into the line that tells the action's result (`ActionProgress.summary`).

An action that ends before the first poll therefore tells its whole story in that one result line.
Most actions on a small table take under a second, and in a batch run every line is an event the run
stores (on SQLite about as costly as the action's own bookkeeping): three lines per action were most of
a small table's events.

A Spark Connect (`sc://`) client has no status tracker: pyspark 3.5's Connect client receives no task
progress from the server. Its jobs are tagged instead (the server adds the tag to its own job tags),
and the line saying the action runs also names the server's application and the tag to follow in the
server's Spark UI. Where icepack knows that UI (`spark.connect_ui_url`), the same poller reads the
tagged jobs' progress from the UI's REST API, by the same rule.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from py4j.protocol import Py4JError
from pyspark.errors import PySparkException

from icepack_dagster.spark.session import is_connect_session

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

ProgressSink = Callable[[str], None]
REPORT_INTERVAL_SECONDS = 10.0


@dataclass(frozen=True)
class SparkProgress:
    """What Spark has done for one action so far. Stages a finished job did not need to run (their
    shuffle output existed) are skipped, as in Spark's UI: neither they nor their tasks count."""

    jobs_done: int = 0
    jobs: int = 0
    stages_done: int = 0
    stages: int = 0
    stages_skipped: int = 0
    tasks_done: int = 0
    tasks: int = 0
    tasks_failed: int = 0

    def describe(self, application: str) -> str:
        skipped = f" ({self.stages_skipped} skipped)" if self.stages_skipped else ""
        failed = f", {self.tasks_failed} failed" if self.tasks_failed else ""
        return (
            f"Spark application {application}: jobs {self.jobs_done}/{self.jobs} done, "
            f"stages {self.stages_done}/{self.stages}{skipped}, tasks {self.tasks_done}/{self.tasks}{failed}"
        )


def read_progress(context: SparkContext, tag: str) -> SparkProgress:
    """The progress of the jobs tagged `tag`, from Spark's status tracker. A stage not yet submitted
    has no info: it counts as not done, its tasks as not yet known."""
    tracker = context.statusTracker()
    # pyspark 3.5 wraps Java's tracker, which lacks Scala's `getJobIdsForTag` (new in Spark 3.5)
    tagged = context._jsc.sc().statusTracker().getJobIdsForTag(tag)  # type: ignore[union-attr]
    jobs = [info for job in tagged if (info := tracker.getJobInfo(job))]
    needed = {stage for job in jobs if job.status != "SUCCEEDED" for stage in job.stageIds}
    infos = {stage: tracker.getStageInfo(stage) for job in jobs for stage in job.stageIds}
    complete = {stage for stage, info in infos.items() if info and info.numCompletedTasks >= info.numTasks}
    skipped = set(infos) - complete - needed
    counted = [info for stage, info in infos.items() if info is not None and stage not in skipped]
    return SparkProgress(
        jobs_done=sum(job.status == "SUCCEEDED" for job in jobs),
        jobs=len(jobs),
        stages_done=len(complete),
        stages=len(infos) - len(skipped),
        stages_skipped=len(skipped),
        tasks_done=sum(info.numCompletedTasks for info in counted),
        tasks=sum(info.numTasks for info in counted),
        tasks_failed=sum(info.numFailedTasks for info in counted),
    )


ProgressReader = Callable[[], SparkProgress]
_UI_TIMEOUT_SECONDS = 5.0
_SETTLE_SECONDS = 5.0  # how long the tracker may lag the action's end before its last word is taken


class ProgressUnavailable(Exception):
    """Spark's UI did not answer with the application's jobs (stopped, unreachable, another server)."""


def read_ui_progress(ui_url: str, application: str, tag: str) -> SparkProgress:
    """The progress of the jobs whose tags carry `tag`, from the REST API of the Spark UI at `ui_url`
    (`/api/v1/applications/<id>/jobs`, Spark 3.5's job data with its tags). A Connect server tags each
    job with the client's tag inside a longer tag of its own, hence the substring match."""
    address = f"{ui_url.rstrip('/')}/api/v1/applications/{application}/jobs"
    try:
        with urllib.request.urlopen(address, timeout=_UI_TIMEOUT_SECONDS) as response:  # noqa: S310
            jobs = [job for job in json.load(response) if any(tag in t for t in job.get("jobTags", ()))]
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise ProgressUnavailable(f"{address}: {error}") from None
    return SparkProgress(
        jobs_done=sum(job["status"] == "SUCCEEDED" for job in jobs),
        jobs=len(jobs),
        stages_done=sum(job["numCompletedStages"] for job in jobs),
        stages=sum(len(job["stageIds"]) - job["numSkippedStages"] for job in jobs),
        stages_skipped=sum(job["numSkippedStages"] for job in jobs),
        tasks_done=sum(job["numCompletedTasks"] for job in jobs),
        tasks=sum(job["numTasks"] - job["numSkippedTasks"] for job in jobs),
        tasks_failed=sum(job["numFailedTasks"] for job in jobs),
    )


@dataclass
class ActionProgress:
    """What `reported_progress` knows once its block ended: Spark's progress on the action's jobs, as
    one text for the line that tells the action's result (None: no job ran, or no progress is readable,
    as on a Connect server whose UI icepack does not know)."""

    summary: str | None = None


class _Poller(threading.Thread):
    """Says that the action runs at its first poll, then polls the tag's progress and reports it, by
    the rule in the module docstring. Without a progress reader (a Connect server whose UI icepack does
    not know) it only says that the action runs."""

    def __init__(
        self,
        read: ProgressReader | None,
        tag: str,
        report: ProgressSink,
        interval: float,
        application: str,
        started: str,
    ) -> None:
        super().__init__(name=f"spark-progress-{tag}", daemon=True)
        self._read_progress = read
        self._tag = tag
        self._report = report
        self._interval = interval
        self._application = application
        self.running_line = started
        self._finished = threading.Event()
        self.last: SparkProgress | None = None
        self.told = False  # the line saying the action runs was reported

    def run(self) -> None:
        poll = min(1.0, self._interval)
        if self._finished.wait(poll):
            return  # ended before its first poll: the result line tells it all
        self.tell_running()
        if self._read_progress is None:
            return
        reported_at = float("-inf")
        while True:
            progress = self._read()
            if progress is None:
                return
            first = self.last is None and progress.jobs > 0
            due = time.monotonic() - reported_at >= self._interval
            if progress.jobs and progress != self.last and (first or due):
                self._report(progress.describe(self._application))
                reported_at = time.monotonic()
                self.last = progress
            if self._finished.wait(poll):
                return

    def tell_running(self) -> None:
        """Report the line saying the action runs."""
        self._report(self.running_line)
        self.told = True

    def _read(self) -> SparkProgress | None:
        if self._read_progress is None:
            return None
        try:
            return self._read_progress()
        except Exception as error:  # best effort: a failed read ends the reporting, never the action
            logger.debug("Spark progress of %s no longer readable: %s", self._tag, error)
            return None

    def finish(self, settle: bool = True) -> str | None:
        """Stop polling; Spark's progress now, for the result line (None when no job ran). Spark's
        status tracker (and its UI) learn of a job's end from a listener bus that runs behind the
        action: when the action returned (`settle`), its jobs have ended, and the tracker is read
        again for a moment until it says so, never reporting `jobs 0/1` for work that is done."""
        self._finished.set()
        self.join()
        final = self._read()
        deadline = time.monotonic() + (_SETTLE_SECONDS if settle else 0)
        while final is not None and final.jobs_done < final.jobs and time.monotonic() < deadline:
            time.sleep(0.05)
            final = self._read()
        return final.describe(self._application) if final is not None and final.jobs else None


@contextmanager
def reported_progress(
    session: SparkSession,
    action: str,
    started: str,
    report: ProgressSink,
    interval: float = REPORT_INTERVAL_SECONDS,
) -> Iterator[ActionProgress]:
    """Report Spark's progress on the statements this thread runs in the block through `report`; the
    jobs' tag names `action`. `started`, the line saying the action runs, comes first, at the first
    poll; on Spark Connect the same line says where the action's jobs can be followed (one line, not
    two). The yielded `ActionProgress` holds Spark's progress at the end, once the block is left."""
    tag = f"icepack-{action}-{uuid.uuid4().hex[:8]}"
    outcome = ActionProgress()
    if is_connect_session(session):
        with _tagged_connect_jobs(session, tag, started, report, interval, outcome):
            yield outcome
        return
    try:
        context = session.sparkContext
        application = context.applicationId
        context.addJobTag(tag)
    except (Py4JError, PySparkException) as error:  # Spark itself is failing: the action will say so
        logger.debug("no Spark progress for %s: %s", tag, error)
        report(started)
        yield outcome
        return
    poller = _Poller(partial(read_progress, context, tag), tag, report, interval, application, started)
    try:
        with _polled(poller, outcome):
            yield outcome
    finally:
        with suppress(Py4JError):
            context.removeJobTag(tag)


@contextmanager
def _polled(poller: _Poller, outcome: ActionProgress) -> Iterator[None]:
    """Run `poller` for the block, stop it after and keep Spark's progress at the end in `outcome`. A
    block that raises gets no result line, so when it raised before the first poll the line saying the
    action runs is reported now: the log still names the table and the action."""
    poller.start()
    try:
        yield
    except BaseException:
        poller.finish(settle=False)
        if not poller.told:
            poller.tell_running()
        raise
    outcome.summary = poller.finish()


@contextmanager
def _tagged_connect_jobs(
    session: SparkSession, tag: str, started: str, report: ProgressSink, interval: float,
    outcome: ActionProgress,
) -> Iterator[None]:
    """Tag the block's operations on a Spark Connect server; report their progress from the server's
    Spark UI when icepack knows it, else say once, if the action runs past the first poll, where it
    can be seen."""
    application = _connect_application(session)
    ui_url = getattr(session, "ui_url", None)
    session.addTag(tag)
    if ui_url is None:
        told = (
            f"{started} on Spark Connect application {application}: the Connect client receives no task "
            f"progress; the server's Spark UI shows this action's jobs under the tag {tag} (set "
            "spark.connect_ui_url to see them here)"
        )
        poller = _Poller(None, tag, report, interval, application, told)
    else:
        told = f"{started} on Spark Connect application {application}: progress of tag {tag} from {ui_url}"
        read = partial(read_ui_progress, ui_url, application, tag)
        poller = _Poller(read, tag, report, interval, application, told)
    try:
        with _polled(poller, outcome):
            yield
    finally:
        session.removeTag(tag)


def _connect_application(session: SparkSession) -> str:
    """The Connect server's application id, asked once per session (one round trip per action saved)."""
    known = getattr(session, "application_id", None)
    if known is not None:
        return str(known)
    try:
        application = session.conf.get("spark.app.id") or "unknown"
    except PySparkException:
        return "unknown"
    session.application_id = application  # type: ignore[attr-defined]
    return application
