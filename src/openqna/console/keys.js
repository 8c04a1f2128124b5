// API keys (admin): create (the secret is shown once), list, revoke.
import { call, get, saveKey } from "./api.js";
import { navigation, render, route, session, signedIn, signOut } from "./app.js";
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

// The first key made on a server without keys: from then on the server asks every request for a key, this
// tab's included, so the tab signs in with the new key (else the next request, and the owner, is refused).
async function signInWith(key) {
  saveKey(key.secret);
  await signedIn();
}

export async function showKeys() {
  const token = navigation(); // drawn only if no newer navigation began meanwhile
  const made = created; // forgotten once drawn: a page dropped for a newer navigation keeps it for the next
  const secret = made ? secretCard(made) : null;
  const drawn = (view) => { if (!render(view, token)) return false; if (created === made) created = null; return true; };
  let value;
  try {
    ({ value } = await get("/openqna/keys"));
  } catch (error) {
    if (!secret) throw error;
    // the secret is shown whatever happens next: it exists nowhere else
    if (drawn(h("section", {}, h("h1", {}, "API keys"), secret))) fail(error);
    return;
  }
  const name = h("input", { required: true });
  const role = h("select", {}, ["query", "author", "admin"].map((r) => h("option", { value: r }, r)));
  const projects = h("input", { placeholder: "all projects" });
  const rows = value.map((k) => [k.id, k.name, k.role, k.projects ? k.projects.join(", ") : "all", k.created,
    h("button", { type: "button", class: "danger", "aria-label": `Revoke key ${k.name}`, onclick: async () => {
      const own = k.id === session.keyId;  // revoking it strands this tab: say so, then sign the tab out
      // the last admin key for every project: nobody can manage keys here afterwards, only `openqna keys` can
      const lastAdmin = k.role === "admin" && !k.projects && !value.some((o) => o.id !== k.id && o.role === "admin" && !o.projects);
      if (!confirm(`Revoke key ${k.name}? Clients using it are refused from the next request.`
        + (own ? " It is the key this tab is signed in with: the tab is signed out, and needs another key." : "")
        + (lastAdmin ? " It is the last admin key for every project: afterwards no key can manage keys, here or over "
          + "HTTP, until `openqna keys create --role admin` is run on the server." : ""))) return;
      try {
        await call("DELETE", `/openqna/keys/${encodeURIComponent(k.id)}`);
        if (own) { signOut(`Revoked ${k.name}, the key this tab was signed in with.`); return; }
        say(`Revoked ${k.name}.`); route();
      } catch (e) { fail(e); }
    } }, "Revoke")]);
  const form = h("form", { class: "card", onsubmit: async (event) => {
    event.preventDefault();
    say(""); // an earlier key's "copied" is not about this one
    const list = projects.value.split(",").map((s) => s.trim()).filter(Boolean);
    const first = session.open;
    if (first && (role.value !== "admin" || list.length) && !confirm("This is the server's first key: from now on it "
      + "requires a key, and this tab signs in with this one, which cannot manage keys. Make an admin key for every "
      + "project first to keep managing keys here. Create it anyway?")) return;
    try {
      const { data } = await call("POST", "/openqna/keys", { name: name.value, role: role.value, projects: list.length ? list : undefined });
      created = data;
      if (first) {
        await signInWith(data);
        say(`The server now requires a key: this tab is signed in with ${data.name || "the new key"}.`);
      }
      await showKeys();
    } catch (e) { fail(e); }
  } }, h("h2", {}, "New key"), field("Name", name), field("Role", role), field("Projects (comma-separated)", projects), h("button", { type: "submit" }, "Create key"));
  drawn(h("section", {}, h("h1", {}, "API keys"), secret, table(["Id", "Name", "Role", "Projects", "Created", ""], rows), form));
}
