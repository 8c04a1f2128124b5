// Projects: list, create, delete, import (an uploaded file or a URL source, with the job's progress), export.
import { AUTHORING, all, call, get, operation, project } from "./api.js";
import { can, navigation, render, route, session } from "./app.js";
import { fail, field, h, plural, say, table } from "./dom.js";

const FILES = ".tsv,.txt,.csv,.xlsx,.json,.zip,.pdf,.docx,.html,.htm,.md,.markdown";

export function tabs(name, active) {
  const items = [["edit", "QnAs"], ["chat", "Test"], ["deploy", "Deploy"], ["improve", "Improve"], ["analytics", "Analytics"],
    ["tests", "Test sets"], ["duplicates", "Duplicates"]];
  return h("nav", { class: "tabs", "aria-label": `Project ${name}` },
    h("a", { href: "#/projects" }, "← Projects"),
    items.map(([tab, text]) => h("a", { href: `#/p/${encodeURIComponent(name)}/${tab}`,
      "aria-current": tab === active ? "page" : null }, text)));
}

// The page a tab shows instead of calling what the server would refuse, saying why.
export function refused(name, active, what) {
  if (!can("query", name)) { // a key limited to other projects: it reaches nothing here, not even the test chat
    const reach = [...new Set(session.grants.flatMap((g) => g.projects || []))];
    return h("section", {}, h("nav", { class: "tabs" }, h("a", { href: "#/projects" }, "← Projects")), h("h1", {}, `${name}: ${what}`),
      h("p", { class: "card refused" }, `This key has no access to project ${name}`
        + (reach.length ? `: it is limited to ${reach.join(", ")}.` : ".") + ` Sign in with a key for ${name} to open it.`));
  }
  return h("section", {}, tabs(name, active), h("h1", {}, `${name}: ${what}`),
    h("p", { class: "card refused" }, `This key has the query role on ${name}: it may ask the test chat, but ${what} `
      + "needs the author role (the authoring API answers a query key with 403)."));
}

function when(iso) { return iso ? iso.replace("T", " ").replace(/\.\d+/, "").replace("Z", " UTC") : "never"; }

// What a job's progress shows for Azure's job states ("notStarted" read as code).
const STATES = { notStarted: "waiting to start", running: "running", succeeded: "succeeded", failed: "failed",
  cancelled: "cancelled", cancelling: "cancelling" };

// A job's state in words, and how far a running import has got when the server says (openqna's own job status:
// texts embedded of the total, a QnA's questions and answer each one): "embedding 1,200 QnAs: 40%".
function progressText(status, job) {
  const p = status === "running" && job ? job.progress : null;
  if (!p || !p.total) return STATES[status] || status;
  const n = (x, one, many) => `${x.toLocaleString("en-US")} ${x === 1 ? one : many}`;
  // a train job reports the vector spaces it has trained (one, or two for a multilingual KB)
  if (p.stage === "training") return `training ${n(p.qnas, "record", "records")}: ${p.done} of ${n(p.total, "vector space", "vector spaces")} done`;
  const what = [p.qnas ? n(p.qnas, "QnA", "QnAs") : "", p.passages ? n(p.passages, "passage", "passages") : ""];
  return `embedding ${what.filter(Boolean).join(" and ")}: ${Math.floor((100 * p.done) / p.total)}%`;
}

export async function runJob(label, progress, send) {
  say(""); // an earlier action's error is over: this job's outcome is what the status line says next
  progress.hidden = false;
  progress.textContent = `${label}: submitted`;
  // the control that started it (and its form's buttons) wait for it: a double click added a QnA twice, and a
  // double click on Save reported its own first save as a conflict
  const active = document.activeElement;
  const scope = active && active.closest ? active.closest("form") || (active.tagName === "BUTTON" ? active : null) : null;
  const controls = !scope ? [] : scope.tagName === "FORM" ? [...scope.querySelectorAll("button, input[type=submit]")] : [scope];
  const held = controls.filter((c) => !c.disabled);
  held.forEach((c) => { c.disabled = true; });
  try {
    await send((status, job) => { progress.textContent = `${label}: ${progressText(status, job)}`; });
    progress.textContent = `${label}: succeeded`;
    return true;
  } catch (error) {
    progress.textContent = `${label}: failed`;
    fail(error);
    return false;
  } finally {
    held.forEach((c) => { c.disabled = false; });
  }
}

