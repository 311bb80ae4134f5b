from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Configuration, read from THREADLINE_* environment variables (and a .env file if present)."""

    model_config = SettingsConfigDict(env_prefix="THREADLINE_", env_file=".env", extra="ignore")

    database_url: str = Field(
        default="sqlite+aiosqlite:///./threadline.db",
        description="SQLAlchemy async URL; sqlite+aiosqlite:///file.db or postgresql+asyncpg://user@host/db",
    )
    database_pool_size: int = Field(
        default=10, ge=1, le=200, description="Connections kept per process (PostgreSQL)"
    )
    host: str = Field(default="127.0.0.1", description="Address `threadline serve` listens on")
    port: int = Field(default=8000, ge=1, le=65535, description="Port `threadline serve` listens on")
    log_level: str = Field(default="INFO", description="Python log level name")
    log_format: Literal["json", "text"] = Field(default="json", description="Log line format")
    default_model: str = Field(
        default="threadline-offline", description="Model of agents created without one"
    )
    api_key_touch_seconds: int = Field(
        default=60, ge=0, description="How often an API key's last_used_at is written at most"
    )
    max_request_bytes: int = Field(
        default=8 * 1024 * 1024, ge=1024, description="Largest request body accepted"
    )

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    def sqlite_path(self) -> Path | None:
        if not self.is_sqlite or ":memory:" in self.database_url:
            return None
        return Path(self.database_url.split(":///", 1)[1])
