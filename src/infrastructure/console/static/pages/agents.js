// Agents: list, create, edit (model, instructions, native tools and their settings, integrations,
// sub-agents, limits, MCP publishing), and import a ChatMD file.
import { all, del, get, patch, post } from "../api.js";
import { schemaForm } from "../schema_form.js";
import { ago, badge, busy, button, checkbox, dialogConfirm, empty, errorBox, field, h, json, link, pageHeader, replace, toast } from "../ui.js";

export async function render(ctx) {
  const [id, action] = ctx.params;
  if (id === "new") return formPage(ctx, null);
  if (id === "import") return importPage(ctx);
  if (id && action === "edit") return formPage(ctx, await get(`/v1/agents/${id}`, { signal: ctx.signal }));
  if (id) return detailPage(ctx, await get(`/v1/agents/${id}`, { signal: ctx.signal }));
  return listPage(ctx);
}

async function listPage({ main, signal }) {
  const agents = await all("/v1/agents", { signal });
  const actions = [link("New agent", "#/agents/new", { class: "btn primary" }), link("Import ChatMD", "#/agents/import", { class: "btn" })];
  if (!agents.length) {
    replace(main, pageHeader("Agents", ...actions), empty("No agents yet.", "Create one with “New agent”, or import a ChatMD file. An agent is a model with instructions and tools."));
    return;
  }
  replace(main, pageHeader("Agents", ...actions),
    h("ul", { class: "list" }, agents.map((agent) => h("li", { class: "item", "data-agent": agent.slug },
      h("div", { class: "item-main" },
        h("div", { class: "item-title" }, link(agent.name, `#/agents/${agent.id}`), badge(agent.model), agent.publish_as_mcp ? badge("published as MCP", "accent") : null),
        h("p", { class: "meta" }, agent.description || "No description."),
        h("p", { class: "meta" }, `${agent.tools.length} native tools · ${agent.mcp_integration_ids.length} integrations · ${agent.sub_agent_ids.length} sub-agents · updated ${ago(agent.updated_at)}`)),
      h("div", { class: "item-actions" }, link("Edit", `#/agents/${agent.id}/edit`, { class: "btn small", "aria-label": `Edit ${agent.name}` }))))));
}

async function detailPage({ main, signal, go }, agent) {
  const [integrations, agents] = await Promise.all([all("/v1/mcp-integrations", { signal }), all("/v1/agents", { signal })]);
  const names = (ids, items) => ids.map((id) => items.find((item) => item.id === id)?.name || id).join(", ") || "none";
  const talk = button("Start a thread", async () => {
    try {
      const thread = await post("/v1/threads", { agent_id: agent.id, title: `With ${agent.name}` });
      go(`#/threads/${thread.id}`);
    } catch (error) {
      toast(error.detail || error.message, "bad");
    }
  }, { class: "btn primary" });
  const remove = button("Delete", async () => {
    if (!(await dialogConfirm(`Delete the agent “${agent.name}”?`, "Delete"))) return;
    try {
      await del(`/v1/agents/${agent.id}`);
      go("#/agents");
    } catch (error) {
      toast(error.detail || error.message, "bad");
    }
  }, { class: "btn danger" });
  replace(main, h("p", { class: "crumbs" }, link("Agents", "#/agents")),
    pageHeader(agent.name, talk, link("Edit", `#/agents/${agent.id}/edit`, { class: "btn" }), link("Runs", `#/runs?agent_id=${agent.id}`, { class: "btn" }), remove),
    h("div", { class: "card" }, h("dl", { class: "kv" },
      h("dt", {}, "Slug"), h("dd", { class: "mono" }, agent.slug),
      h("dt", {}, "Model"), h("dd", {}, agent.model),
      h("dt", {}, "Description"), h("dd", {}, agent.description || "—"),
      h("dt", {}, "Native tools"), h("dd", {}, agent.tools.map((t) => t.type).join(", ") || "none"),
      h("dt", {}, "Integrations"), h("dd", {}, names(agent.mcp_integration_ids, integrations)),
      h("dt", {}, "Sub-agents"), h("dd", {}, names(agent.sub_agent_ids, agents)),
      h("dt", {}, "Max steps"), h("dd", {}, String(agent.max_steps)),
      h("dt", {}, "Parallel tool calls"), h("dd", {}, agent.parallel_tool_calls ? "yes" : "no"),
      h("dt", {}, "Published as MCP"), h("dd", {}, agent.publish_as_mcp ? `yes, as the tool “${agent.slug}”` : "no"))),
    h("h2", {}, "Instructions"), h("div", { class: "answer" }, agent.instructions || "No instructions."),
    h("details", {}, h("summary", {}, "Raw agent"), json(agent)));
}

