// API keys (admin): create (the secret is shown once), list, revoke.
import { call, get } from "./api.js";
import { render, route } from "./app.js";
import { fail, field, h, say, table } from "./dom.js";

let created = null; // the key just made: its secret is shown once, on top of the page drawn next

function secretCard(key) {
  const code = h("code", { class: "key", tabindex: "0" }, key.secret);
  const copy = h("button", { type: "button", onclick: async () => {
    try {
      await navigator.clipboard.writeText(key.secret);
      say(`Copied the secret of key ${key.name}.`);
    } catch {
      const range = document.createRange();
      range.selectNodeContents(code);
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      code.focus();
      say("The browser did not let the console copy: the secret is selected, press Ctrl+C (⌘C) to copy it.");
    }
  } }, "Copy");
  return h("section", { class: "card secret", "aria-label": "New key secret" }, h("h2", {}, `Key ${key.name} created`),
    h("p", {}, "Copy it now: it is shown once and stored only as a hash."), h("div", { class: "row secret-row" }, code, copy));
}

export async function showKeys() {
  const { value } = await get("/openqna/keys");
  const name = h("input", { required: true });
  const role = h("select", {}, ["query", "author", "admin"].map((r) => h("option", { value: r }, r)));
  const projects = h("input", { placeholder: "all projects" });
  const secret = created ? secretCard(created) : null;
  created = null;
  const rows = value.map((k) => [k.id, k.name, k.role, k.projects ? k.projects.join(", ") : "all", k.created,
    h("button", { type: "button", class: "danger", "aria-label": `Revoke key ${k.name}`, onclick: async () => {
      if (!confirm(`Revoke key ${k.name}? Clients using it are refused from the next request.`)) return;
      try { await call("DELETE", `/openqna/keys/${encodeURIComponent(k.id)}`); say(`Revoked ${k.name}.`); route(); } catch (e) { fail(e); }
    } }, "Revoke")]);
  const form = h("form", { class: "card", onsubmit: async (event) => {
    event.preventDefault();
    const list = projects.value.split(",").map((s) => s.trim()).filter(Boolean);
    try {
      const { data } = await call("POST", "/openqna/keys", { name: name.value, role: role.value, projects: list.length ? list : undefined });
      created = data;
      await route();
    } catch (e) { fail(e); }
  } }, h("h2", {}, "New key"), field("Name", name), field("Role", role), field("Projects (comma-separated)", projects), h("button", { type: "submit" }, "Create key"));
  render(h("section", {}, h("h1", {}, "API keys"), secret, table(["Id", "Name", "Role", "Projects", "Created", ""], rows), form));
}
