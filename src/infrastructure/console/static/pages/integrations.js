// MCP integrations: health, create and edit (admins), test, and the server's tools, resources, resource
// templates and prompts, each callable from the page with its raw result or its typed error.
import { all, del, get, patch, post } from "../api.js";
import { schemaForm } from "../schema_form.js";
import {
  ago, badge, busy, button, checkbox, dialogConfirm, empty, errorBox, field, h, json, link, pageHeader, replace,
  select, statusBadge, toast, when,
} from "../ui.js";

export async function render(ctx) {
  const [id, action] = ctx.params;
  if (id === "new") return formPage(ctx, null);
  if (id && action === "edit") return formPage(ctx, await get(`/v1/mcp-integrations/${id}`, { signal: ctx.signal }));
  if (id) return detailPage(ctx, id);
  return listPage(ctx);
}

function health(integration) {
  const checked = integration.last_checked_at ? `tested ${ago(integration.last_checked_at)}` : "never tested";
  return h("div", { class: "health" },
    statusBadge(integration.connection_status), " ", integration.enabled ? null : badge("disabled", "muted"), " ",
    h("span", { class: "meta" }, checked),
    integration.last_error ? h("p", { class: "meta" }, `Last error: ${integration.last_error}`) : null);
}

function target(integration) {
  return integration.transport === "stdio" ? `operator server “${integration.server}”` : integration.url;
}

async function listPage({ main, isAdmin, signal }) {
  const items = await all("/v1/mcp-integrations", { signal });
  const create = isAdmin ? link("New integration", "#/integrations/new", { class: "btn primary" }) : null;
  if (!items.length) {
    replace(main, pageHeader("Integrations", create),
      empty("No MCP servers connected yet.",
        isAdmin ? "Connect one with “New integration”: its tools become available to your agents."
          : "An admin of your organization can connect MCP servers; they will be listed here."));
    return;
  }
  replace(main, pageHeader("Integrations", create),
    h("ul", { class: "list" }, items.map((integration) => h("li", { class: "item", "data-integration": integration.slug },
      h("div", { class: "item-main" },
        h("div", { class: "item-title" }, link(integration.name, `#/integrations/${integration.id}`), badge(integration.transport)),
        h("div", { class: "meta mono" }, `${integration.slug}__ · ${target(integration)}`),
        health(integration)),
      h("div", { class: "item-actions" }, link("Open", `#/integrations/${integration.id}`, { class: "btn small", "aria-label": `Open ${integration.name}` }))))));
}

// ---- create and edit ----

