// Runs: filtered by agent, status and time; one run as a live timeline (its events over SSE read with
// fetch, since EventSource cannot send the Authorization header), cancel, answering client tools, and answering
// the questions its MCP tools' servers ask the user.
import { all, followEvents, get, post } from "../api.js";
import { schemaForm } from "../schema_form.js";
import { badge, busy, button, checkbox, empty, errorBox, field, h, json, link, pageHeader, replace, select, statusBadge, toast, when } from "../ui.js";

const STATUSES = ["queued", "in_progress", "requires_action", "completed", "failed", "cancelled"];
const TERMINAL = new Set(["completed", "failed", "cancelled"]);

export async function render(ctx) {
  const [id] = ctx.params;
  if (id) return runPage(ctx, id);
  return listPage(ctx);
}

async function listPage({ main, signal, go, query }) {
  const agents = await all("/v1/agents", { signal });
  const filters = { agent_id: query.get("agent_id") || "", status: query.get("status") || "", thread_id: query.get("thread_id") || "", from: query.get("from") || "", to: query.get("to") || "" };
  // Every filter is the API's: the time window is sent as instants (the fields show the browser's local time).
  const params = new URLSearchParams();
  for (const name of ["agent_id", "status", "thread_id"]) if (filters[name]) params.set(name, filters[name]);
  if (filters.from) params.set("created_after", new Date(filters.from).toISOString());
  if (filters.to) params.set("created_before", new Date(filters.to).toISOString());
  params.set("limit", "50");
  const agentName = (id) => agents.find((a) => a.id === id)?.name || "deleted agent";

  const agent = select([["", "All agents"], ...agents.map((a) => [a.id, a.name])], filters.agent_id, { name: "agent_id" });
  const status = select([["", "Any status"], ...STATUSES.map((s) => [s, s.replace("_", " ")])], filters.status, { name: "status" });
  const from = h("input", { type: "datetime-local", name: "from", value: filters.from });
  const to = h("input", { type: "datetime-local", name: "to", value: filters.to });
  // novalidate: a time typed to the second (or pasted with milliseconds) is as good as one to the minute.
  const form = h("form", { class: "card filters", "aria-label": "Filter runs", novalidate: "" },
    field("Agent", agent), field("Status", status), field("Created after", from), field("Created before", to),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "btn" }, "Apply filters"), link("Clear", "#/runs", { class: "btn ghost" })));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const next = new URLSearchParams();
    for (const [name, control] of [["agent_id", agent], ["status", status], ["from", from], ["to", to]]) if (control.value) next.set(name, control.value);
    if (filters.thread_id) next.set("thread_id", filters.thread_id);
    go(`#/runs${next.size ? `?${next}` : ""}`);
  });
  const row = (run) => h("li", { class: "item", "data-run": run.id },
    h("div", { class: "item-main" },
      h("div", { class: "item-title" }, link(`Run ${run.id.slice(0, 8)}`, `#/runs/${run.id}`), statusBadge(run.status), badge(agentName(run.agent_id))),
      h("p", { class: "meta" }, `${when(run.created_at)} · ${run.steps.length} steps · ${run.usage.total_tokens} tokens`, run.error ? ` · ${run.error.code}` : "", " · ", link("thread", `#/threads/${run.thread_id}`))));
  let page;
  try {
    page = await get(`/v1/runs?${params}`, { signal });
  } catch (error) {
    if (error.name === "AbortError" || !error.status || error.status >= 500) throw error;
    replace(main, pageHeader("Runs"), form, errorBox(error, "These filters were not accepted"));
    return;
  }
  if (!page.data.length) {
    replace(main, pageHeader("Runs"), form, empty("No runs match.", "Runs start from a thread: open one under Threads and send a message."));
    return;
  }
  const list = h("ul", { class: "list" }, page.data.map(row));
  const more = button("Show more runs", () => busy(more, async () => {
    params.set("cursor", page.next_cursor);
    try {
      page = await get(`/v1/runs?${params}`, { signal });
      list.append(...page.data.map(row));
      more.hidden = !page.next_cursor;
    } catch (error) {
      if (error.name !== "AbortError") toast(error.detail || error.message, "bad");
    }
  }), { class: "btn" });
  more.hidden = !page.next_cursor;
  replace(main, pageHeader("Runs"), form, list, h("div", { class: "actions" }, more));
}

