// The console's shell: sign-in, navigation, and one page at a time (routes are the URL's #fragment).
import { ApiError, get, session } from "./api.js";
import { button, errorBox, field, h, replace } from "./ui.js";

const PAGES = [
  { path: "integrations", label: "Integrations", load: () => import("./pages/integrations.js") },
  { path: "agents", label: "Agents", load: () => import("./pages/agents.js") },
  { path: "templates", label: "Prompt templates", load: () => import("./pages/templates.js") },
  { path: "threads", label: "Threads", load: () => import("./pages/threads.js") },
  { path: "runs", label: "Runs", load: () => import("./pages/runs.js") },
  { path: "keys", label: "API keys", load: () => import("./pages/keys.js") },
];

const root = document.getElementById("app");
let current = null; // the AbortController of the page on screen: navigating away stops its requests and streams
let signOutNotice = "";

function signInView() {
  const input = h("input", { type: "password", name: "api-key", autocomplete: "off", spellcheck: "false", placeholder: "tl_…" });
  const status = h("div", { "aria-live": "polite" });
  if (signOutNotice) replace(status, h("p", { class: "notice", role: "status" }, signOutNotice));
  const submit = h("button", { type: "submit", class: "btn primary" }, "Sign in");
  const form = h("form", { class: "signin-form", "aria-labelledby": "signin-title" },
    h("h1", { id: "signin-title" }, "Sign in to Threadline"),
    h("p", { class: "lede" }, "Use an API key of your organization. It stays in this browser tab only and is forgotten when you close it."),
    field("API key", input, { hint: "An admin key can change integrations, templates and keys; a member key sees them read-only.", required: true }),
    status,
    submit);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = input.value.trim();
    if (!key) return;
    submit.disabled = true;
    try {
      const me = await get("/v1/me", { key });
      signOutNotice = "";
      session.save(key, me);
      if (!location.hash.startsWith("#/")) location.hash = "#/integrations";
      render();
    } catch (error) {
      const words = error instanceof ApiError && error.status === 401 ? { error: error.error, detail: "This key was not accepted. Check that you copied all of it and that it has not been revoked." } : error;
      replace(status, errorBox(words, "Could not sign in"));
      input.focus();
    } finally {
      submit.disabled = false;
    }
  });
  replace(root, h("main", { class: "signin", id: "main" }, h("div", { class: "brand big" }, h("img", { src: "/console/assets/icon.svg", alt: "" }), "Threadline"), form));
  input.focus();
}

function shell(active) {
  const me = session.me;
  const nav = h("nav", { class: "nav", "aria-label": "Sections" },
    PAGES.map((page) => h("a", { href: `#/${page.path}`, "aria-current": page.path === active ? "page" : false }, page.label)));
  const header = h("header", { class: "top" },
    h("a", { class: "brand", href: "#/integrations" }, h("img", { src: "/console/assets/icon.svg", alt: "" }), "Threadline"),
    nav,
    h("div", { class: "who" },
      h("span", { class: "org", title: me.organization.slug }, me.organization.name),
      h("span", { class: `badge ${me.role === "admin" ? "accent" : ""}`, "data-role": me.role }, me.role),
      button("Sign out", () => session.clear("You signed out."), { class: "btn ghost small" })));
  const main = h("main", { id: "main", tabindex: "-1" });
  replace(root, header, main);
  return main;
}

function route() {
  const [path, search] = location.hash.replace(/^#\/?/, "").split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const page = PAGES.find((p) => p.path === parts[0]) || PAGES[0];
  return { page, params: page.path === parts[0] ? parts.slice(1) : [], query: new URLSearchParams(search || "") };
}

async function render() {
  if (current) current.abort();
  current = new AbortController();
  if (!session.key) {
    signInView();
    return;
  }
  const { page, params, query } = route();
  const main = shell(page.path);
  document.title = `${page.label} · Threadline console`;
  const ctx = {
    main,
    params,
    query,
    signal: current.signal,
    me: session.me,
    isAdmin: session.isAdmin,
    go: (hash) => { location.hash = hash; },
  };
  try {
    const module = await page.load();
    await module.render(ctx);
    const heading = main.querySelector("h1");
    if (heading && document.activeElement === document.body) heading.focus({ preventScroll: true });
  } catch (error) {
    if (error.name === "AbortError") return;
    if (!session.key) return;
    replace(main, errorBox(error, "This page could not be shown"));
  }
}

window.addEventListener("hashchange", () => {
  if (location.hash.startsWith("#/") || location.hash === "") render();
});
window.addEventListener("console:signed-out", (event) => {
  signOutNotice = event.detail || "";
  render();
});

// Another tab of this session signing out does not reach here (sessionStorage is per tab), on purpose.
if (session.key) {
  // The stored role may be stale: ask again who the key belongs to.
  get("/v1/me").then((me) => { session.save(session.key, me); render(); }).catch(() => render());
} else {
  render();
}