function formPage({ main, isAdmin, go }, existing) {
  const title = existing ? `Edit ${existing.name}` : "New integration";
  if (!isAdmin) {
    replace(main, pageHeader(title), empty("Only admins change integrations.", "You are signed in with a member key."));
    return;
  }
  const v = existing || { transport: "streamable_http", auth_type: "none", tool_filter: { mode: "all", names: [] }, timeout_seconds: 30, enabled: true, credentials: { set: false } };
  const name = h("input", { type: "text", name: "name", value: v.name || "", maxlength: "200" });
  const slug = h("input", { type: "text", name: "slug", value: v.slug || "", pattern: "[a-z0-9]+(-[a-z0-9]+)*", autocomplete: "off" });
  const transport = select([["streamable_http", "Streamable HTTP"], ["sse", "SSE (older servers)"], ["stdio", "Operator server (stdio)"]], v.transport, { name: "transport" });
  const url = h("input", { type: "url", name: "url", value: v.url || "", placeholder: "https://mcp.example.com/mcp" });
  const server = h("input", { type: "text", name: "server", value: v.server || "", placeholder: "a name from the operator's servers file" });
  const authType = select([["none", "None"], ["bearer", "Bearer token"], ["header", "Custom header"]], v.auth_type, { name: "auth_type" });
  const headerName = h("input", { type: "text", name: "auth_header_name", value: v.auth_header_name || "", placeholder: "X-API-Key" });
  const credentials = h("input", { type: "password", name: "credentials", autocomplete: "new-password" });
  const clear = checkbox("Remove the stored credential", { name: "clear_credentials" });
  const filterMode = select([["all", "All tools"], ["include", "Only these tools"], ["exclude", "All but these tools"]], v.tool_filter.mode, { name: "filter_mode" });
  const filterNames = h("textarea", { name: "filter_names", rows: "2", class: "prose" });
  filterNames.value = (v.tool_filter.names || []).join(", ");
  const timeout = h("input", { type: "number", name: "timeout_seconds", value: String(v.timeout_seconds), min: "1", max: "600", step: "1" });
  const enabled = checkbox("Enabled: agents may use it", { checked: v.enabled, name: "enabled" });
  const credentialHint = v.credentials.set
    ? `A credential is stored${v.credentials.last4 ? ` (ending in ${v.credentials.last4})` : ""}. Leave blank to keep it. It is never shown again.`
    : "Stored encrypted and never shown again.";

  const urlField = field("Server URL", url);
  const serverField = field("Operator server", server, { hint: "Servers the operator defined; you cannot give a command." });
  const headerField = field("Header name", headerName);
  const credentialField = h("div", {}, field("Credential", credentials, { hint: credentialHint }), existing && v.credentials.set ? clear.node : null);
  const filterNamesField = field("Tool names", filterNames, { hint: "Comma-separated." });
  function sync() {
    const stdio = transport.value === "stdio";
    urlField.hidden = stdio;
    serverField.hidden = !stdio;
    headerField.hidden = authType.value !== "header";
    credentialField.hidden = authType.value === "none";
    filterNamesField.hidden = filterMode.value === "all";
  }
  [transport, authType, filterMode].forEach((control) => control.addEventListener("change", sync));
  sync();

  const status = h("div", { "aria-live": "polite" });
  const save = h("button", { type: "submit", class: "btn primary" }, existing ? "Save changes" : "Create integration");
  const form = h("form", { class: "card", "aria-label": title },
    h("div", { class: "grid-2" },
      field("Name", name, { required: true }),
      field("Slug", slug, { hint: "Prefix of its tools' names (slug__tool). Derived from the name when blank." }),
      field("Transport", transport), h("div", {}, urlField, serverField),
      field("Authentication", authType), h("div", {}, headerField, credentialField),
      field("Tool filter", filterMode), filterNamesField,
      field("Timeout (seconds)", timeout)),
    enabled.node, status,
    h("div", { class: "actions" }, save, link("Cancel", existing ? `#/integrations/${existing.id}` : "#/integrations", { class: "btn ghost" })));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = { name: name.value, transport: transport.value, auth_type: authType.value, timeout_seconds: Number(timeout.value), enabled: enabled.input.checked };
    if (slug.value.trim()) body.slug = slug.value.trim();
    if (transport.value === "stdio") body.server = server.value.trim();
    else body.url = url.value.trim();
    if (authType.value === "header") body.auth_header_name = headerName.value.trim();
    if (authType.value !== "none" && credentials.value) body.credentials = credentials.value;
    if (existing && clear.input.checked) body.clear_credentials = true;
    const names = filterNames.value.split(/[,\n]/).map((s) => s.trim()).filter(Boolean);
    body.tool_filter = { mode: filterMode.value, names: filterMode.value === "all" ? [] : names };
    await busy(save, async () => {
      try {
        const saved = existing ? await patch(`/v1/mcp-integrations/${existing.id}`, body) : await post("/v1/mcp-integrations", body);
        toast(existing ? "Integration saved." : "Integration created.");
        go(`#/integrations/${saved.id}`);
      } catch (error) {
        replace(status, errorBox(error, "The integration was not saved"));
      }
    });
  });
  replace(main, h("p", { class: "crumbs" }, link("Integrations", "#/integrations")), pageHeader(title), form);
  name.focus();
}

// ---- one integration ----