// ---- one run, live ----

async function runPage({ main, signal }, id) {
  let run = await get(`/v1/runs/${id}`, { signal });
  const statusArea = h("span", { "data-run-status": "" });
  const cancelButton = button("Cancel run", () => busy(cancelButton, async () => {
    try {
      run = await post(`/v1/runs/${id}/cancel`);
      showRun();
    } catch (error) {
      toast(error.detail || error.message, "bad");
    }
  }), { class: "btn danger" });
  const facts = h("div", { class: "card" });
  const actionArea = h("div", { "aria-live": "polite" });
  const timeline = h("ol", { class: "timeline", "aria-label": "Timeline", "aria-live": "polite" });
  const problems = h("div", { "aria-live": "polite" });
  let lastSeq = 0;
  const answers = new Map(); // message_id -> the element the model's text streams into
  const calls = new Map(); // tool_call_id -> { item, startedAt }
  let sawText = false;
  let shownCalls = "";

  function showRun() {
    replace(statusArea, statusBadge(run.status));
    cancelButton.hidden = TERMINAL.has(run.status);
    replace(facts, h("dl", { class: "kv" },
      h("dt", {}, "Thread"), h("dd", {}, link(run.thread_id, `#/threads/${run.thread_id}`)),
      h("dt", {}, "Agent"), h("dd", {}, link(run.agent_id, `#/agents/${run.agent_id}`)),
      h("dt", {}, "Created"), h("dd", {}, when(run.created_at)),
      h("dt", {}, "Ended"), h("dd", {}, run.ended_at ? when(run.ended_at) : "not yet"),
      h("dt", {}, "Steps"), h("dd", {}, String(run.steps.length)),
      h("dt", {}, "Usage"), h("dd", { "data-usage": "" }, `${run.usage.input_tokens} in · ${run.usage.output_tokens} out · ${run.usage.total_tokens} tokens`),
      run.trace_id ? [h("dt", {}, "Trace"), h("dd", {}, run.trace_url
        ? h("a", { href: run.trace_url, target: "_blank", rel: "noopener noreferrer", "data-trace-link": "" }, "Open its trace in Langfuse")
        : h("span", { class: "mono" }, run.trace_id))] : null,
      run.parent_run_id ? [h("dt", {}, "Parent run"), h("dd", {}, link(run.parent_run_id, `#/runs/${run.parent_run_id}`))] : null),
      run.warnings.length ? h("div", { class: "notice" }, h("strong", {}, "Warnings"), h("ul", {}, run.warnings.map((w) => h("li", {}, w)))) : null,
      run.error ? errorBox({ error: run.error.code, detail: run.error.message }, "The run failed") : null,
      h("details", {}, h("summary", {}, "Steps"), run.steps.length ? json(run.steps) : h("p", { class: "hint" }, "No step yet.")));
    // The forms stay as they are while the same calls and questions wait: what the person typed is kept.
    const required = run.status === "requires_action" && run.required_action ? run.required_action : null;
    const waiting = required ? required.tool_calls : [];
    const questions = required ? required.elicitations || [] : [];
    const key = [...waiting.map((call) => call.tool_call_id), ...questions.map((q) => q.id)].join(" ");
    if (key !== shownCalls) {
      shownCalls = key;
      replace(actionArea, waiting.length ? toolResultsForm(waiting) : null, questions.length ? questionsForm(questions) : null);
    }
  }

  function item(kind, ...children) {
    const li = h("li", { class: kind }, ...children);
    timeline.append(li);
    return li;
  }

  function onEvent(frame) {
    // Two streams may overlap (one that went on as the client tools were answered, and the one that follows
    // the answer): each event is shown once.
    if (frame.seq <= lastSeq) return;
    lastSeq = frame.seq;
    const data = frame.data || {};
    const at = h("span", { class: "meta" }, ` ${new Date(frame.created_at).toLocaleTimeString()}`);
    switch (frame.type) {
      case "run.created":
        item("", h("strong", {}, "Run created"), at);
        break;
      case "run.in_progress":
        run.status = "in_progress";
        item("live", h("strong", {}, "Running"), at);
        break;
      case "message.delta": {
        let target = answers.get(data.message_id);
        if (!target) {
          target = h("div", { class: "answer", "data-answer": "", "aria-live": "off" });
          answers.set(data.message_id, target);
          item("live", h("strong", {}, "Model answer"), at, target);
        }
        target.append(data.text);
        sawText = true;
        break;
      }
      case "tool_call.started": {
        const result = h("div", { class: "meta" }, "running…");
        const li = item("live", h("strong", {}, "Tool call "), h("code", {}, data.name), " ", badge(data.type), at,
          h("details", {}, h("summary", {}, "Arguments"), json(data.arguments)), result);
        li.dataset.toolCall = data.name;
        calls.set(data.tool_call_id, { li, result, startedAt: new Date(frame.created_at) });
        break;
      }
      case "tool_call.completed": {
        const call = calls.get(data.tool_call_id);
        const seconds = call ? ((new Date(frame.created_at) - call.startedAt) / 1000).toFixed(2) : null;
        const body = h("div", {}, h("span", { class: "meta" }, `${data.is_error ? "failed" : "returned"}${seconds ? ` after ${seconds} s` : ""}`),
          data.is_error ? h("div", { class: "error" }, data.result) : h("pre", { class: "json" }, data.result));
        if (call) {
          call.li.className = data.is_error ? "bad" : "ok";
          replace(call.result, body);
        } else {
          item(data.is_error ? "bad" : "ok", h("strong", {}, "Tool result "), h("code", {}, data.name), at, body);
        }
        break;
      }
      case "tool_call.progress": {
        const call = calls.get(data.tool_call_id);
        const amount = data.total ? `${data.progress} of ${data.total}` : String(data.progress);
        if (call) replace(call.result, h("span", { "data-progress": "" }, `running…${data.message ? ` ${data.message}` : ""} (${amount})`));
        break;
      }
      case "tool_call.log": {
        const call = calls.get(data.tool_call_id);
        const text = typeof data.data === "string" ? data.data : JSON.stringify(data.data);
        const line = h("div", { class: "meta", "data-log": "" }, `${data.level}${data.logger ? ` ${data.logger}` : ""}: ${text}`);
        if (call) call.li.append(line);
        else item("", h("strong", {}, "Tool log"), at, line);
        break;
      }
      case "run.requires_action": {
        run.status = "requires_action";
        for (const pending of data.required_action || []) {
          const call = calls.get(pending.tool_call_id);
          if (call) replace(call.result, "waiting for the client's result");
        }
        const questions = data.elicitations || [];
        for (const question of questions) {
          const call = calls.get(question.tool_call_id);
          if (call) replace(call.result, "waiting for the user's answer");
        }
        const what = (data.required_action || []).length ? "Waiting for client tool results" : "Waiting for the user's answers";
        item("warn", h("strong", {}, what), at);
        break;
      }
      case "run.completed":
        run.status = "completed";
        if (!sawText && data.answer) item("ok", h("strong", {}, "Answer"), at, h("div", { class: "answer", "data-answer": "" }, data.answer));
        item("ok", h("strong", {}, "Completed"), at);
        break;
      case "run.failed":
        run.status = "failed";
        item("bad", h("strong", {}, "Failed"), at, data.error ? h("p", {}, `${data.error.code}: ${data.error.message}`) : null);
        break;
      case "run.cancelled":
        run.status = "cancelled";
        item("", h("strong", {}, "Cancelled"), at);
        break;
      default:
        item("", h("strong", {}, frame.type), at, json(data));
    }
    replace(statusArea, statusBadge(run.status));
    cancelButton.hidden = TERMINAL.has(run.status);
  }

  async function follow() {
    let failures = 0;
    while (!signal.aborted) {
      try {
        await followEvents(`/v1/runs/${id}/events`, onEvent, { signal, after: lastSeq });
        failures = 0;
      } catch (error) {
        if (error.name === "AbortError" || signal.aborted) return;
        failures += 1;
        if (failures > 3) {
          replace(problems, errorBox(error, "The live view stopped"));
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, 500 * failures));
        continue;
      }
      try {
        run = await get(`/v1/runs/${id}`, { signal });
      } catch (error) {
        if (error.name !== "AbortError") replace(problems, errorBox(error, "The run could not be read again"));
        return;
      }
      showRun();
      // The stream ends when the run ends or waits for this page; anything else is a dropped connection.
      if (TERMINAL.has(run.status) || run.status === "requires_action") return;
    }
  }

  function toolResultsForm(pending) {
    const rows = pending.map((call) => {
      const result = h("textarea", { name: `result-${call.tool_call_id}`, rows: "3", class: "prose" });
      const failed = checkbox("Report it as an error");
      return { call, result, failed, node: h("div", { class: "card", "data-pending": call.name },
        h("h3", {}, h("code", {}, call.name), " ", badge(call.type)), json(call.arguments),
        field(`Result of ${call.name}`, result, { hint: "The text the model reads as the tool's result." }), failed.node) };
    });
    const status = h("div", { "aria-live": "polite" });
    const send = h("button", { type: "submit", class: "btn primary" }, "Send results");
    const form = h("form", { class: "card warn-card", "aria-label": "Answer the client tools" },
      h("h2", {}, "The run waits for your client tools"),
      h("p", {}, "Carry out each call, write what it returned, then send the results: the run goes on."), rows.map((r) => r.node), status, send);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      await busy(send, async () => {
        try {
          run = await post(`/v1/runs/${id}/tool-results`, { tool_results: rows.map(({ call, result, failed }) => ({ tool_use_id: call.tool_call_id, result: result.value, is_error: failed.input.checked })) });
          showRun();
          follow();
        } catch (error) {
          replace(status, errorBox(error, "The results were not accepted"));
        }
      });
    });
    return form;
  }

  function questionsForm(questions) {
    const rows = questions.map((question) => {
      const values = schemaForm(question.requested_schema, { prefix: "Answer" });
      const choice = select([["accept", "Answer with these values"], ["decline", "Decline to answer"], ["cancel", "Dismiss the question"]], "accept", { name: `action-${question.id}` });
      return { question, values, choice, node: h("div", { class: "card", "data-question": question.tool_name },
        h("h3", {}, h("code", {}, question.tool_name), " asks"), h("p", { "data-question-message": "" }, question.message),
        values.node, field("Your answer", choice)) };
    });
    const status = h("div", { "aria-live": "polite" });
    const send = h("button", { type: "submit", class: "btn primary" }, "Send answers");
    const form = h("form", { class: "card warn-card", "aria-label": "Answer the questions" },
      h("h2", {}, "The run waits for your answers"),
      h("p", {}, "A server the agent's tools use asks the user; the tool call goes on with the answer."), rows.map((r) => r.node), status, send);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      await busy(send, async () => {
        try {
          const answers = rows.map(({ question, values, choice }) => choice.value === "accept"
            ? { elicitation_id: question.id, action: "accept", content: values.read() }
            : { elicitation_id: question.id, action: choice.value });
          run = await post(`/v1/runs/${id}/answers`, { answers });
          showRun();
          follow();
        } catch (error) {
          replace(status, errorBox(error, "The answers were not accepted"));
        }
      });
    });
    return form;
  }

  replace(main, h("p", { class: "crumbs" }, link("Runs", "#/runs"), " · ", link("Thread", `#/threads/${run.thread_id}`)),
    pageHeader(`Run ${id.slice(0, 8)}`, statusArea, cancelButton),
    h("div", { class: "split" },
      h("section", { "aria-label": "Timeline" }, h("h2", {}, "Timeline"), actionArea, timeline, problems),
      h("section", { "aria-label": "Details" }, h("h2", {}, "Details"), facts)));
  showRun();
  follow();
}
