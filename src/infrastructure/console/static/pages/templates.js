// Prompt templates: list, edit (admins), a live render preview of arguments, and what each publishes
// over MCP (a tool and a prompt).
import { all, del, get, patch, post } from "../api.js";
import { ago, badge, busy, button, checkbox, dialogConfirm, empty, errorBox, field, h, link, pageHeader, replace, select, toast } from "../ui.js";

const ROLES = [["system", "system"], ["developer", "developer"], ["user", "user"], ["assistant", "assistant"]];

export async function render(ctx) {
  const [name] = ctx.params;
  if (name === "new") return editPage(ctx, null);
  if (name) return editPage(ctx, await get(`/v1/prompt-templates/${encodeURIComponent(name)}`, { signal: ctx.signal }));
  return listPage(ctx);
}

async function listPage({ main, isAdmin, signal }) {
  const templates = (await get("/v1/prompt-templates", { signal })).data;
  const create = isAdmin ? link("New template", "#/templates/new", { class: "btn primary" }) : null;
  if (!templates.length) {
    replace(main, pageHeader("Prompt templates", create),
      empty("No prompt templates yet.", isAdmin ? "Create one with “New template”: it becomes an MCP tool and prompt of your organization." : "An admin can create them; they are listed here."));
    return;
  }
  replace(main, pageHeader("Prompt templates", create),
    h("ul", { class: "list" }, templates.map((template) => h("li", { class: "item", "data-template": template.name },
      h("div", { class: "item-main" },
        h("div", { class: "item-title" }, link(template.name, `#/templates/${encodeURIComponent(template.name)}`), template.source === "file" ? badge("prompts directory", "muted") : null),
        h("p", { class: "meta" }, template.description || "No description."),
        h("p", { class: "meta" }, "MCP tool ", h("code", {}, template.tool_name), " · MCP prompt ", h("code", {}, template.name),
          ` · ${template.arguments.length} arguments`, template.updated_at ? ` · updated ${ago(template.updated_at)}` : ""))))));
}

function argumentRow(argument, rows, container) {
  const name = h("input", { type: "text", name: "argument-name", value: argument.name || "", pattern: "[A-Za-z_][A-Za-z0-9_]*" });
  const description = h("input", { type: "text", name: "argument-description", value: argument.description || "" });
  const type = select([["string", "text"], ["array", "list"]], argument.type || "string", { name: "argument-type" });
  const fallback = h("input", { type: "text", name: "argument-default", value: Array.isArray(argument.default) ? argument.default.join(", ") : argument.default ?? "" });
  const suggestions = h("input", { type: "text", name: "argument-autocomplete", value: Array.isArray(argument.autocomplete) ? argument.autocomplete.join(", ") : "" });
  const remember = checkbox("Also suggest values used before", { checked: argument.autocomplete === true });
  const required = checkbox("Required", { checked: Boolean(argument.required) });
  const row = {
    read() {
      const out = { name: name.value.trim(), description: description.value, required: required.input.checked, type: type.value };
      const list = (text) => text.split(",").map((s) => s.trim()).filter(Boolean);
      if (fallback.value !== "") out.default = type.value === "array" ? list(fallback.value) : fallback.value;
      out.autocomplete = remember.input.checked ? true : list(suggestions.value);
      return out;
    },
  };
  row.node = h("div", { class: "card argument" },
    h("div", { class: "grid-2" }, field("Argument name", name, { required: true }), field("Argument description", description),
      field("Type", type), field("Default", fallback, { hint: "Lists are comma-separated." }),
      field("Suggested values", suggestions, { hint: "Comma-separated; offered to MCP clients as completions." })),
    required.node, remember.node,
    button("Remove argument", () => { rows.splice(rows.indexOf(row), 1); row.node.remove(); }, { class: "btn danger small" }));
  rows.push(row);
  container.append(row.node);
}

function messageRow(message, rows, container) {
  const role = select(ROLES, message.role || "user", { name: "message-role" });
  const content = h("textarea", { name: "message-content", rows: "4", class: "prose" });
  content.value = message.content || "";
  const row = { read: () => ({ role: role.value, content: content.value }) };
  row.node = h("div", { class: "card message-row" }, field("Role", role), field("Content", content, { hint: "{argument} or {argument|default:value} are filled in." }),
    button("Remove message", () => { rows.splice(rows.indexOf(row), 1); row.node.remove(); }, { class: "btn danger small" }));
  rows.push(row);
  container.append(row.node);
}