async function detailPage(ctx, id) {
  const { main, isAdmin, signal, go } = ctx;
  const integration = await get(`/v1/mcp-integrations/${id}`, { signal });
  const testArea = h("div", { "aria-live": "polite" });
  const healthArea = h("div", {}, health(integration));
  const lastChecked = h("dd", { "data-last-checked": "" }, when(integration.last_checked_at));
  const testButton = isAdmin && button("Test connection", () => busy(testButton, async () => {
    try {
      const result = await post(`/v1/mcp-integrations/${id}/test`);
      replace(healthArea, health({ ...integration, connection_status: result.connection_status, last_checked_at: result.checked_at, last_error: result.error ? result.error.detail : null }));
      replace(lastChecked, when(result.checked_at));
      replace(testArea, result.ok ? connected(result.server) : errorBox(result.error, "The server could not be reached"));
    } catch (error) {
      replace(testArea, errorBox(error, "The test did not run"));
    }
  }), { class: "btn primary" });
  const adminActions = isAdmin ? [
    link("Edit", `#/integrations/${id}/edit`, { class: "btn" }),
    button(integration.enabled ? "Disable" : "Enable", async () => {
      try {
        await post(`/v1/mcp-integrations/${id}/${integration.enabled ? "disable" : "enable"}`);
        await render(ctx);
      } catch (error) {
        toast(error.detail || error.message, "bad");
      }
    }),
    button("Delete", async () => {
      if (!(await dialogConfirm(`Delete “${integration.name}”? Agents linked to it lose its tools.`, "Delete"))) return;
      try {
        await del(`/v1/mcp-integrations/${id}`);
        toast("Integration deleted.");
        go("#/integrations");
      } catch (error) {
        toast(error.detail || error.message, "bad");
      }
    }, { class: "btn danger" }),
  ] : [];
  const facts = h("dl", { class: "kv" },
    h("dt", {}, "Transport"), h("dd", {}, integration.transport),
    h("dt", {}, integration.transport === "stdio" ? "Server" : "URL"), h("dd", { class: "mono" }, target(integration)),
    h("dt", {}, "Tool names"), h("dd", { class: "mono" }, `${integration.slug}__<tool>`),
    h("dt", {}, "Authentication"), h("dd", {}, integration.auth_type === "none" ? "none" : `${integration.auth_type}${integration.auth_header_name ? ` (${integration.auth_header_name})` : ""}, credential ${integration.credentials.set ? "stored" : "not set"}`),
    h("dt", {}, "Tool filter"), h("dd", {}, integration.tool_filter.mode === "all" ? "all tools" : `${integration.tool_filter.mode}: ${integration.tool_filter.names.join(", ")}`),
    h("dt", {}, "Timeout"), h("dd", {}, `${integration.timeout_seconds} s`),
    h("dt", {}, "Last checked"), lastChecked);
  const panel = h("div", { role: "tabpanel", id: "catalog-panel" });
  const tabs = catalogTabs(id, panel, signal);
  replace(main,
    h("p", { class: "crumbs" }, link("Integrations", "#/integrations")),
    pageHeader(integration.name, ...(testButton ? [testButton] : []), ...adminActions),
    h("div", { class: "card" }, healthArea, facts), testArea, tabs, panel);
}

function connected(server) {
  return h("div", { class: "card", role: "status" },
    h("strong", {}, "Connected. "), `${server.name || "The server"} ${server.version || ""} speaks MCP ${server.protocol_version}: `,
    `${server.tools} tools, ${server.resources} resources, ${server.resource_templates} resource templates, ${server.prompts} prompts.`);
}

function catalogTabs(id, panel, signal) {
  const kinds = [["tools", "Tools", toolsView], ["resources", "Resources", resourcesView], ["resource-templates", "Resource templates", templatesView], ["prompts", "Prompts", promptsView]];
  const buttons = kinds.map(([kind, label, view]) => h("button", {
    type: "button", role: "tab", "aria-selected": "false", "aria-controls": "catalog-panel",
    onclick: async (event) => {
      buttons.forEach((b) => b.setAttribute("aria-selected", String(b === event.currentTarget)));
      replace(panel, h("p", { class: "loading" }, `Loading ${label.toLowerCase()}…`));
      try {
        const catalog = await get(`/v1/mcp-integrations/${id}/${kind}`, { signal });
        replace(panel, view(id, catalog.data, signal));
      } catch (error) {
        if (error.name !== "AbortError") replace(panel, errorBox(error, `The ${label.toLowerCase()} could not be listed`));
      }
    },
  }, label));
  return h("div", { class: "tabs", role: "tablist", "aria-label": "The server's catalog" }, buttons);
}

function outcome(area, work) {
  return async (event) => {
    const control = event.currentTarget;
    await busy(control, async () => {
      try {
        replace(area, await work());
      } catch (error) {
        replace(area, errorBox(error, "The server answered with an error"));
      }
    });
  };
}

