// Small DOM helpers. Text always goes in as text nodes: nothing the API returns is parsed as HTML.

export function h(tag, attrs = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === false || value === null || value === undefined) continue;
    if (name.startsWith("on") && typeof value === "function") {
      element.addEventListener(name.slice(2).toLowerCase(), value);
    } else if (name === "class") {
      element.className = value;
    } else if (name === "value") {
      element.value = value;
    } else if (name === "checked") {
      element.checked = Boolean(value);
    } else {
      element.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function replace(element, ...children) {
  element.replaceChildren();
  append(element, children);
  return element;
}

let ids = 0;
export function uid(prefix = "f") {
  ids += 1;
  return `${prefix}-${ids}`;
}

// A labelled control: the label names the control, the hint says what to put in it.
export function field(label, control, { hint, required } = {}) {
  const id = control.id || uid();
  control.id = id;
  const hintNode = hint ? h("p", { class: "hint", id: `${id}-hint` }, hint) : null;
  if (hintNode) control.setAttribute("aria-describedby", hintNode.id);
  if (required) control.required = true;
  return h("div", { class: "field" }, h("label", { for: id }, label, required ? h("span", { class: "req", "aria-hidden": "true" }, " *") : null), control, hintNode);
}

export function checkbox(label, { checked = false, name, hint } = {}) {
  const input = h("input", { type: "checkbox", id: uid(), name, checked });
  return {
    input,
    node: h("div", { class: "field check" }, input, h("label", { for: input.id }, label), hint ? h("p", { class: "hint" }, hint) : null),
  };
}

export function select(options, value, attrs = {}) {
  return h(
    "select",
    attrs,
    options.map(([optionValue, label]) => h("option", { value: optionValue, selected: optionValue === value }, label)),
  );
}

export function button(label, onClick, attrs = {}) {
  return h("button", { type: "button", class: attrs.class || "btn", onclick: onClick, ...attrs }, label);
}

export function link(label, href, attrs = {}) {
  return h("a", { href, ...attrs }, label);
}

export function badge(text, kind = "") {
  return h("span", { class: `badge ${kind}`.trim() }, text);
}

const STATUS_KINDS = {
  connected: "ok", completed: "ok", admin: "accent",
  failed: "bad", cancelled: "muted", unknown: "muted", revoked: "muted",
  in_progress: "live", queued: "live", requires_action: "warn",
};
export function statusBadge(status) {
  return badge(String(status).replace(/_/g, " "), STATUS_KINDS[status] || "");
}

// An error in words: what went wrong, with the API's error name beside it.
export function errorBox(error, title = "That did not work") {
  const name = error && error.error ? error.error : "Error";
  const detail = error && (error.detail || error.message) ? error.detail || error.message : String(error);
  return h("div", { class: "error", role: "alert" },
    h("strong", {}, title), " ", badge(name, "bad"), h("p", {}, detail));
}

export function empty(title, next) {
  return h("div", { class: "empty" }, h("p", { class: "empty-title" }, title), next ? h("p", {}, next) : null);
}

export function when(iso) {
  if (!iso) return "never";
  const date = new Date(iso);
  return date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

export function ago(iso) {
  if (!iso) return "never";
  const seconds = Math.round((Date.now() - new Date(iso).getTime()) / 1000);
  if (seconds < 45) return "just now";
  if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.round(seconds / 3600)} h ago`;
  return when(iso);
}

export function json(value) {
  return h("pre", { class: "json", tabindex: "0" }, JSON.stringify(value, null, 2));
}

export function pageHeader(title, ...actions) {
  return h("div", { class: "page-head" }, h("h1", { tabindex: "-1" }, title), h("div", { class: "actions" }, actions));
}

// Busy state for a button while its request is under way.
export async function busy(control, work) {
  control.disabled = true;
  control.setAttribute("aria-busy", "true");
  try {
    return await work();
  } finally {
    control.disabled = false;
    control.removeAttribute("aria-busy");
  }
}

export function toast(message, kind = "ok") {
  let region = document.getElementById("toasts");
  if (!region) {
    region = h("div", { id: "toasts", class: "toasts", role: "status", "aria-live": "polite" });
    document.body.append(region);
  }
  const note = h("div", { class: `toast ${kind}` }, message);
  region.append(note);
  setTimeout(() => note.remove(), 4000);
}

export function dialogConfirm(message, confirmLabel = "Confirm") {
  return new Promise((resolve) => {
    const dialog = h("dialog", { class: "dialog", "aria-label": "Confirm" },
      h("p", {}, message),
      h("div", { class: "actions" },
        button("Cancel", () => { dialog.close(); resolve(false); }),
        button(confirmLabel, () => { dialog.close(); resolve(true); }, { class: "btn danger" })));
    dialog.addEventListener("close", () => { dialog.remove(); resolve(false); });
    document.body.append(dialog);
    dialog.showModal();
  });
}
