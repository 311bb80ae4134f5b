from datetime import UTC, datetime


def utc(value: datetime | None) -> datetime | None:
    """SQLite gives back naive datetimes; everything we store is UTC."""
    if value is None:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def utc_required(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