function parts(content) {
  return (content || []).map((part) => {
    if (part.type === "text") return h("p", { class: "message-text" }, part.text);
    if (part.type === "image" && part.data && /^image\/(png|jpeg|gif|webp)$/.test(part.mime_type || "")) {
      return h("img", { src: `data:${part.mime_type};base64,${part.data}`, alt: `image (${part.mime_type}) returned by the tool` });
    }
    return h("p", { class: "meta" }, `${part.type}${part.mime_type ? ` (${part.mime_type})` : ""}${part.uri ? ` ${part.uri}` : ""}`);
  });
}

function toolsView(id, tools) {
  if (!tools.length) return empty("This server offers no tools (after the tool filter).");
  return h("ul", { class: "list" }, tools.map((tool) => {
    const form = schemaForm(tool.input_schema);
    const result = h("div", { class: "result", "aria-live": "polite" });
    const call = button("Call tool", outcome(result, async () => {
      let args;
      try {
        args = form.read();
      } catch (error) {
        return errorBox({ error: "InvalidArguments", detail: error.message }, "Check the arguments");
      }
      const answer = await post(`/v1/mcp-integrations/${id}/tools/${encodeURIComponent(tool.name)}/call`, { arguments: args });
      return h("div", {},
        answer.is_error ? h("div", { class: "error", role: "alert" }, h("strong", {}, "The tool reported an error"), h("p", {}, answer.text))
          : h("div", { class: "answer", "data-tool-result": tool.name }, parts(answer.content)),
        answer.structured_content ? h("h3", {}, "Structured content") : null,
        answer.structured_content ? json(answer.structured_content) : null,
        h("details", {}, h("summary", {}, "Raw result"), json(answer)));
    }), { class: "btn primary small" });
    return h("li", { class: "item", "data-tool": tool.name },
      h("div", { class: "item-main" },
        h("div", { class: "item-title mono" }, tool.name, tool.title ? h("span", { class: "meta" }, ` ${tool.title}`) : null),
        h("p", { class: "meta" }, tool.description || "No description."),
        h("details", { class: "try" }, h("summary", {}, `Try ${tool.name}`),
          h("form", { "aria-label": `Arguments of ${tool.name}`, onsubmit: (e) => { e.preventDefault(); call.click(); } }, form.node, call),
          h("details", {}, h("summary", {}, "Input schema"), json(tool.input_schema)), result)));
  }));
}

function resourceContents(content) {
  if (content.text !== null && content.text !== undefined) return h("pre", { class: "json" }, content.text);
  if (content.blob && /^image\/(png|jpeg|gif|webp)$/.test(content.mime_type || "")) {
    return h("img", { src: `data:${content.mime_type};base64,${content.blob}`, alt: `${content.uri} (${content.mime_type})` });
  }
  return h("p", { class: "meta" }, `Binary content (${content.mime_type || "unknown type"}), ${Math.round(((content.blob || "").length * 3) / 4)} bytes.`);
}

async function readInto(id, uri, area) {
  const contents = await post(`/v1/mcp-integrations/${id}/resources/read`, { uri });
  const list = Array.isArray(contents) ? contents : contents.data || contents.contents || [contents];
  return h("div", {}, list.map(resourceContents), h("details", {}, h("summary", {}, "Raw result"), json(contents)));
}

// The organization's threads, read once per page when a first import form opens, most recently updated first.
function threadChoices(signal) {
  let threads = null;
  return () => {
    threads = threads || all("/v1/threads", { signal, max: 500 }).then((found) => found.sort((a, b) => (a.updated_at < b.updated_at ? 1 : -1)));
    return threads;
  };
}

