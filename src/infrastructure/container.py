"""The composition root: every adapter and use case is wired here, and only here."""

from collections.abc import Awaitable, Callable
from datetime import timedelta

from dependency_injector import containers, providers

from application.caller import Caller
from application.loaded_integrations import LoadedIntegrations
from application.ports.mcp import McpTarget
from application.retrieval import EmbedPassages, PassageSearch
from application.runs.answer_questions import AnswerQuestions
from application.runs.ask_agent import AskAgent
from application.runs.cancel_run import CancelRun
from application.runs.conversations import AnswerToolCalls, Converse
from application.runs.create_run import CreateRun
from application.runs.execute_run import ExecuteRun
from application.runs.follow_run import FollowRun
from application.runs.model_call import ModelCall
from application.runs.queries import GetRun, ListRuns
from application.runs.questions import LiveQuestions
from application.runs.recorder import RunRecorder
from application.runs.recover_runs import RecoverRuns
from application.runs.submit_tool_results import SubmitToolResults
from application.runs.tools.assembly import ToolAssembler
from application.runs.tools.calls import ToolCalls, ToolLimits
from application.runs.tools.mcp import McpPromptRetrieval, McpResourceRetrieval, McpToolCall
from application.runs.tools.native import (
    CodeExecution,
    InternetSearch,
    RunCommand,
    SourceQuery,
    WebsiteContent,
)
from application.runs.tools.sub_agents import SubAgentCall
from application.use_cases.agent_models import ListAgentModels
from application.use_cases.agents import CreateAgent, DeleteAgent, GetAgent, ImportAgent, ListAgents, UpdateAgent
from application.use_cases.api_keys import AuthenticateApiKey, CreateApiKey, ListApiKeys, RevokeApiKey
from application.use_cases.audit_events import ListAuditEvents
from application.use_cases.integrations import (
    CreateMcpIntegration,
    DeleteMcpIntegration,
    GetMcpIntegration,
    ListMcpIntegrations,
    RotateCredentialEncryption,
    TestMcpIntegration,
    UpdateMcpIntegration,
)
from application.use_cases.mcp_catalog import (
    ListMcpPrompts,
    ListMcpResources,
    ListMcpResourceTemplates,
    ListMcpTools,
)
from application.use_cases.mcp_oauth import CompleteMcpAuthorization, IntegrationTokens, StartMcpAuthorization
from application.use_cases.mcp_operations import (
    ExecuteMcpTool,
    GetMcpPrompt,
    ReadMcpResource,
    RetrieveMcpResource,
)
from application.use_cases.mcp_publishing import CallPublishedTool, CompleteArgument, GetPublishedPrompt, ListPublished
from application.use_cases.native_tools import ListNativeTools
from application.use_cases.organizations import (
    CreateOrganization,
    FindOrganization,
    GetMe,
    SetOrganizationLimits,
    UpdateOrganization,
)
from application.use_cases.prompt_templates import (
    CreatePromptTemplate,
    DeletePromptTemplate,
    GetPromptTemplate,
    ListPromptTemplates,
    RenderDraftTemplate,
    RenderPromptTemplate,
    UpdatePromptTemplate,
)
from application.use_cases.sources import (
    DeleteSource,
    GetSource,
    IndexStoredSources,
    ListPassages,
    ListSources,
    ReindexSource,
    SearchSources,
    ShowSource,
    UploadSource,
)
from application.use_cases.threads import (
    AppendUserMessage,
    CreateThread,
    DeleteThread,
    GetThread,
    ListMessages,
    ListThreads,
)
from application.use_cases.usage import GetUsage
from domain.tools import ToolType
from infrastructure import resources
from infrastructure.documents.fetcher import HttpFileFetcher
from infrastructure.documents.reader import FileDocumentReader
from infrastructure.limits.admission import RunAdmission
from infrastructure.limits.org_limits import OrgLimits
from infrastructure.limits.rate_limits import OrgRunRateLimit, windows_for
from infrastructure.mcp_client.oauth import SdkOAuthServers
from infrastructure.mcp_client.operator_servers import OperatorServerRegistry
from infrastructure.mcp_server.endpoint import McpEndpoint
from infrastructure.mcp_server.host_check import HostCheck
from infrastructure.mcp_server.server import PublishingServer
from infrastructure.metrics import MeteredLanguageModel, MeteredRunExecution, Metrics
from infrastructure.native_tools.commands import OperatorCommandRunner
from infrastructure.native_tools.python_sandbox import SubprocessPythonSandbox
from infrastructure.native_tools.web_page import HttpWebPageReader
from infrastructure.native_tools.web_search import SearxngWebSearch
from infrastructure.outbound.guard import NetworkPolicy
from infrastructure.persistence.oauth_grants import SqlOAuthGrants
from infrastructure.persistence.readiness import DatabaseReadiness
from infrastructure.persistence.unit_of_work import SqlAlchemyUnitOfWork
from infrastructure.security.api_keys import Sha256KeyHasher
from infrastructure.security.keys import secret_keys
from infrastructure.security.secret_box import FernetSecretBox
from infrastructure.security.verified_keys import VerifiedKeyCache, revocation_stamp
from infrastructure.settings import Settings
from infrastructure.system import SystemClock, Uuid7Generator
from infrastructure.template_files import ChatMdAgentFiles


