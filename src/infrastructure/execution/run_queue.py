"""What a server knows of the run queue of worker mode without procrastinate (job_queue.py, imported only in
worker mode: a server on SQLite, or one that executes its own runs, does without procrastinate and psycopg):
the queue's and the run task's names, a run's job's locks and arguments, and the health a queue answers."""

from typing import Protocol, runtime_checkable

from domain.ids import OrgId, RunId

QUEUE = "runs"
TASK = "execute_run"


def run_job_locks(run_id: RunId) -> dict[str, str]:
    """A run's job has the run as its lock (one worker at a time executes it) and its queueing lock (it waits in
    the queue once)."""
    return {"lock": str(run_id), "queueing_lock": str(run_id)}


def run_job_args(org_id: OrgId, run_id: RunId) -> dict[str, str]:
    """What a run's job is called with (see job_queue._execute_run_job)."""
    return {"org_id": str(org_id), "run_id": str(run_id)}


def made_due(jobs: str) -> str:
    """A statement that makes due now the run jobs `jobs` (a condition on procrastinate_jobs, in its caller's
    parameter style) picks among those waiting until later, and tells the workers of each as procrastinate tells them
    of a new job; a job due already is left as it is."""
    return (
        "WITH due AS (UPDATE procrastinate_jobs SET scheduled_at = now()"
        f" WHERE {jobs} AND status = 'todo' AND scheduled_at > now() RETURNING id, queue_name)"
        " SELECT pg_notify(c.channel, json_build_object('type', 'job_inserted', 'job_id', due.id)::text) FROM due,"
        " LATERAL (VALUES ('procrastinate_queue_v1#' || due.queue_name), ('procrastinate_any_queue_v1')) AS c(channel)"
    )


@runtime_checkable
class QueueHealth(Protocol):
    """A run executor backed by the queue (job_queue.QueueRunExecutor), as /readyz and /metrics read it."""

    async def health(self) -> dict[str, int] | None:
        """Live workers and runs waiting for one; None when the queue cannot be reached."""
        ...