function importControls(id, uri, threads) {
  const thread = h("select", { name: "thread_id" }, h("option", { value: "" }, "Loading threads…"));
  const area = h("div", { "aria-live": "polite" });
  const go = button("Import into thread", outcome(area, async () => {
    if (!thread.value) return errorBox({ error: "ThreadMissing", detail: "Choose the thread the resource becomes a source of." }, "Check the thread");
    const source = await post(`/v1/mcp-integrations/${id}/resources/read`, { uri, import: true, thread_id: thread.value });
    const title = thread.selectedOptions[0]?.textContent || "the thread";
    return h("div", { role: "status" }, "Imported as a source of ", link(title, `#/threads/${thread.value}`), ".", h("details", {}, h("summary", {}, "Raw result"), json(source)));
  }), { class: "btn small", disabled: true });
  const details = h("details", { class: "try" }, h("summary", {}, "Import into a thread"),
    field("Thread", thread, { hint: "The resource becomes one of its sources: the agent can read it in that thread's runs." }), go, area);
  details.addEventListener("toggle", async () => {
    if (!details.open || go.dataset.loaded) return;
    go.dataset.loaded = "1";
    try {
      const found = await threads();
      replace(thread, found.length
        ? [h("option", { value: "" }, "Choose a thread…"), ...found.map((t) => h("option", { value: t.id }, `${t.title || "Untitled thread"} · updated ${ago(t.updated_at)}`))]
        : h("option", { value: "" }, "No threads yet: create one under Threads"));
      go.disabled = !found.length;
    } catch (error) {
      delete go.dataset.loaded;
      if (error.name !== "AbortError") replace(area, errorBox(error, "The threads could not be listed"));
    }
  });
  return details;
}

function resourcesView(id, resources, signal) {
  if (!resources.length) return empty("This server lists no resources.");
  const threads = threadChoices(signal);
  return h("ul", { class: "list" }, resources.map((resource) => {
    const area = h("div", { class: "result", "aria-live": "polite" });
    return h("li", { class: "item", "data-resource": resource.uri },
      h("div", { class: "item-main" },
        h("div", { class: "item-title" }, resource.name, badge(resource.mime_type || "unknown type")),
        h("p", { class: "meta mono" }, resource.uri),
        resource.description ? h("p", { class: "meta" }, resource.description) : null,
        h("div", { class: "actions" }, button("Read", outcome(area, () => readInto(id, resource.uri, area)), { class: "btn small", "aria-label": `Read ${resource.name}` })),
        importControls(id, resource.uri, threads), area));
  }));
}

function templatesView(id, templates) {
  if (!templates.length) return empty("This server has no resource templates.");
  return h("ul", { class: "list" }, templates.map((template) => {
    const uri = h("input", { type: "text", name: "uri", value: template.uri_template, class: "mono" });
    const area = h("div", { class: "result", "aria-live": "polite" });
    return h("li", { class: "item" },
      h("div", { class: "item-main" },
        h("div", { class: "item-title" }, template.name, template.mime_type ? badge(template.mime_type) : null),
        h("p", { class: "meta mono" }, template.uri_template),
        template.description ? h("p", { class: "meta" }, template.description) : null,
        field("URI to read", uri, { hint: "Fill in the template's {placeholders}." }),
        button("Read", outcome(area, () => readInto(id, uri.value.trim(), area)), { class: "btn small" }), area));
  }));
}

function promptsView(id, prompts) {
  if (!prompts.length) return empty("This server offers no prompts.");
  return h("ul", { class: "list" }, prompts.map((prompt) => {
    const inputs = prompt.arguments.map((argument) => [argument, h("input", { type: "text", name: argument.name })]);
    const area = h("div", { class: "result", "aria-live": "polite" });
    const getIt = button("Get prompt", outcome(area, async () => {
      const args = {};
      for (const [argument, input] of inputs) if (input.value !== "") args[argument.name] = input.value;
      const result = await post(`/v1/mcp-integrations/${id}/prompts/${encodeURIComponent(prompt.name)}/get`, { arguments: args });
      return h("div", {},
        result.description ? h("p", { class: "meta" }, result.description) : null,
        h("div", { class: "messages" }, result.messages.map((m) => h("div", { class: `message ${m.role}` }, h("div", { class: "role" }, m.role), h("div", { class: "text" }, m.content)))),
        h("details", {}, h("summary", {}, "Raw result"), json(result)));
    }), { class: "btn small primary" });
    return h("li", { class: "item", "data-prompt": prompt.name },
      h("div", { class: "item-main" },
        h("div", { class: "item-title mono" }, prompt.name),
        h("p", { class: "meta" }, prompt.description || "No description."),
        h("details", { class: "try" }, h("summary", {}, `Try ${prompt.name}`),
          inputs.map(([argument, input]) => field(argument.name, input, { hint: argument.description || "", required: argument.required })),
          getIt, area)));
  }));
}
