// API keys: create (the secret shown once), list, revoke. Admins only; the API refuses members too.
import { all, post, session } from "../api.js";
import { badge, busy, button, dialogConfirm, empty, errorBox, field, h, pageHeader, replace, select, statusBadge, toast, when } from "../ui.js";

export async function render(ctx) {
  const { main, isAdmin, signal } = ctx;
  if (!isAdmin) {
    replace(main, pageHeader("API keys"),
      empty("Only admins manage API keys.", "You are signed in with a member key. Ask an admin of your organization for a key or to revoke one."));
    return;
  }
  const created = h("div", { "aria-live": "polite" });
  const listArea = h("div", {}, h("p", { class: "loading" }, "Loading keys…"));
  replace(main, pageHeader("API keys"), createForm(created, () => load()), created, h("h2", {}, "Keys of your organization"), listArea);

  async function load() {
    try {
      const keys = await all("/v1/api-keys", { signal });
      replace(listArea, keyList(keys, load));
    } catch (error) {
      if (error.name !== "AbortError") replace(listArea, errorBox(error, "The keys could not be listed"));
    }
  }
  await load();
}

function createForm(createdArea, reload) {
  const name = h("input", { type: "text", name: "key-name", maxlength: "200", autocomplete: "off" });
  const role = select([["member", "member: uses agents, threads and runs"], ["admin", "admin: also manages keys, integrations and templates"]], "member", { name: "key-role" });
  const submit = h("button", { type: "submit", class: "btn primary" }, "Create key");
  const form = h("form", { class: "card form-inline", "aria-label": "Create an API key" },
    field("Name", name, { hint: "Who or what uses it, e.g. “web app”.", required: true }),
    field("Role", role),
    h("div", { class: "field submit" }, submit));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    await busy(submit, async () => {
      try {
        const key = await post("/v1/api-keys", { name: name.value, role: role.value });
        replace(createdArea, secretCard(key));
        name.value = "";
        await reload();
      } catch (error) {
        replace(createdArea, errorBox(error, "The key was not created"));
      }
    });
  });
  return form;
}

function secretCard(key) {
  const secret = h("input", { type: "text", readonly: true, value: key.key, class: "mono secret", "aria-label": "The new secret API key" });
  const copy = button("Copy", async () => {
    try {
      await navigator.clipboard.writeText(key.key);
      copy.textContent = "Copied";
    } catch {
      secret.select();
      copy.textContent = "Press Ctrl+C to copy";
    }
  }, { class: "btn" });
  return h("div", { class: "card secret-card", role: "status" },
    h("h2", {}, `Key “${key.name}” created`),
    h("p", {}, "This is the only time the secret is shown. Store it now: Threadline keeps only a hash of it."),
    h("div", { class: "row" }, secret, copy));
}

function keyList(keys, reload) {
  if (!keys.length) return empty("No keys yet.", "Create one above.");
  const mine = session.me.api_key_id;
  return h("ul", { class: "list" }, keys.map((key) => {
    const revoke = key.revoked_at ? null : button("Revoke", async () => {
      const self = key.id === mine;
      const question = self
        ? `Revoke “${key.name}”? It is the key you are signed in with: the console signs you out.`
        : `Revoke “${key.name}”? Anything using it stops working at once.`;
      if (!(await dialogConfirm(question, "Revoke"))) return;
      try {
        await post(`/v1/api-keys/${key.id}/revoke`);
        if (self) {
          session.clear("You revoked the key you were signed in with. Sign in with another key.");
          return;
        }
        toast(`Key “${key.name}” revoked.`);
        await reload();
      } catch (error) {
        toast(`${error.detail || error.message}`, "bad");
      }
    }, { class: "btn danger small", "aria-label": `Revoke key ${key.name}` });
    return h("li", { class: "item", "data-key": key.name },
      h("div", { class: "item-main" },
        h("div", { class: "item-title" }, key.name, " ", badge(key.role, key.role === "admin" ? "accent" : ""),
          key.revoked_at ? statusBadge("revoked") : null, key.id === mine ? badge("this session", "live") : null),
        h("div", { class: "meta" }, h("span", { class: "mono" }, key.prefix), ` · created ${when(key.created_at)} · last used ${when(key.last_used_at)}`,
          key.revoked_at ? ` · revoked ${when(key.revoked_at)}` : "")),
      h("div", { class: "item-actions" }, revoke));
  }));
}
