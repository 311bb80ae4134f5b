import logging
import os
from collections.abc import Sequence
from pathlib import Path

from cryptography.fernet import Fernet

logger = logging.getLogger(__name__)


def secret_keys(configured: Sequence[str], data_dir: Path) -> list[str]:
    """The configured keys, or one generated once and kept in the data directory.

    A generated key suits one machine; deployments with several processes or hosts set
    THREADLINE_SECRET_KEY so that every one of them can read the stored credentials.
    """
    if configured:
        return list(configured)
    path = data_dir / "secret.key"
    if path.exists():
        return [path.read_text().strip()]
    data_dir.mkdir(parents=True, exist_ok=True)
    key = Fernet.generate_key().decode()
    # Written whole under another name, then linked into place: processes starting side by side on one data
    # directory all end with the key the first link put there (never a file read half written).
    fresh = data_dir / f".secret.key.{os.getpid()}"
    descriptor = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(key)
    try:
        os.link(fresh, path)
    except FileExistsError:  # another process generated it first
        return [path.read_text().strip()]
    finally:
        fresh.unlink()
    logger.warning("generated a secret key for stored credentials", extra={"path": str(path)})
    return [key]