async function formPage({ main, signal, go }, existing) {
  const [nativeTools, integrations, agents] = await Promise.all([
    get("/v1/tools", { signal }), all("/v1/mcp-integrations", { signal }), all("/v1/agents", { signal }),
  ]);
  const v = existing || { name: "", description: "", instructions: "", model: "", model_settings: {}, tools: [], mcp_integration_ids: [], sub_agent_ids: [], max_steps: 10, parallel_tool_calls: true, publish_as_mcp: false };
  const title = existing ? `Edit ${existing.name}` : "New agent";
  const name = h("input", { type: "text", name: "name", value: v.name, maxlength: "200" });
  const slug = h("input", { type: "text", name: "slug", value: v.slug || "", autocomplete: "off" });
  const model = h("input", { type: "text", name: "model", value: v.model, placeholder: "the server's default model", list: "known-models" });
  const knownModels = h("datalist", { id: "known-models" }, [...new Set(agents.map((a) => a.model))].map((m) => h("option", { value: m })));
  const description = h("input", { type: "text", name: "description", value: v.description });
  const instructions = h("textarea", { name: "instructions", rows: "8", class: "prose" });
  instructions.value = v.instructions;
  const temperature = h("input", { type: "number", name: "temperature", min: "0", max: "2", step: "0.1", value: v.model_settings.temperature ?? "" });
  const maxTokens = h("input", { type: "number", name: "max_tokens", min: "1", step: "1", value: v.model_settings.max_tokens ?? "" });
  const contextTokens = h("input", { type: "number", name: "context_tokens", min: "1024", max: "10000000", step: "1", value: v.model_settings.context_tokens ?? "" });
  const maxSteps = h("input", { type: "number", name: "max_steps", min: "1", step: "1", value: String(v.max_steps) });
  const parallel = checkbox("Run a step's tool calls in parallel", { checked: v.parallel_tool_calls });
  const publish = checkbox("Publish as an MCP tool at /mcp", { checked: v.publish_as_mcp, hint: "MCP clients with a key of your organization can call it by its slug." });

  const toolControls = nativeTools.map((tool) => {
    const chosen = v.tools.find((t) => t.type === tool.type);
    const box = checkbox(`${tool.name}`, { checked: Boolean(chosen), hint: `${tool.description}${tool.displayable ? " Your client carries it out: the run waits for its result." : ""}` });
    const settings = Object.keys(tool.config_schema.properties || {}).length ? schemaForm(tool.config_schema) : null;
    if (settings && chosen) {
      for (const [key, value] of Object.entries(chosen.config || {})) {
        const input = settings.node.querySelector(`[name="${CSS.escape(key)}"]`);
        if (input) input.value = value;
      }
    }
    if (settings) {
      const sync = () => { settings.node.hidden = !box.input.checked; };
      box.input.addEventListener("change", sync);
      sync();
    }
    return { tool, box, settings };
  });
  const integrationBoxes = integrations.map((integration) => ({ integration, box: checkbox(`${integration.name} (${integration.slug}__)`, { checked: v.mcp_integration_ids.includes(integration.id) }) }));
  const subAgentBoxes = agents.filter((a) => !existing || a.id !== existing.id).map((agent) => ({ agent, box: checkbox(`${agent.name} (agent__${agent.slug})`, { checked: v.sub_agent_ids.includes(agent.id) }) }));

  const status = h("div", { "aria-live": "polite" });
  const save = h("button", { type: "submit", class: "btn primary" }, existing ? "Save changes" : "Create agent");
  const fieldset = (legend, children, none) => h("fieldset", { class: "card" }, h("legend", {}, legend), children.length ? children : h("p", { class: "hint" }, none));
  const form = h("form", { "aria-label": title },
    h("div", { class: "card" },
      h("div", { class: "grid-2" }, field("Name", name, { required: true }), field("Slug", slug, { hint: "Derived from the name when blank." }),
        field("Model", model, { hint: "Without a provider configured, threadline-offline answers." }), field("Description", description)),
      knownModels,
      field("Instructions", instructions, { hint: "The system message the model reads first." }),
      h("div", { class: "grid-2" }, field("Temperature", temperature, { hint: "Blank: the model's default." }), field("Max tokens per answer", maxTokens),
        field("Max steps", maxSteps, { hint: "Model calls per run before it fails with max_steps_exceeded." }),
        field("Context window (tokens)", contextTokens, { hint: "Blank: known from the model's name, else the server's default. Older messages are left out to fit." })),
      parallel.node, publish.node),
    fieldset("Native tools", toolControls.map(({ box, settings }) => h("div", {}, box.node, settings ? h("div", { class: "nested" }, settings.node) : null)), "No native tools."),
    fieldset("MCP integrations", integrationBoxes.map(({ box }) => box.node), "No integrations yet: an admin connects them under Integrations."),
    fieldset("Sub-agents", subAgentBoxes.map(({ box }) => box.node), "No other agents to delegate to."),
    status,
    h("div", { class: "actions" }, save, link("Cancel", existing ? `#/agents/${existing.id}` : "#/agents", { class: "btn ghost" })));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    // The settings this form has no field for (top_p, seed, penalties... set through the API) are kept.
    const { temperature: _t, max_tokens: _m, context_tokens: _c, ...settings } = v.model_settings || {};
    if (temperature.value !== "") settings.temperature = Number(temperature.value);
    if (maxTokens.value !== "") settings.max_tokens = Number(maxTokens.value);
    if (contextTokens.value !== "") settings.context_tokens = Number(contextTokens.value);
    let tools;
    try {
      tools = toolControls.filter(({ box }) => box.input.checked).map(({ tool, settings: form }) => ({ type: tool.type, config: form ? form.read() : {} }));
    } catch (error) {
      replace(status, errorBox({ error: "InvalidSettings", detail: error.message }, "Check the tools' settings"));
      return;
    }
    const body = {
      name: name.value, description: description.value, instructions: instructions.value, model_settings: settings, tools,
      mcp_integration_ids: integrationBoxes.filter(({ box }) => box.input.checked).map(({ integration }) => integration.id),
      sub_agent_ids: subAgentBoxes.filter(({ box }) => box.input.checked).map(({ agent }) => agent.id),
      max_steps: Number(maxSteps.value), parallel_tool_calls: parallel.input.checked, publish_as_mcp: publish.input.checked,
    };
    if (model.value.trim()) body.model = model.value.trim();
    if (slug.value.trim()) body.slug = slug.value.trim();
    await busy(save, async () => {
      try {
        const saved = existing ? await patch(`/v1/agents/${existing.id}`, body) : await post("/v1/agents", body);
        toast(existing ? "Agent saved." : "Agent created.");
        go(`#/agents/${saved.id}`);
      } catch (error) {
        replace(status, errorBox(error, "The agent was not saved"));
      }
    });
  });
  replace(main, h("p", { class: "crumbs" }, link("Agents", "#/agents")), pageHeader(title), form);
  name.focus();
}

