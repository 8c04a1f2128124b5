// Deploy: what differs between `test` and each deployment (QnAs and passages apart, and for a changed QnA what
// changed, old and new), deploying after a confirmation, and every deployed version with a rollback.
import { all, call, get, operation, project } from "./api.js";
import { can, navigation, render, route } from "./app.js";
import { fail, field, h, say, table } from "./dom.js";
import { refused, runJob, tabs } from "./projects.js";
import { trainingCard } from "./training.js";

const PARTS = { questions: "Questions", answer: "Answer", metadata: "Metadata", prompts: "Follow-up prompts",
  contextOnly: "Context only", source: "Source", fields: "Fields", kind: "Kind" };

function shown(value) {
  if (Array.isArray(value)) return value.map((x) => (typeof x === "object" ? x.displayText ?? JSON.stringify(x) : x)).join(" · ") || "(none)";
  if (value && typeof value === "object") return Object.entries(value).map(([k, v]) => `${k}: ${v}`).join(", ") || "(none)";
  return String(value ?? "");
}

function changedItem(x) {
  const parts = Object.entries(x.changes || {});
  return h("li", {}, `QnA ${x.id} ${x.question}`,
    h("dl", { class: "changes" }, parts.flatMap(([name, c]) => [h("dt", {}, PARTS[name] || name),
      h("dd", {}, h("del", {}, shown(c.old)), " → ", h("ins", {}, shown(c.new)))])));
}

// The diff of one deployment, QnAs and passages apart (a passage is not a QnA to the person who owns the KB).
function count(diff) {
  const kinds = (items) => ({ qnas: items.filter((x) => x.kind !== "passage"), passages: items.filter((x) => x.kind === "passage") });
  return { added: kinds(diff.added), changed: kinds(diff.changed), deleted: kinds(diff.deleted) };
}

function summary(c) {
  const line = (kind, label) => `${label}: ${c.added[kind].length} added, ${c.changed[kind].length} changed, ${c.deleted[kind].length} deleted`;
  return `${line("qnas", "QnAs")} · ${line("passages", "Passages")}`;
}

function changes(diff) {
  const c = count(diff);
  const list = (label, items, item) => items.length ? h("details", {}, h("summary", {}, `${label}: ${items.length}`),
    h("ul", {}, items.slice(0, 200).map(item))) : null;
  const plain = (x) => h("li", {}, `${x.id} ${x.question}`);
  return h("div", { class: "diff" }, h("p", {}, summary(c)),
    list("QnAs added", c.added.qnas, plain), list("QnAs changed", c.changed.qnas, changedItem),
    list("QnAs deleted", c.deleted.qnas, plain), list("Passages added", c.added.passages, plain),
    list("Passages changed", c.changed.passages, plain), list("Passages deleted", c.deleted.passages, plain));
}

async function diffOf(name, deployment) {
  return get(`/openqna/projects/${encodeURIComponent(name)}/deployments/${encodeURIComponent(deployment)}/diff`);
}

// A question put where the button was: nothing is deployed until "Confirm" is pressed.
export function confirmIn(slot, message, label, action) {
  const box = h("div", { class: "confirm", role: "alertdialog", "aria-label": label },
    h("p", {}, message),
    h("button", { type: "button", onclick: async () => { slot.replaceChildren(); await action(); } }, label),
    h("button", { type: "button", class: "secondary", onclick: () => slot.replaceChildren() }, "Cancel"));
  slot.replaceChildren(box);
  box.querySelector("button").focus();
}

function when(iso) { return iso ? iso.replace("T", " ").replace(/\.\d+/, "").replace("Z", " UTC") : ""; }

