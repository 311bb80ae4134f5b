"""In worker mode, PostgreSQL announces a run's stored events as they commit (LISTEN/NOTIFY), not the process.

The processes of a worker-mode deployment hear each other's run events on one channel (see
infrastructure/execution/pg_event_bus.py). A stored event was sent by the process that stored it, after its
commit: one more statement per event (or per batch of them), in the process that executes the run. A trigger now
sends the notifications of the events a statement inserts, in the same transaction: they go out as it commits, in
the order of the commits, with no round trip of their own. The process still sends what it publishes unstored
(text deltas, progress).

The notifications are those pg_event_bus.encode makes: `<key> <index> <count> <piece of the event's JSON>`, an
event's JSON in pieces of PIECE_CHARS characters (the 8,000-byte limit of a payload). They are sent only by
connections on which `threadline.announce_run_events` is `on` (worker mode's; see persistence/engine.py): the
in-process executor, whose events stay in its process, pays nothing for them.

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-28
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ANNOUNCE = """
CREATE FUNCTION threadline_announce_run_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    added_event record;
    body text;
    pieces integer;
    event_key text;
BEGIN
    IF current_setting('threadline.announce_run_events', true) IS DISTINCT FROM 'on' THEN
        RETURN NULL;
    END IF;
    FOR added_event IN SELECT run_id, seq, type, created_at, data FROM added ORDER BY run_id, seq LOOP
        body := json_build_object(
            'run_id', added_event.run_id, 'seq', added_event.seq, 'type', added_event.type,
            'created_at', added_event.created_at, 'data', added_event.data
        )::text;
        pieces := greatest(1, (length(body) + 1799) / 1800);
        event_key := replace(gen_random_uuid()::text, '-', '');
        FOR piece IN 0 .. pieces - 1 LOOP
            PERFORM pg_notify(
                'threadline_run_events',
                event_key || ' ' || piece || ' ' || pieces || ' ' || substr(body, piece * 1800 + 1, 1800)
            );
        END LOOP;
    END LOOP;
    RETURN NULL;
END
$$
"""
_TRIGGER = """
CREATE TRIGGER run_events_announced AFTER INSERT ON run_events REFERENCING NEW TABLE AS added
FOR EACH STATEMENT EXECUTE FUNCTION threadline_announce_run_events()
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":  # worker mode is PostgreSQL's only
        op.execute(_ANNOUNCE)
        op.execute(_TRIGGER)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER run_events_announced ON run_events")
        op.execute("DROP FUNCTION threadline_announce_run_events()")
