"""Worker mode's fair share admits a run in one round trip: `threadline_admit_run`, on PostgreSQL only.

Admitting a run takes the organization's lock, counts the slots its runs hold (and the waiting runs ahead of this
one) after the lock is held, then admits the run or wakes the runs ahead. As statements sent one by one that was a
transaction of five round trips per run, with the lock held across them; a PL/pgSQL function does the same in one
(each of its statements reads with a snapshot of its own, so the count still sees what admissions that held the
lock before committed). See infrastructure/limits/admission.py.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-27
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Its counts of the slots held and of the waiting runs, and its wake of their jobs, are admission.py's `_HOLDING_COUNT`,
# `_WAITING_JOBS` and `_WAKE` as this revision found them (the release and the wake still send those).
ADMIT_RUN = """
CREATE FUNCTION threadline_admit_run(p_org uuid, p_run uuid, p_default_limit integer)
    RETURNS TABLE (admitted boolean, request_id varchar)
    LANGUAGE plpgsql
AS $$
DECLARE
    v_limit integer;
    v_status varchar;
    v_admitted_at timestamptz;
    v_request_id varchar;
    v_holding bigint;
    v_ahead bigint;
    v_free bigint;
    v_job record;
BEGIN
    -- The organization's row locked, with the run to admit.
    SELECT o.max_concurrent_runs, r.status, r.admitted_at, r.request_id
        INTO v_limit, v_status, v_admitted_at, v_request_id
        FROM organizations o LEFT JOIN runs r ON r.id = p_run AND r.org_id = o.id
        WHERE o.id = p_org
        FOR UPDATE OF o;
    IF NOT FOUND OR v_status IS NULL OR v_status NOT IN ('queued', 'in_progress') THEN
        RETURN QUERY SELECT true, NULL::varchar;  -- nothing to execute: the run's execution says so
        RETURN;
    END IF;
    IF v_admitted_at IS NOT NULL THEN
        RETURN QUERY SELECT true, v_request_id;
        RETURN;
    END IF;
    -- Read after the lock is held: what other admissions committed before is counted.
    SELECT
        (SELECT count(*) FROM runs
            WHERE org_id = p_org AND admitted_at IS NOT NULL AND status IN ('queued', 'in_progress')),
        (SELECT count(*) FROM runs r
            JOIN procrastinate_jobs j ON j.queueing_lock = CAST(r.id AS text) AND j.status = 'todo'
            WHERE r.org_id = p_org AND r.status = 'queued' AND r.admitted_at IS NULL
            AND r.created_at < (SELECT created_at FROM runs WHERE id = p_run))
        INTO v_holding, v_ahead;
    v_free := COALESCE(v_limit, p_default_limit) - v_holding;
    IF v_free <= 0 THEN
        RETURN QUERY SELECT false, NULL::varchar;
        RETURN;
    END IF;
    IF v_ahead >= v_free THEN
        -- Older runs wait for these slots: they take them (woken: due now, the workers told as of a new job),
        -- this one waits its turn.
        FOR v_job IN
            SELECT j.id, j.queue_name FROM runs r
                JOIN procrastinate_jobs j ON j.queueing_lock = CAST(r.id AS text) AND j.status = 'todo'
                WHERE r.org_id = p_org AND r.status = 'queued' AND r.admitted_at IS NULL
                AND r.created_at < (SELECT created_at FROM runs WHERE id = p_run)
                ORDER BY r.created_at, r.id
                LIMIT v_free
        LOOP
            UPDATE procrastinate_jobs SET scheduled_at = now()
                WHERE id = v_job.id AND status = 'todo' AND scheduled_at > now();
            IF FOUND THEN
                PERFORM pg_notify('procrastinate_queue_v1#' || v_job.queue_name,
                                  json_build_object('type', 'job_inserted', 'job_id', v_job.id)::text);
                PERFORM pg_notify('procrastinate_any_queue_v1',
                                  json_build_object('type', 'job_inserted', 'job_id', v_job.id)::text);
            END IF;
        END LOOP;
        RETURN QUERY SELECT false, NULL::varchar;
        RETURN;
    END IF;
    UPDATE runs SET admitted_at = now() WHERE id = p_run;
    RETURN QUERY SELECT true, v_request_id;
END;
$$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":  # worker mode is PostgreSQL's only
        op.execute(ADMIT_RUN)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION threadline_admit_run(uuid, uuid, integer)")
