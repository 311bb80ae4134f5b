// Threads: list, create, one thread with its messages, its runs, and a form to start a run.
import { all, del, get, post } from "../api.js";
import { ago, badge, busy, button, dialogConfirm, empty, errorBox, field, h, json, link, pageHeader, replace, select, statusBadge, toast, when } from "../ui.js";

export async function render(ctx) {
  const [id] = ctx.params;
  if (id) return threadPage(ctx, id);
  return listPage(ctx);
}

async function listPage({ main, signal, go, query }) {
  const agents = await all("/v1/agents", { signal });
  const agentFilter = query.get("agent_id") || "";
  const threads = await all(`/v1/threads${agentFilter ? `?agent_id=${encodeURIComponent(agentFilter)}` : ""}`, { signal, max: 200 });
  const agentName = (id) => agents.find((a) => a.id === id)?.name || "no agent";
  const agent = select([["", agents.length ? "Choose an agent…" : "No agents yet"], ...agents.map((a) => [a.id, a.name])], "", { name: "agent" });
  const title = h("input", { type: "text", name: "title", maxlength: "200" });
  const status = h("div", { "aria-live": "polite" });
  const submit = h("button", { type: "submit", class: "btn primary" }, "Create thread");
  const form = h("form", { class: "card form-inline", "aria-label": "Create a thread" },
    field("Agent", agent, { hint: "The agent that answers in it." }), field("Title", title), h("div", { class: "field submit" }, submit));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    await busy(submit, async () => {
      try {
        const body = { title: title.value };
        if (agent.value) body.agent_id = agent.value;
        const thread = await post("/v1/threads", body);
        go(`#/threads/${thread.id}`);
      } catch (error) {
        replace(status, errorBox(error, "The thread was not created"));
      }
    });
  });
  const filter = select([["", "All agents"], ...agents.map((a) => [a.id, a.name])], agentFilter, { name: "agent-filter", onchange: (e) => go(e.target.value ? `#/threads?agent_id=${e.target.value}` : "#/threads") });
  const list = threads.length
    ? h("ul", { class: "list" }, threads.map((thread) => h("li", { class: "item", "data-thread": thread.id },
      h("div", { class: "item-main" },
        h("div", { class: "item-title" }, link(thread.title || "Untitled thread", `#/threads/${thread.id}`), badge(agentName(thread.agent_id))),
        h("p", { class: "meta" }, `${thread.message_count} messages · updated ${ago(thread.updated_at)}`)))))
    : empty("No threads yet.", agents.length ? "Create one above, then start a run in it." : "Create an agent first, then a thread to talk to it.");
  replace(main, pageHeader("Threads"), form, status, h("div", { class: "page-head" }, h("h2", {}, "Threads"), field("Show threads of", filter)), list);
}

function messageView(message) {
  return h("div", { class: `message ${message.role}`, "data-position": message.position },
    h("div", { class: "role" }, `${message.role} · ${when(message.created_at)}`, message.run_id ? [" · ", link("run", `#/runs/${message.run_id}`)] : null),
    message.content.map((part) => {
      if (part.type === "text") return h("div", { class: "text" }, part.text);
      if (part.type === "tool_use") return h("div", {}, h("span", { class: "meta" }, "calls "), h("code", {}, part.name), json(part.params));
      if (part.type === "tool_result") return h("div", {}, h("span", { class: "meta" }, `result of ${part.tool_name}${part.is_error ? " (error)" : ""}`), h("div", { class: "text" }, part.result));
      if (part.type === "image") return h("p", { class: "meta" }, `image ${part.mime_type || part.url || ""}`);
      return json(part);
    }));
}

async function threadPage({ main, signal, go }, id) {
  const [thread, agents] = await Promise.all([get(`/v1/threads/${id}`, { signal }), all("/v1/agents", { signal })]);
  const [messages, runs] = await Promise.all([all(`/v1/threads/${id}/messages`, { signal, max: 1000 }), get(`/v1/threads/${id}/runs?limit=20`, { signal })]);
  const agentName = agents.find((a) => a.id === thread.agent_id)?.name;

  const input = h("textarea", { name: "input", rows: "3", class: "prose", placeholder: "What should the agent do?" });
  const agent = select([["", agentName ? `The thread's agent (${agentName})` : "Choose an agent…"], ...agents.map((a) => [a.id, a.name])], "", { name: "run-agent" });
  const clientTools = h("textarea", { name: "client_tools", rows: "3", placeholder: '[{"name": "lookup_order", "description": "...", "parameters": {"type": "object", "properties": {}}}]' });
  const status = h("div", { "aria-live": "polite" });
  const start = h("button", { type: "submit", class: "btn primary" }, "Start run");
  const form = h("form", { class: "card", "aria-label": "Start a run" },
    field("Message", input, { hint: "Appended to the thread as a user message, then the agent answers." }),
    field("Agent", agent),
    h("details", {}, h("summary", {}, "Client tools (optional)"),
      field("Client tools as JSON", clientTools, { hint: "Tools this page answers: the run waits in requires_action for their results." })),
    status, start);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = {};
    if (input.value.trim()) body.input = input.value;
    if (agent.value) body.agent_id = agent.value;
    if (clientTools.value.trim()) {
      try {
        body.tools = JSON.parse(clientTools.value);
      } catch {
        replace(status, errorBox({ error: "InvalidJson", detail: "The client tools are not valid JSON." }, "Check the client tools"));
        return;
      }
    }
    await busy(start, async () => {
      try {
        const run = await post(`/v1/threads/${id}/runs`, body);
        go(`#/runs/${run.id}`);
      } catch (error) {
        replace(status, errorBox(error, "The run did not start"));
      }
    });
  });
  const remove = button("Delete thread", async () => {
    if (!(await dialogConfirm("Delete this thread and its messages?", "Delete"))) return;
    try {
      await del(`/v1/threads/${id}`);
      toast("Thread deleted.");
      go("#/threads");
    } catch (error) {
      toast(error.detail || error.message, "bad");
    }
  }, { class: "btn danger" });
  replace(main, h("p", { class: "crumbs" }, link("Threads", "#/threads")),
    pageHeader(thread.title || "Untitled thread", remove),
    h("p", { class: "meta" }, `Agent: ${agentName || "none"} · ${thread.message_count} messages · created ${when(thread.created_at)}`),
    h("div", { class: "split" },
      h("section", { "aria-label": "Messages" }, h("h2", {}, "Messages"),
        messages.length ? h("div", { class: "messages" }, messages.map(messageView)) : empty("No messages yet.", "Start a run with a message.")),
      h("section", { "aria-label": "Runs" }, h("h2", {}, "Start a run"), form,
        h("h2", {}, "Runs"),
        runs.data.length ? h("ul", { class: "list" }, runs.data.map((run) => h("li", { class: "item" },
          h("div", { class: "item-main" }, h("div", { class: "item-title" }, link(`Run ${run.id.slice(0, 8)}`, `#/runs/${run.id}`), statusBadge(run.status)),
            h("p", { class: "meta" }, `${when(run.created_at)} · ${run.usage.total_tokens} tokens`)))))
          : empty("No runs in this thread yet."))));
}
