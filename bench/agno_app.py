"""Agno AgentOS doing the run shape of bench.runs, for comparison: one agent whose model is the benchmark's fake
model and whose tools are the benchmark's MCP server (Streamable HTTP), sessions stored in SQLite or PostgreSQL.

Runs in the venv bench/agentos.py makes (Agno and its dependencies, apart from Threadline's), as

    <venv>/bin/python bench/agno_app.py

with BENCH_AGNO_PORT, BENCH_MODEL_URL, BENCH_MCP_URL and BENCH_AGNO_DB (a SQLite file, or a PostgreSQL URL for
SQLAlchemy with psycopg). Agno's telemetry is off (nothing leaves the machine). Imports nothing of Threadline.
"""

import os

import uvicorn
from agno.agent import Agent
from agno.db.postgres import PostgresDb
from agno.db.sqlite import SqliteDb
from agno.models.openai import OpenAIChat
from agno.os import AgentOS
from agno.tools.mcp import MCPTools

AGENT_ID = "bench"

database = os.environ["BENCH_AGNO_DB"]
db = PostgresDb(db_url=database) if database.startswith("postgresql") else SqliteDb(db_file=database)
agent = Agent(
    id=AGENT_ID,
    name="Bench",
    model=OpenAIChat(id="bench-model", base_url=os.environ["BENCH_MODEL_URL"], api_key="sk-bench", max_retries=0),
    db=db,
    # The fake model calls `everything__echo`, as Threadline names the tool of an integration called Everything.
    tools=[MCPTools(transport="streamable-http", url=os.environ["BENCH_MCP_URL"], tool_name_prefix="everything_")],
    telemetry=False,
)
app = AgentOS(agents=[agent], telemetry=False).get_app()

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(os.environ["BENCH_AGNO_PORT"]), log_level="warning")
