"""The composition root: every adapter and use case is wired here, and only here."""

from datetime import timedelta

from dependency_injector import containers, providers

from application.use_cases.agents import CreateAgent, DeleteAgent, GetAgent, ListAgents, UpdateAgent
from application.use_cases.api_keys import AuthenticateApiKey, CreateApiKey, ListApiKeys, RevokeApiKey
from application.use_cases.organizations import CreateOrganization, FindOrganization, GetMe
from application.use_cases.threads import (
    AppendUserMessage,
    CreateThread,
    DeleteThread,
    GetThread,
    ListMessages,
    ListThreads,
)
from application.use_cases.tools import ListNativeTools
from infrastructure.persistence.engine import Database
from infrastructure.persistence.readiness import DatabaseReadiness
from infrastructure.persistence.unit_of_work import SqlAlchemyUnitOfWork
from infrastructure.security.api_keys import Sha256KeyHasher
from infrastructure.settings import Settings
from infrastructure.system import SystemClock, Uuid7Generator


class Container(containers.DeclarativeContainer):
    settings = providers.Singleton(Settings)

    database = providers.Singleton(
        Database,
        database_url=settings.provided.database_url,
        pool_size=settings.provided.database_pool_size,
    )
    readiness = providers.Singleton(DatabaseReadiness, engine=database.provided.engine)
    clock = providers.Singleton(SystemClock)
    ids = providers.Singleton(Uuid7Generator)
    key_hasher = providers.Singleton(Sha256KeyHasher)
    uow = providers.Factory(SqlAlchemyUnitOfWork, database=database)

    create_organization = providers.Factory(
        CreateOrganization, uow=uow, clock=clock, ids=ids, hasher=key_hasher
    )
    find_organization = providers.Factory(FindOrganization, uow=uow)
    get_me = providers.Factory(GetMe, uow=uow)

    authenticate_api_key = providers.Factory(
        AuthenticateApiKey,
        uow=uow,
        clock=clock,
        hasher=key_hasher,
        touch_interval=providers.Factory(timedelta, seconds=settings.provided.api_key_touch_seconds),
    )
    create_api_key = providers.Factory(CreateApiKey, uow=uow, clock=clock, ids=ids, hasher=key_hasher)
    list_api_keys = providers.Factory(ListApiKeys, uow=uow)
    revoke_api_key = providers.Factory(RevokeApiKey, uow=uow, clock=clock)

    create_agent = providers.Factory(
        CreateAgent, uow=uow, clock=clock, ids=ids, default_model=settings.provided.default_model
    )
    get_agent = providers.Factory(GetAgent, uow=uow)
    list_agents = providers.Factory(ListAgents, uow=uow)
    update_agent = providers.Factory(UpdateAgent, uow=uow, clock=clock)
    delete_agent = providers.Factory(DeleteAgent, uow=uow, clock=clock)

    create_thread = providers.Factory(CreateThread, uow=uow, clock=clock, ids=ids)
    get_thread = providers.Factory(GetThread, uow=uow)
    list_threads = providers.Factory(ListThreads, uow=uow)
    delete_thread = providers.Factory(DeleteThread, uow=uow)
    append_user_message = providers.Factory(AppendUserMessage, uow=uow, clock=clock, ids=ids)
    list_messages = providers.Factory(ListMessages, uow=uow)

    list_native_tools = providers.Factory(ListNativeTools)


async def shutdown(container: Container) -> None:
    """Release what the container opened (database connections)."""
    await container.database().dispose()
    container.database.reset()
