// The console's shell: sign-in, what the caller may do, navigation and the unsaved-changes guard.
import { call, saveKey, savedKey } from "./api.js";
import { errorText, fail, h, field, say } from "./dom.js";
import { showProjects } from "./projects.js";
import { showEditor } from "./editor.js";
import { showChat } from "./chat.js";
import { showDeploy } from "./deploy.js";
import { showImprove } from "./improve.js";
import { showAnalytics } from "./analytics.js";
import { showKeys } from "./keys.js";
import { showTestSets } from "./testsets.js";
import { showDuplicates } from "./duplicates.js";

const RANK = { query: 0, author: 1, admin: 2 };
export const session = { open: false, name: "", grants: [] };

// Whether the signed-in caller has `role` (on `project`, when named): what the server will allow.
export function can(role, project) {
  return session.grants.some((g) => RANK[g.role] >= RANK[role] &&
    (!project || g.projects === null || g.projects.map((p) => p.toLowerCase()).includes(project.toLowerCase())));
}

// Each route() is one navigation, numbered: a page still loading when a newer navigation begins (a slow QnAs
// tab, then Test clicked) is dropped, with its unsaved-changes guard, instead of being drawn over the newer one.
let navigations = 0;
export function navigation() { return navigations; }
function stale(token) { return token !== undefined && token !== navigations; }

let dirty = null; // a function answering whether the open form has unsaved changes
export function guard(fn, token) { if (!stale(token)) dirty = fn; }
let current = location.hash;

function main() { return document.getElementById("main"); }

// Draw a page; `token` (navigation() when its loading began) drops it if a newer navigation began since.
export function render(view, token) {
  if (stale(token)) return false;
  const node = main();
  node.replaceChildren(view);
  const heading = node.querySelector("h1");
  if (heading) { heading.tabIndex = -1; heading.focus({ preventScroll: true }); }
  return true;
}

function nav() {
  const links = [["#/projects", "Projects"]];
  if (can("admin")) links.push(["#/keys", "Keys"]);
  const who = session.open ? "Open server (loopback, no keys)" : `Signed in: ${session.name || "key"} · ${session.grants.map((g) => g.role + (g.projects ? ` on ${g.projects.join(", ")}` : "")).join("; ")}`;
  const out = session.open ? null : h("button", { type: "button", class: "link", onclick: () => signOut() }, "Sign out");
  document.getElementById("nav").replaceChildren(
    h("ul", {}, links.map(([href, text]) => h("li", {}, h("a", { href }, text)))),
    h("p", { class: "who" }, who, " ", out));
}

export function signOut(message = "") {  // ``message``: said once the page that follows is drawn
  saveKey(""); session.grants = []; location.hash = "#/projects";
  start().then(() => { if (message) say(message); });
}

// Ask the server who this tab is again (after its key changed) and redraw the navigation to match.
export async function signedIn() {
  const ok = await whoami();
  if (ok) nav();
  return ok;
}

async function whoami() {
  const { data } = await call("GET", "/openqna/whoami");
  Object.assign(session, data);
  return data.signedIn;
}

function signIn(message) {
  const key = h("input", { type: "password", autocomplete: "off", required: true });
  const form = h("form", { class: "card signin", onsubmit: async (event) => {
    event.preventDefault();
    saveKey(key.value.trim());
    if (await whoami()) { say(""); start(); } else { saveKey(""); say("That key was refused by the server.", "error"); key.focus(); }
  } }, h("h1", {}, "Sign in to openqna"),
  h("p", {}, message || "This server needs an API key. It is kept in this tab only (session storage)."),
  field("API key", key, ["A key from ", h("code", {}, "openqna keys create"), " or from an admin."]),
  h("button", { type: "submit" }, "Sign in"));
  document.getElementById("nav").replaceChildren();
  render(form);
}

export async function route() {
  const token = ++navigations;
  const hash = location.hash || "#/projects";
  const parts = hash.slice(2).split("/").map(decodeURIComponent);
  try {
    if (parts[0] === "keys") return await showKeys();
    if (parts[0] === "p" && parts[1]) {
      const tab = parts[2] || "edit";
      if (tab === "chat") return await showChat(parts[1]);
      if (tab === "deploy") return await showDeploy(parts[1]);
      if (tab === "improve") return await showImprove(parts[1]);
      if (tab === "analytics") return await showAnalytics(parts[1]);
      if (tab === "tests") return await showTestSets(parts[1]);
      if (tab === "duplicates") return await showDuplicates(parts[1]);
      return await showEditor(parts[1]);
    }
    return await showProjects();
  } catch (error) {
    if (stale(token)) return;
    if (error && error.status === 401) {  // this tab's key was revoked, or the server now needs one: sign in again
      saveKey(""); session.grants = [];
      return signIn("This tab's key no longer works on this server (it was revoked, or keys were created since): sign in with a key.");
    }
    // not the page before under this URL: what failed, and a way on
    render(h("section", {}, h("h1", {}, error && error.status === 404 ? "Not found" : "This page could not be loaded"),
      h("p", { class: "card refused" }, errorText(error)), h("p", {}, h("a", { href: "#/projects" }, "← Projects"))));
    fail(error);
  }
}

// Each history entry the console shows is numbered (history.state.at), so that a navigation the unsaved-changes
// guard cancels can be undone without rewriting the history: Back or Forward by going as many steps the other way,
// a new entry (a link) by going back one. The hashchange the undoing causes is not a navigation.
let at = 0;
let undoing = false;
function placed() { return history.state && typeof history.state.at === "number" ? history.state.at : null; }

window.addEventListener("hashchange", () => {
  if (undoing) {
    undoing = false;
    if (location.hash === current) return;
  }
  if (dirty && dirty() && !confirm("You have unsaved changes. Leave without saving?")) {
    const there = placed();
    undoing = true;
    history.go(there === null ? -1 : at - there);
    return;
  }
  dirty = null;
  current = location.hash;
  if (placed() === null) history.replaceState({ at: at + 1 }, "");
  at = placed();
  say("");
  route();
});
window.addEventListener("beforeunload", (event) => { if (dirty && dirty()) event.preventDefault(); });

export async function start() {
  try {
    if (!(await whoami())) return signIn(savedKey() ? "The saved key is no longer accepted; sign in again." : "");
    nav();
    current = location.hash;
    if (placed() === null) history.replaceState({ at }, "");
    at = placed();
    await route();
  } catch (error) { fail(error); }
}

start();
