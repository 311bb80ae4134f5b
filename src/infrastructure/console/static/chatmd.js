// A ChatMD file read in the browser, as `threadline agents import` reads it: the name from the file name,
// instructions from the <system> and <developer> messages, native tools from the declared built-ins,
// the model from <config model="…"/>. What has no counterpart is listed as a warning.

const TOOL_TYPES = {
  webpage_to_markdown: "website_content", get_url_content: "website_content", web_search: "internet_search",
  markdown_search: "source_query", query_vector_db: "source_query", odoc_search: "source_query",
  code_interpreter: "code_execution", website_content: "website_content", internet_search: "internet_search",
  source_query: "source_query", code_execution: "code_execution", send_email: "send_email",
  create_calendar_event: "create_calendar_event",
};
const ROLES = ["system", "developer", "user", "assistant"];

function attributes(text) {
  const found = {};
  for (const match of text.matchAll(/([^\s=/>"']+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+)))?/g)) {
    found[match[1]] = match[2] ?? match[3] ?? match[4] ?? "";
  }
  return found;
}

function slugify(name) {
  return name.normalize("NFKD").replace(/[\u0300-\u036f]/g, "").toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "") || "agent";
}

export function parseChatMd(text, fileName) {
  const source = text.replace(/<!--[\s\S]*?-->/g, "");
  const messages = [];
  for (const role of ROLES) {
    for (const match of source.matchAll(new RegExp(`<${role}(\\s[^>]*)?>([\\s\\S]*?)</${role}>`, "g"))) {
      messages.push({ role, content: match[2].trim(), at: match.index });
    }
  }
  messages.sort((a, b) => a.at - b.at);
  const tools = [...source.matchAll(/<tool(\s[^>]*?)?\/?>/g)].map((m) => attributes(m[1] || ""));
  const config = [...source.matchAll(/<config(\s[^>]*?)?\/?>/g)].map((m) => attributes(m[1] || ""))[0] || {};
  const meta = [...source.matchAll(/<meta(\s[^>]*?)?\/?>/g)].map((m) => attributes(m[1] || ""))[0] || {};
  if (!messages.length) throw new Error("No <system>, <developer>, <user> or <assistant> message found: is this a ChatMD file?");
  const instructions = messages.filter((m) => m.role === "system" || m.role === "developer").map((m) => m.content).join("\n\n");
  const warnings = [];
  const types = [];
  for (const tool of tools) {
    if (tool.mcp_server !== undefined) warnings.push(`tool ${tool.name || tool.mcp_server} is an MCP server and was left out; connect it as an integration of the agent`);
    else if (tool.command !== undefined) warnings.push(`tool ${tool.name || ""} is a shell wrapper and was left out; an operator can define the command`);
    else if (tool.agent !== undefined) warnings.push(`tool ${tool.name || ""} runs ${tool.agent} and was left out; import that file as an agent and make it a sub-agent`);
    else if (TOOL_TYPES[tool.name]) {
      if (!types.includes(TOOL_TYPES[tool.name])) types.push(TOOL_TYPES[tool.name]);
    } else warnings.push(`tool ${tool.name || "(unnamed)"} has no Threadline counterpart and was left out`);
  }
  if (!instructions) warnings.push("no <system> or <developer> message: the agent has no instructions");
  const others = messages.filter((m) => m.role === "user" || m.role === "assistant").length;
  if (others) warnings.push(`${others} <user>/<assistant> message(s) were left out: an agent keeps only instructions`);
  const stem = fileName.replace(/^.*[\\/]/, "").replace(/\.[^.]*$/, "") || "agent";
  const sentence = (instructions.match(/(.+?[.!?])(?=\s|$)/) || [instructions])[0] || "";
  const agent = {
    name: stem,
    slug: slugify(stem),
    description: (meta.description || sentence).slice(0, 500),
    instructions,
    tools: types.map((type) => ({ type })),
  };
  if (config.model) agent.model = config.model;
  return { agent, warnings };
}