export async function showDeploy(name) {
  const token = navigation(); // drawn only if no newer navigation began meanwhile
  if (!can("author", name)) return render(refused(name, "deploy", "deploying"));
  const base = `/openqna/projects/${encodeURIComponent(name)}`;
  const [deployments, versions, training] = await Promise.all([all(`${project(name)}/deployments`),
    get(`${base}/versions`), get(`${base}/training`)]);
  // a trained model is deployed with the content: say when test's differs from a deployment's
  const modelHash = (deployment) => (training.deployments[deployment] || {}).hash || null;
  const modelChange = (deployment) => (modelHash("test") === modelHash(deployment) ? ""
    : modelHash("test") ? "The trained model differs." : "test has no trained model; this deployment has one.");
  const progress = h("p", { class: "progress", role: "status", hidden: true });
  const deploy = async (deployment) => {
    if (await runJob(`Deploying to ${deployment}`, progress, (onStatus) =>
      operation("PUT", `${project(name)}/deployments/${encodeURIComponent(deployment)}`, undefined, { onStatus }))) {
      say(`Deployed ${name} to ${deployment}.`);
      route();
    }
  };
  const askDeploy = async (slot, deployment) => {
    try {
      const diff = await diffOf(name, deployment);
      const model = modelChange(deployment);
      confirmIn(slot, `Deploy test to ${deployment}? ${summary(count(diff))}.${model ? ` ${model}` : ""} Users of ${deployment} get these answers at once.`,
        "Confirm deploy", () => deploy(deployment));
    } catch (error) { fail(error); }
  };
  const rollback = async (deployment, version) => {
    try {
      await call("POST", `${base}/deployments/${encodeURIComponent(deployment)}/:rollback?version=${version}`);
      say(`Rolled ${deployment} back to version ${version}.`);
      route();
    } catch (error) { fail(error); }
  };
  const cards = [];
  for (const d of deployments) {
    const diff = await diffOf(name, d.deploymentName);
    const same = !diff.added.length && !diff.changed.length && !diff.deleted.length;
    const model = modelChange(d.deploymentName);
    const slot = h("div", {});
    cards.push(h("section", { class: "card" }, h("h2", {}, d.deploymentName),
      h("p", {}, `Last deployed ${when(d.lastDeployedDateTime)}. ${same && !model ? "Identical to test." : "test differs:"}`),
      same ? null : changes(diff), model ? h("p", {}, model) : null,
      h("button", { type: "button", onclick: () => askDeploy(slot, d.deploymentName) }, `Deploy test to ${d.deploymentName}`),
      slot));
  }
  const target = h("input", { value: deployments.length ? "" : "production", pattern: "[A-Za-z0-9][A-Za-z0-9_\\-]*", required: true });
  const preview = h("div", {});
  const slot = h("div", {});
  // the name typed, or null (and why, in the status line) when it is not one: "Show changes" is no submit to check it
  const named = () => {
    const value = target.value.trim();
    const why = !value ? "Write a deployment name first, e.g. production."
      : !target.checkValidity() ? `"${value}" is not a deployment name: letters, digits, - and _, starting with a letter or digit.` : "";
    if (why) { say(why, "error"); target.focus(); return null; }
    return value;
  };
  const showChanges = async () => {
    const deployment = named();
    if (!deployment) return;
    try {
      preview.replaceChildren(changes(await diffOf(name, deployment)));
      say("");
    } catch (error) { fail(error); }
  };
  const form = h("form", { class: "card", onsubmit: async (event) => { event.preventDefault(); await askDeploy(slot, target.value.trim()); } },
    h("h2", {}, "Deploy to a new name"), field("Deployment name", target),
    h("button", { type: "button", class: "secondary", onclick: showChanges }, "Show changes"),
    preview, h("button", { type: "submit" }, "Deploy"), slot);
  render(h("section", {}, tabs(name, "deploy"), h("h1", {}, `${name}: deployments`), progress,
    await trainingCard(name, progress), cards.length ? cards : h("p", {}, "Not deployed yet."), form,
    history(versions.value, rollback)), token);
}

// Every deploy, newest first: a kept version another deployment state can be rolled back to in one click (and a
// confirmation).
function history(versions, rollback) {
  if (!versions.length) return null;
  const current = new Map(versions.filter((v) => v.current).map((v) => [v.deploymentName, v.version]));
  const slot = h("div", {});
  const rows = [...versions].reverse().map((v) => {
    const held = current.get(v.deploymentName) === v.version;
    const action = v.kept && !held && current.has(v.deploymentName)
      ? h("button", { type: "button", class: "secondary", onclick: () => confirmIn(slot,
          `Roll ${v.deploymentName} back to version ${v.version} (${v.qnas} QnAs, ${v.passages} passages, deployed ${when(v.deployedDateTime)})?`,
          "Confirm rollback", () => rollback(v.deploymentName, v.version)) }, `Roll ${v.deploymentName} back to v${v.version}`)
      : (v.current ? "now deployed" : (v.kept ? "" : "content dropped"));
    return [`v${v.version}`, v.deploymentName, when(v.deployedDateTime), v.deployedBy || "–", String(v.qnas),
      String(v.passages), v.hash.slice(0, 12), action];
  });
  return h("section", { class: "card", "aria-label": "Versions" }, h("h2", {}, "Versions"),
    table(["Version", "Deployment", "Deployed", "By", "QnAs", "Passages", "Content", ""], rows), slot);
}