// What the last import did, shown in the import card the page draws next (the page is redrawn after one).
let lastImport = null;

async function counts(target) {
  const { value } = await get("/openqna/projects");
  const p = value.find((x) => x.projectName.toLowerCase() === target.toLowerCase());
  return p ? { qnas: p.qnas, passages: p.passages } : { qnas: 0, passages: 0 };
}

// The name a project is stored under when `target` names one (names are case-insensitive: `KB1` is `kb1`), else null
// (none, or none this key may see). Read from the list, which answers 200 either way: a 404 would be a console error.
async function existing(target) {
  const { value } = await get("/openqna/projects");
  const p = value.find((x) => x.projectName.toLowerCase() === target.toLowerCase());
  return p ? p.projectName : null;
}


// `done`: the upload job's result, when it has one: a file's synonym groups, which the counts of records do not show
// (a synonyms file read "no new QnAs or passages" though its groups were stored)
function resultText(what, target, before, after, done = {}) {
  const dq = after.qnas - before.qnas, dp = after.passages - before.passages;
  const synonyms = done && done.synonymGroups !== undefined;
  const dg = synonyms ? done.synonymGroupsAdded : 0;
  const change = [dq ? `${dq > 0 ? "+" : ""}${plural(dq, "QnA")}` : null, dp ? `${dp > 0 ? "+" : ""}${plural(dp, "passage")}` : null,
    dg ? `+${plural(dg, "synonym group")}` : null].filter(Boolean);
  const none = synonyms ? "no new QnAs, passages or synonym groups" : "no new QnAs or passages";
  const now = [plural(after.qnas, "QnA"), plural(after.passages, "passage"), synonyms ? plural(done.synonymGroups, "synonym group") : null]
    .filter(Boolean);
  return `${what} ${target}: ${change.length ? change.join(" and ").replace(/ and (?=.* and )/, ", ") : none}. The project now has `
    + `${now.slice(0, -1).join(", ")} and ${now[now.length - 1]}; deploy to answer with them in production.`;
}

// Import a file or add a URL source: into any project (the Projects page) or into `fixedName` (its QnAs page).
function importForm(progress, fixedName) {
  const name = h("input", { name: "project", required: true, pattern: "[A-Za-z0-9][A-Za-z0-9_\\-]*", value: fixedName || "" });
  const file = h("input", { type: "file", accept: FILES });
  const url = h("input", { type: "url", placeholder: "https://example.com/faq.html" });
  const shown = lastImport;
  lastImport = null;
  const result = h("p", { class: shown ? `import-result ${shown.kind}` : "import-result", role: "status", hidden: !shown }, shown ? shown.text : "");
  const finish = async (target, what, before, done) => {
    const after = await counts(target).catch(() => before);
    lastImport = { kind: "ok", text: resultText(what, target, before, after, done) };
    await route();
    const card = document.querySelector(".import-result:not([hidden])");
    if (card) card.scrollIntoView({ block: "nearest" });
  };
  const form = h("form", { class: "card import", "aria-label": fixedName ? "Add a source" : "Import", onsubmit: async (event) => {
    event.preventDefault();
    const target = name.value.trim();
    result.hidden = true;
    const before = await counts(target).catch(() => ({ qnas: 0, passages: 0 }));
    if (file.files.length) {
      const f = file.files[0];
      let job = null;
      const ok = await runJob(`Importing ${f.name}`, progress, async (onStatus) => {
        job = await operation("POST", `/openqna/projects/${encodeURIComponent(target)}/files?name=${encodeURIComponent(f.name)}`,
                              f, { raw: true, onStatus });
      });
      if (ok) { say(`Imported ${f.name} into ${target}.`); await finish(target, `Imported ${f.name} into`, before, job && job.result); }
    } else if (url.value) {
      let made = false;
      try { // a URL source needs its project: make it if new, and leave an existing one's language alone
        if (!(await existing(target))) { await call("PATCH", project(target), { language: "en" }); made = true; }
      } catch (error) { return fail(error); }
      const ok = await runJob(`Adding ${url.value}`, progress, (onStatus) =>
        operation("PATCH", `${project(target)}/sources`,
                  [{ op: "add", value: { displayName: url.value, sourceUri: url.value, sourceKind: "url" } }], { onStatus }));
      if (ok) { say(`Added the source ${url.value} to ${target}.`); await finish(target, `Added ${url.value} to`, before); }
      // a refused source leaves no empty project behind (the error stays on the status line)
      else if (made) await operation("DELETE", project(target)).catch(() => {});
    } else {
      result.hidden = false;
      result.className = "import-result error";
      result.textContent = "Choose a file or give a URL to import.";
    }
  } }, h("h2", {}, fixedName ? "Add a source" : "Import"),
  h("p", { class: "hint" }, "TSV, CSV, XLSX, Azure JSON or a QnA Maker .zip; PDF, Word, HTML or Markdown documents; or a URL."),
  fixedName ? null : field("Project", name, "An existing project, or a new one to create."),
  field("File", file), field("or URL source", url), h("button", { type: "submit" }, fixedName ? "Add source" : "Import"), result);
  return form;
}