// The server reads the file, as `threadline agents import` does: first a dry run to show what the agent would
// be and what is left out, then the import itself once confirmed.
function importPage({ main, go }) {
  const file = h("input", { type: "file", name: "chatmd", accept: ".chatmd,.md,text/plain" });
  const preview = h("div", { "aria-live": "polite" });
  let chosen = null;
  const body = (dryRun) => ({ file_name: chosen.name, content: chosen.text, dry_run: dryRun });
  const create = button("Create agent", async () => {
    if (!chosen) return;
    await busy(create, async () => {
      try {
        const imported = await post("/v1/agents/import", body(false));
        toast(`Agent “${imported.agent.name}” created.`);
        go(`#/agents/${imported.agent.id}`);
      } catch (error) {
        replace(preview, errorBox(error, "The agent was not created"), chosen.preview);
      }
    });
  }, { class: "btn primary", disabled: true });
  file.addEventListener("change", async () => {
    const picked = file.files[0];
    chosen = null;
    create.disabled = true;
    if (!picked) return replace(preview);
    try {
      const candidate = { name: picked.name, text: await picked.text() };
      chosen = candidate;
      const read = await post("/v1/agents/import", body(true));
      if (chosen !== candidate) return;
      candidate.preview = previewOf(read);
      replace(preview, candidate.preview);
      create.disabled = false;
    } catch (error) {
      chosen = null;
      replace(preview, errorBox(error, "This file cannot be imported"));
    }
  });
  replace(main, h("p", { class: "crumbs" }, link("Agents", "#/agents")), pageHeader("Import a ChatMD file"),
    h("div", { class: "card" },
      h("p", {}, "The agent takes its name from the file name, its instructions from the <system> and <developer> messages, and the native tools the file declares. Nothing is created until you confirm."),
      field("ChatMD file", file), preview, h("div", { class: "actions" }, create)));
}

function previewOf({ file: agent, warnings }) {
  return h("div", {},
    h("h2", {}, `Agent “${agent.name}”`),
    h("dl", { class: "kv" },
      h("dt", {}, "Slug"), h("dd", { class: "mono" }, agent.slug),
      h("dt", {}, "Model"), h("dd", {}, agent.model || "the server's default"),
      h("dt", {}, "Tools"), h("dd", {}, agent.tools.map((t) => t.type).join(", ") || "none")),
    h("div", { class: "answer" }, agent.instructions || "No instructions."),
    warnings.length ? h("div", { class: "notice" }, h("strong", {}, "Left out:"), h("ul", {}, warnings.map((w) => h("li", {}, w)))) : null);
}