async function editPage({ main, isAdmin, signal, go }, existing) {
  const agents = await all("/v1/agents", { signal });
  const readOnly = !isAdmin || (existing && existing.source === "file");
  const title = existing ? existing.name : "New template";
  const v = existing || { name: "", description: "", arguments: [], messages: [{ role: "user", content: "" }], agent_id: "" };
  const name = h("input", { type: "text", name: "template-name", value: v.name, pattern: "[A-Za-z0-9][A-Za-z0-9_-]*" });
  const description = h("input", { type: "text", name: "template-description", value: v.description });
  const agent = select([["", "Choose the agent that answers…"], ...agents.map((a) => [a.id, a.name])], v.agent_id || "", { name: "template-agent" });
  const argumentRows = [];
  const argumentList = h("div", {});
  v.arguments.forEach((a) => argumentRow(a, argumentRows, argumentList));
  const messageRows = [];
  const messageList = h("div", {});
  v.messages.forEach((m) => messageRow(m, messageRows, messageList));

  const status = h("div", { "aria-live": "polite" });
  const save = h("button", { type: "submit", class: "btn primary" }, existing ? "Save template" : "Create template");
  const form = h("form", { "aria-label": existing ? `Edit ${existing.name}` : "New template" },
    h("fieldset", { class: "card", disabled: readOnly },
      h("legend", {}, "Template"),
      h("div", { class: "grid-2" }, field("Template name", name, { required: true, hint: "Letters, digits, - and _." }), field("Template description", description)),
      field("Answering agent", agent, { required: true }),
      h("h3", {}, "Arguments"), argumentList,
      readOnly ? null : button("Add argument", () => argumentRow({}, argumentRows, argumentList), { class: "btn small" }),
      h("h3", {}, "Messages"), messageList,
      readOnly ? null : button("Add message", () => messageRow({ role: "user" }, messageRows, messageList), { class: "btn small" })),
    status,
    readOnly ? null : h("div", { class: "actions" }, save,
      existing ? button("Delete", async () => {
        if (!(await dialogConfirm(`Delete the template “${existing.name}”?`, "Delete"))) return;
        try {
          await del(`/v1/prompt-templates/${encodeURIComponent(existing.name)}`);
          toast("Template deleted.");
          go("#/templates");
        } catch (error) {
          toast(error.detail || error.message, "bad");
        }
      }, { class: "btn danger" }) : null));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = {
      name: name.value.trim(), description: description.value,
      arguments: argumentRows.map((r) => r.read()), messages: messageRows.map((r) => r.read()),
    };
    if (agent.value) body.agent_id = agent.value;
    await busy(save, async () => {
      try {
        const saved = existing ? await patch(`/v1/prompt-templates/${encodeURIComponent(existing.name)}`, body) : await post("/v1/prompt-templates", body);
        toast(existing ? "Template saved." : "Template created.");
        if (existing && saved.name === existing.name) await render({ main, isAdmin, signal, go, params: [saved.name] });
        else go(`#/templates/${encodeURIComponent(saved.name)}`);
      } catch (error) {
        replace(status, errorBox(error, "The template was not saved"));
      }
    });
  });

  const notes = [];
  if (readOnly && existing?.source === "file") notes.push(h("p", { class: "notice" }, "This template comes from the prompts directory: change its file to change it."));
  else if (readOnly) notes.push(h("p", { class: "notice" }, "You are signed in with a member key: templates are read-only for you."));
  replace(main, h("p", { class: "crumbs" }, link("Prompt templates", "#/templates")), pageHeader(title), ...notes,
    existing ? h("p", { class: "meta" }, "Published over MCP as the tool ", h("code", {}, existing.tool_name), " and the prompt ", h("code", {}, existing.name), ".") : null,
    h("div", { class: "split" }, form, preview(form, () => ({ arguments: argumentRows.map((r) => r.read()), messages: messageRows.map((r) => r.read()) }), signal)));
}

// The template as it stands in the form, saved or not, rendered by the API as it is edited and as the
// arguments are typed: the server renders drafts as it renders saved templates.
function preview(form, readDraft, signal) {
  const inputs = new Map(); // argument name -> its value's input, kept while the argument exists
  const fields = h("div", {});
  const output = h("div", { "aria-live": "polite", "data-preview": "" });
  let shown = null;
  let timer = null;
  let latest = 0;
  const valueText = (value) => (Array.isArray(value) ? value.join(", ") : value ?? "");

  function showInputs(draft) {
    const named = draft.arguments.filter((argument) => argument.name);
    const key = JSON.stringify(named.map((a) => [a.name, a.description, a.required, a.default]));
    if (key === shown) return;
    shown = key;
    for (const name of [...inputs.keys()]) if (!named.some((a) => a.name === name)) inputs.delete(name);
    replace(fields, named.length ? named.map((argument) => {
      let input = inputs.get(argument.name);
      if (!input) {
        input = h("input", { type: "text", name: `preview-${argument.name}` });
        input.addEventListener("input", schedule);
        inputs.set(argument.name, input);
      }
      input.placeholder = valueText(argument.default);
      return field(argument.name, input, { hint: argument.description, required: argument.required });
    }) : h("p", { class: "hint" }, "This template has no arguments."));
  }

  async function update() {
    const draft = readDraft();
    showInputs(draft);
    const values = {};
    for (const argument of draft.arguments) {
      const input = inputs.get(argument.name);
      if (!input || input.value === "") continue;
      values[argument.name] = argument.type === "array" ? input.value.split(",").map((s) => s.trim()).filter(Boolean) : input.value;
    }
    const ticket = ++latest;
    try {
      const rendered = await post("/v1/prompt-templates/preview", { template: draft, arguments: values }, { signal });
      if (ticket !== latest) return;
      replace(output, h("div", { class: "messages" }, rendered.messages.map((m) => h("div", { class: `message ${m.role}` }, h("div", { class: "role" }, m.role), h("div", { class: "text" }, m.content)))));
    } catch (error) {
      if (ticket === latest && error.name !== "AbortError") replace(output, errorBox(error, "Not rendered yet"));
    }
  }

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(update, 250);
  }
  // Typing, choosing, and adding or removing an argument or a message all change the draft.
  form.addEventListener("input", schedule);
  form.addEventListener("change", schedule);
  form.addEventListener("click", (event) => { if (event.target.closest("button[type=button]")) schedule(); });
  update();
  return h("section", { class: "card", "aria-label": "Preview" }, h("h2", {}, "Live preview"),
    h("p", { class: "hint" }, "Rendered from the form as it is now, saved or not."), fields, output);
}