def _authenticator(make: Callable[[], AuthenticateApiKey]) -> Callable[[str | None], Awaitable[Caller]]:
    async def authenticate(token: str | None) -> Caller:
        return await make().execute(token)

    return authenticate


def _authorizers(make: Callable[..., IntegrationTokens]) -> Callable[[McpTarget], IntegrationTokens]:
    """The access tokens of each oauth integration the MCP gateway connects to."""

    def authorizer(target: McpTarget) -> IntegrationTokens:
        return make(org_id=target.org_id, integration_id=target.integration_id)

    return authorizer


class Container(containers.DeclarativeContainer):
    settings = providers.Singleton(Settings)

    database = providers.Resource(
        resources.database,
        database_url=settings.provided.database_url,
        pool_size=settings.provided.database_pool_size,
    )
    readiness = providers.Singleton(DatabaseReadiness, engine=database.provided.engine)
    clock = providers.Singleton(SystemClock)
    ids = providers.Singleton(Uuid7Generator)
    key_hasher = providers.Singleton(Sha256KeyHasher)
    uow = providers.Factory(SqlAlchemyUnitOfWork, database=database, queued_runs=settings.provided.queued_runs)
    metrics = providers.Singleton(Metrics)
    org_limits = providers.Singleton(
        OrgLimits,
        database=database,
        max_concurrent_runs=settings.provided.org_max_concurrent_runs,
        runs_per_minute=settings.provided.org_runs_per_minute,
    )
    rate_windows = providers.Singleton(windows_for, database)
    run_rate_limit = providers.Singleton(OrgRunRateLimit, windows=rate_windows, limits=org_limits, clock=clock)

    create_organization = providers.Factory(CreateOrganization, uow=uow, clock=clock, ids=ids, hasher=key_hasher)
    find_organization = providers.Factory(FindOrganization, uow=uow)
    get_me = providers.Factory(GetMe, uow=uow)
    set_organization_limits = providers.Factory(SetOrganizationLimits, uow=uow, clock=clock)
    update_organization = providers.Factory(UpdateOrganization, uow=uow, clock=clock)

    verified_keys = providers.Singleton(
        VerifiedKeyCache,
        ttl_seconds=settings.provided.api_key_cache_seconds,
        stamp=providers.Callable(revocation_stamp, settings.provided.database_url),
    )
    # What this process hears from the others (on PostgreSQL): one listening connection for all of it.
    notices = providers.Resource(resources.notices, settings)
    serves_requests = providers.Object(True)
    """Whether this process serves HTTP requests (a worker does not: it verifies no API key)."""
    # Keys revoked through any process are forgotten at once by this one's verified keys.
    key_revocations = providers.Resource(
        resources.key_revocations, keys=verified_keys, notices=notices, serves_requests=serves_requests
    )
    authenticate_api_key = providers.Factory(
        AuthenticateApiKey,
        uow=uow,
        clock=clock,
        hasher=key_hasher,
        touch_interval=providers.Factory(timedelta, seconds=settings.provided.api_key_touch_seconds),
        verified=verified_keys,
    )
    create_api_key = providers.Factory(CreateApiKey, uow=uow, clock=clock, ids=ids, hasher=key_hasher)
    list_api_keys = providers.Factory(ListApiKeys, uow=uow)
    revoke_api_key = providers.Factory(RevokeApiKey, uow=uow, clock=clock, verified=verified_keys)

    create_agent = providers.Factory(
        CreateAgent, uow=uow, clock=clock, ids=ids, default_model=settings.provided.default_model
    )
    get_agent = providers.Factory(GetAgent, uow=uow)
    list_agents = providers.Factory(ListAgents, uow=uow)
    update_agent = providers.Factory(UpdateAgent, uow=uow, clock=clock)
    delete_agent = providers.Factory(DeleteAgent, uow=uow, clock=clock)
    agent_files = providers.Singleton(ChatMdAgentFiles)
    import_agent = providers.Factory(ImportAgent, files=agent_files, create=create_agent)

    create_thread = providers.Factory(CreateThread, uow=uow, clock=clock, ids=ids)
    get_thread = providers.Factory(GetThread, uow=uow)
    list_threads = providers.Factory(ListThreads, uow=uow)
    delete_thread = providers.Factory(DeleteThread, uow=uow)
    append_user_message = providers.Factory(AppendUserMessage, uow=uow, clock=clock, ids=ids)
    list_messages = providers.Factory(ListMessages, uow=uow)

    list_native_tools = providers.Factory(ListNativeTools)

    secret_box = providers.Singleton(
        FernetSecretBox,
        keys=providers.Callable(secret_keys, settings.provided.secret_key, settings.provided.data_dir),
    )
    operator_servers = providers.Singleton(OperatorServerRegistry.from_file, settings.provided.mcp_servers_file)
    outbound = providers.Singleton(NetworkPolicy, allowed_networks=settings.provided.mcp_allowed_networks)
    oauth_grants = providers.Singleton(SqlOAuthGrants, database)
    oauth_servers = providers.Singleton(SdkOAuthServers, outbound)
    mcp_authorizer = providers.Factory(
        IntegrationTokens, grants=oauth_grants, servers=oauth_servers, secrets=secret_box, clock=clock
    )
    # Integrations read lately (a run's tool calls reuse those its tools were assembled from); the gateway's
    # forget (an integration changed, here or in another process) drops them.
    loaded_integrations = providers.Singleton(LoadedIntegrations)
    mcp_gateway = providers.Resource(
        resources.mcp_gateway,
        servers=operator_servers,
        outbound=outbound,
        catalog_ttl_seconds=settings.provided.mcp_catalog_ttl_seconds,
        max_sessions=settings.provided.mcp_max_sessions,
        idle_seconds=settings.provided.mcp_idle_seconds,
        authorizers=providers.Callable(_authorizers, mcp_authorizer.provider),
        metrics=metrics,
        loaded=loaded_integrations,
    )

    create_mcp_integration = providers.Factory(
        CreateMcpIntegration,
        uow=uow,
        clock=clock,
        ids=ids,
        secrets=secret_box,
        outbound=outbound,
        servers=operator_servers,
    )
    get_mcp_integration = providers.Factory(GetMcpIntegration, uow=uow)
    list_mcp_integrations = providers.Factory(ListMcpIntegrations, uow=uow)
    update_mcp_integration = providers.Factory(
        UpdateMcpIntegration,
        uow=uow,
        clock=clock,
        secrets=secret_box,
        outbound=outbound,
        servers=operator_servers,
        gateway=mcp_gateway,
    )
    start_mcp_authorization = providers.Factory(
        StartMcpAuthorization,
        uow=uow,
        grants=oauth_grants,
        servers=oauth_servers,
        secrets=secret_box,
        clock=clock,
    )
    complete_mcp_authorization = providers.Factory(
        CompleteMcpAuthorization,
        uow=uow,
        grants=oauth_grants,
        servers=oauth_servers,
        secrets=secret_box,
        clock=clock,
        gateway=mcp_gateway,
    )
    delete_mcp_integration = providers.Factory(DeleteMcpIntegration, uow=uow, clock=clock, gateway=mcp_gateway)
    test_mcp_integration = providers.Factory(
        TestMcpIntegration, uow=uow, clock=clock, secrets=secret_box, gateway=mcp_gateway
    )
    list_mcp_tools = providers.Factory(ListMcpTools, uow=uow, secrets=secret_box, gateway=mcp_gateway)
    list_mcp_resources = providers.Factory(ListMcpResources, uow=uow, secrets=secret_box, gateway=mcp_gateway)
    list_mcp_resource_templates = providers.Factory(
        ListMcpResourceTemplates, uow=uow, secrets=secret_box, gateway=mcp_gateway
    )
    list_mcp_prompts = providers.Factory(ListMcpPrompts, uow=uow, secrets=secret_box, gateway=mcp_gateway)
    execute_mcp_tool = providers.Factory(
        ExecuteMcpTool, uow=uow, secrets=secret_box, gateway=mcp_gateway, loaded=loaded_integrations
    )
    get_mcp_prompt = providers.Factory(
        GetMcpPrompt, uow=uow, secrets=secret_box, gateway=mcp_gateway, loaded=loaded_integrations
    )
    read_mcp_resource = providers.Factory(ReadMcpResource, uow=uow, secrets=secret_box, gateway=mcp_gateway)
    retrieve_mcp_resource = providers.Factory(
        RetrieveMcpResource,
        uow=uow,
        clock=clock,
        ids=ids,
        secrets=secret_box,
        gateway=mcp_gateway,
        max_source_bytes=settings.provided.max_source_bytes,
    )
    rotate_credential_encryption = providers.Factory(
        RotateCredentialEncryption, uow=uow, secrets=secret_box, grants=oauth_grants
    )
    list_sources = providers.Factory(ListSources, uow=uow)
    get_source = providers.Factory(GetSource, uow=uow)

    # -- runs ---------------------------------------------------------------------------------------
    llm = providers.Resource(
        resources.language_models,
        openai_api_key=providers.Callable(
            lambda key: key.get_secret_value() if key else None, settings.provided.openai_api_key
        ),
        openai_base_url=settings.provided.openai_base_url,
        timeout_seconds=settings.provided.openai_timeout_seconds,
        max_retries=settings.provided.openai_max_retries,
    )
    metered_llm = providers.Factory(MeteredLanguageModel, llm, metrics)  # follows overrides of llm (tests)
    tracer = providers.Resource(resources.tracer, settings)
    follows_runs = providers.Object(True)
    """Whether this process serves followers of runs (a worker does not: it only sends its runs' events)."""
    run_event_bus = providers.Resource(resources.run_event_bus, settings, notices, listening=follows_runs)
    commands = providers.Singleton(OperatorCommandRunner.from_file, settings.provided.commands_file)
    web_search = providers.Singleton(SearxngWebSearch, settings.provided.search_url)
    code_sandbox = providers.Singleton(SubprocessPythonSandbox, settings.provided.code_execution_enabled)
    web_outbound = providers.Singleton(NetworkPolicy, allowed_networks=settings.provided.web_allowed_networks)
    web_pages = providers.Singleton(HttpWebPageReader, web_outbound)
    # -- sources: full text always, by meaning too when an embeddings model is configured -------------------
    embeddings = providers.Resource(resources.embeddings, settings)
    embeddings_model = providers.Callable(lambda model: model.model if model is not None else None, embeddings)
    passage_search = providers.Factory(PassageSearch, uow=uow, embeddings=embeddings)
    embed_passages = providers.Factory(
        EmbedPassages,
        uow=uow,
        clock=clock,
        embeddings=embeddings,
        retry=providers.Callable(
            lambda seconds: timedelta(seconds=seconds), settings.provided.embeddings_retry_seconds
        ),
    )
    passage_indexer = resources.Background(
        resources.passage_indexer,
        providers.Callable(
            lambda model, make: make if model is not None else None, embeddings, embed_passages.provider
        ),
        settings,
    )
    show_source = providers.Factory(ShowSource, uow=uow, embeddings_model=embeddings_model)
    upload_source = providers.Factory(
        UploadSource,
        uow=uow,
        clock=clock,
        ids=ids,
        reader=providers.Singleton(FileDocumentReader),
        fetcher=providers.Singleton(HttpFileFetcher, web_outbound),
        max_source_bytes=settings.provided.max_source_bytes,
        embeddings_model=embeddings_model,
    )
    delete_source = providers.Factory(DeleteSource, uow=uow)
    reindex_source = providers.Factory(ReindexSource, uow=uow, embeddings_model=embeddings_model)
    index_stored_sources = providers.Factory(IndexStoredSources, uow=uow)
    list_passages = providers.Factory(ListPassages, uow=uow)
    search_sources = providers.Factory(SearchSources, uow=uow, search=passage_search)
    tool_assembler = providers.Factory(
        ToolAssembler,
        uow=uow,
        secrets=secret_box,
        gateway=mcp_gateway,
        commands=commands,
        search=web_search,
        sandbox=code_sandbox,
        loaded=loaded_integrations,
    )
    # A sub-agent's run executes through AskAgent, which executes runs: ExecuteRun gets its collaborators below.
    execute_run = providers.Factory(ExecuteRun)
    metered_execute_run = providers.Factory(MeteredRunExecution, execute_run, metrics)  # every run is counted
    ask_agent = providers.Factory(
        AskAgent,
        uow=uow,
        clock=clock,
        ids=ids,
        bus=run_event_bus,
        runs=metered_execute_run.provider,
        # it executes the runs it answers for itself: no executor
        answer=providers.Factory(AnswerQuestions, uow=uow, clock=clock, bus=run_event_bus, executor=None).provider,
    )
    tool_handlers = providers.Dict(
        {
            ToolType.MCP_PROMPT: providers.Factory(McpPromptRetrieval, get_prompt=get_mcp_prompt),
            ToolType.MCP_RESOURCE: providers.Factory(McpResourceRetrieval, retrieve=retrieve_mcp_resource),
            ToolType.MCP_TOOL: providers.Factory(McpToolCall, execute=execute_mcp_tool),
            ToolType.SOURCE_QUERY: providers.Factory(SourceQuery, search=passage_search),
            ToolType.WEBSITE_CONTENT: providers.Factory(WebsiteContent, reader=web_pages),
            ToolType.INTERNET_SEARCH: providers.Factory(InternetSearch, search=web_search),
            ToolType.COMMAND: providers.Factory(RunCommand, commands=commands),
            ToolType.CODE_EXECUTION: providers.Factory(CodeExecution, sandbox=code_sandbox),
            ToolType.AGENT: providers.Factory(SubAgentCall, uow=uow, ask=ask_agent),
        }
    )
    execute_run.add_kwargs(
        recorder=providers.Factory(RunRecorder, uow=uow, clock=clock, ids=ids, bus=run_event_bus),
        assembler=tool_assembler,
        model=providers.Factory(
            ModelCall,
            llm=metered_llm,
            ids=ids,
            clock=clock,
            default_context_tokens=settings.provided.default_context_tokens,
        ),
        tools=providers.Factory(
            ToolCalls,
            handlers=tool_handlers,
            limits=providers.Factory(
                ToolLimits,
                result_max_chars=settings.provided.tool_result_max_chars,
                parallel_calls=settings.provided.parallel_tool_calls,
            ),
            questions=providers.Factory(
                LiveQuestions,
                uow=uow,
                clock=clock,
                ids=ids,
                bus=run_event_bus,
                timeout_seconds=settings.provided.question_timeout_seconds,
            ),
        ),
        tracer=tracer,
    )
    run_executor = resources.Background(
        resources.run_executor, settings, metered_execute_run.provider, org_limits=org_limits
    )
    worker_runs = providers.Singleton(
        resources.worker_runs,
        providers.Callable(resources.executing, metered_execute_run.provider),
        providers.Singleton(RunAdmission, database, default_limit=settings.provided.org_max_concurrent_runs),
    )
    create_run = providers.Factory(
        CreateRun,
        uow=uow,
        clock=clock,
        ids=ids,
        bus=run_event_bus,
        executor=run_executor,
        rate_limit=run_rate_limit,
    )
    get_run = providers.Factory(GetRun, uow=uow)
    list_runs = providers.Factory(ListRuns, uow=uow)
    cancel_run = providers.Factory(CancelRun, uow=uow, clock=clock, bus=run_event_bus, executor=run_executor)
    submit_tool_results = providers.Factory(
        SubmitToolResults, uow=uow, clock=clock, ids=ids, bus=run_event_bus, executor=run_executor
    )
    answer_questions = providers.Factory(
        AnswerQuestions, uow=uow, clock=clock, bus=run_event_bus, executor=run_executor
    )
    follow_run = providers.Factory(FollowRun, uow=uow, bus=run_event_bus)
    # -- the OpenAI-compatible routes -----------------------------------------------------------------
    list_agent_models = providers.Factory(ListAgentModels, uow=uow)
    converse = providers.Factory(
        Converse, uow=uow, clock=clock, ids=ids, bus=run_event_bus, executor=run_executor, rate_limit=run_rate_limit
    )
    answer_tool_calls = providers.Factory(AnswerToolCalls, uow=uow, submit=submit_tool_results)
    # -- prompt templates and /mcp ------------------------------------------------------------------
    prompt_files = resources.Background(
        resources.template_files,
        directory=settings.provided.prompts_dir,
        org_slug=settings.provided.prompts_org,
        default_agent=settings.provided.prompts_agent,
        uow=uow.provider,
        poll_seconds=settings.provided.prompts_poll_seconds,
    )
    create_prompt_template = providers.Factory(CreatePromptTemplate, uow=uow, clock=clock, files=prompt_files)
    update_prompt_template = providers.Factory(UpdatePromptTemplate, uow=uow, clock=clock, files=prompt_files)
    delete_prompt_template = providers.Factory(DeletePromptTemplate, uow=uow, clock=clock, files=prompt_files)
    list_prompt_templates = providers.Factory(ListPromptTemplates, uow=uow, files=prompt_files)
    get_prompt_template = providers.Factory(GetPromptTemplate, uow=uow, files=prompt_files)
    render_prompt_template = providers.Factory(RenderPromptTemplate, uow=uow, files=prompt_files)
    render_draft_template = providers.Factory(RenderDraftTemplate)
    list_published = providers.Factory(ListPublished, uow=uow, files=prompt_files)
    call_published_tool = providers.Factory(
        CallPublishedTool, uow=uow, clock=clock, files=prompt_files, ask=ask_agent, rate_limit=run_rate_limit
    )
    get_published_prompt = providers.Factory(GetPublishedPrompt, uow=uow, files=prompt_files)
    complete_argument = providers.Factory(CompleteArgument, uow=uow, files=prompt_files)
    publishing_server = providers.Singleton(
        PublishingServer,
        list_published=list_published.provider,
        call_tool=call_published_tool.provider,
        get_prompt=get_published_prompt.provider,
        complete=complete_argument.provider,
        list_sources=list_sources.provider,
        get_source=get_source.provider,
    )
    # Integration and publishing changes reach this process's MCP state (on PostgreSQL, those of any process).
    catalog_changes = providers.Resource(
        resources.catalog_changes, database=database, gateway=mcp_gateway, publishing=publishing_server, notices=notices
    )
    mcp_endpoint = providers.Singleton(
        McpEndpoint,
        publishing=publishing_server,
        authenticate=providers.Callable(
            lambda make: lambda token: make().execute(token), authenticate_api_key.provider
        ),
        hosts=providers.Callable(HostCheck.of, settings),
    )

    recover_runs = providers.Factory(RecoverRuns, uow=uow, clock=clock, bus=run_event_bus, executor=run_executor)
    # -- usage and the audit log --------------------------------------------------------------------
    get_usage = providers.Factory(GetUsage, uow=uow, clock=clock)
    list_audit_events = providers.Factory(ListAuditEvents, uow=uow)