const FORMATS = [["json", "JSON"], ["tsv", "TSV (.zip)"], ["excel", "Excel (.zip of .xlsx)"]];

// Export a project: the job, then the file downloads at once (and a link stays, to download it again).
export function exportForm(name, progress) {
  const format = h("select", { "aria-label": `Export format for ${name}` }, FORMATS.map(([v, text]) => h("option", { value: v }, text)));
  const links = h("span", { class: "downloads" });
  return h("form", { class: "row inline", onsubmit: async (event) => {
    event.preventDefault();
    const fmt = format.value;
    await runJob(`Exporting ${name} (${fmt})`, progress, async (onStatus) => {
      const job = await operation("POST", `${project(name)}/:export?format=${fmt}`, undefined, { onStatus });
      const link = h("a", { href: job.resultUrl, download: "" }, `Download the ${fmt === "json" ? "JSON" : ".zip"} file again`);
      links.replaceChildren(link);
      link.click();
    });
  } }, format, h("button", { type: "submit", class: "secondary", "aria-label": `Export ${name}` }, "Export"), links);
}

export async function showProjects() {
  const token = navigation(); // drawn only if no newer navigation began meanwhile
  const { value } = await get("/openqna/projects");
  const progress = h("p", { class: "progress", role: "status", hidden: true });
  const rows = value.map((p) => [
    h("a", { href: `#/p/${encodeURIComponent(p.projectName)}/edit` }, p.projectName),
    String(p.qnas), String(p.passages), when(p.lastDeployedDateTime), when(p.lastModifiedDateTime),
    p.canAuthor ? exportForm(p.projectName, progress) : "",
    p.canAuthor ? h("button", { type: "button", class: "danger", "aria-label": `Delete ${p.projectName}`, onclick: async () => {
      if (!confirm(`Delete project ${p.projectName} and all its deployments?`)) return;
      if (await runJob(`Deleting ${p.projectName}`, progress, (onStatus) => operation("DELETE", project(p.projectName), undefined, { onStatus }))) route();
    } }, "Delete") : "",
  ]);
  const author = can("author");
  const name = h("input", { required: true, pattern: "[A-Za-z0-9][A-Za-z0-9_\\-]*", autocomplete: "off" });
  const answer = h("input", { value: "No good match found in KB." });
  const language = h("input", { value: "en", size: 6 });
  const create = h("form", { class: "card", onsubmit: async (event) => {
    event.preventDefault();
    const wanted = name.value.trim();
    try { // the PATCH creates or updates: a name in use would silently get this language and default answer
      const taken = await existing(wanted); // read again: another tab may have made it since this page was drawn
      if (taken) {
        fail(new Error(`A project named ${taken} already exists: open it from the list, or choose another name.`));
        name.focus();
        return;
      }
      await call("PATCH", project(wanted), { language: language.value, settings: { defaultAnswer: answer.value } });
      location.hash = `#/p/${encodeURIComponent(wanted)}/edit`;
    } catch (error) { fail(error); }
  } }, h("h2", {}, "New project"), field("Name", name, "Letters, digits, - and _."), field("Language", language),
  field("Default answer", answer), h("button", { type: "submit" }, "Create project"));
  render(h("section", {}, h("h1", {}, "Projects"),
    value.length ? table(["Project", "QnAs", "Passages", "Last deployed", "Last modified", "Export", ""], rows)
      : h("p", {}, "No projects yet" + (author ? ": create one or import a file." : ".")),
    progress, author ? h("div", { class: "grid" }, create, importForm(progress)) : null), token);
}

export { importForm, all, AUTHORING };
