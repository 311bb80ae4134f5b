// A form from a JSON Schema (an MCP tool's input schema, a client tool's parameters): a control per
// property; what has no simple control is written as JSON. `read()` gives the arguments or throws words.
import { checkbox, field, h, select, uid } from "./ui.js";

export function schemaForm(schema, { prefix = "Argument" } = {}) {
  const properties = (schema && typeof schema === "object" && schema.properties) || {};
  const required = new Set((schema && schema.required) || []);
  const readers = [];
  const nodes = [];
  for (const [name, property] of Object.entries(properties)) {
    const spec = property && typeof property === "object" ? property : {};
    const type = Array.isArray(spec.type) ? spec.type.find((t) => t !== "null") : spec.type;
    const label = spec.title || name;
    const hint = [spec.description, type && type !== "string" ? `(${type})` : null].filter(Boolean).join(" ");
    const isRequired = required.has(name);
    if (Array.isArray(spec.enum)) {
      const options = [["", isRequired ? "Choose…" : "(not set)"], ...spec.enum.map((v) => [JSON.stringify(v), String(v)])];
      const control = select(options, spec.default !== undefined ? JSON.stringify(spec.default) : "", { name, id: uid(prefix) });
      nodes.push(field(label, control, { hint, required: isRequired }));
      readers.push(() => (control.value === "" ? undefined : JSON.parse(control.value)));
      continue;
    }
    if (type === "boolean") {
      const box = checkbox(label, { checked: spec.default === true, name, hint });
      nodes.push(box.node);
      readers.push(() => box.input.checked);
      continue;
    }
    if (type === "string" || type === "number" || type === "integer") {
      const numeric = type !== "string";
      const long = !numeric && (spec.maxLength === undefined || spec.maxLength > 200) && /text|body|content|query|prompt/i.test(name);
      const control = long
        ? h("textarea", { name, class: "prose", rows: "3" })
        : h("input", { type: numeric ? "number" : "text", name, step: type === "integer" ? "1" : "any", autocomplete: "off" });
      if (spec.default !== undefined) control.value = String(spec.default);
      nodes.push(field(label, control, { hint, required: isRequired }));
      readers.push(() => {
        if (control.value === "") {
          if (isRequired) throw new Error(`${label} is required.`);
          return undefined;
        }
        if (!numeric) return control.value;
        const number = Number(control.value);
        if (Number.isNaN(number)) throw new Error(`${label} must be a number.`);
        return number;
      });
      continue;
    }
    const control = h("textarea", { name, rows: "3", placeholder: type === "array" ? "[ ]" : "{ }" });
    if (spec.default !== undefined) control.value = JSON.stringify(spec.default, null, 2);
    nodes.push(field(label, control, { hint: `${hint} Written as JSON.`.trim(), required: isRequired }));
    readers.push(() => {
      if (control.value.trim() === "") {
        if (isRequired) throw new Error(`${label} is required.`);
        return undefined;
      }
      try {
        return JSON.parse(control.value);
      } catch {
        throw new Error(`${label} is not valid JSON.`);
      }
    });
  }
  const names = Object.keys(properties);
  const node = h("div", { class: "schema-form" }, nodes.length ? nodes : h("p", { class: "hint" }, "No arguments."));
  // Required is checked by read(), in words: the browser's own check would block the surrounding form.
  for (const control of node.querySelectorAll("[required]")) {
    control.required = false;
    control.setAttribute("aria-required", "true");
  }
  return {
    node,
    read() {
      const values = {};
      names.forEach((name, index) => {
        const value = readers[index]();
        if (value !== undefined) values[name] = value;
      });
      return values;
    },
  };
}
