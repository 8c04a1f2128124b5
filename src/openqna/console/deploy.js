// Deploy: what differs between `test` and each deployment (added, changed, deleted QnAs), then deploy.
import { all, get, operation, project } from "./api.js";
import { can, render, route } from "./app.js";
import { field, h, say } from "./dom.js";
import { refused, runJob, tabs } from "./projects.js";

function changes(diff) {
  const list = (label, items) => items.length ? h("details", {}, h("summary", {}, `${label}: ${items.length}`),
    h("ul", {}, items.slice(0, 200).map((x) => h("li", {}, `${x.id} ${x.kind === "passage" ? "(passage) " : ""}${x.question}`)))) : h("p", {}, `${label}: 0`);
  return h("div", { class: "diff" }, list("Added", diff.added), list("Changed", diff.changed), list("Deleted", diff.deleted));
}

async function diffOf(name, deployment) {
  return get(`/openqna/projects/${encodeURIComponent(name)}/deployments/${encodeURIComponent(deployment)}/diff`);
}

export async function showDeploy(name) {
  if (!can("author", name)) return render(refused(name, "deploy", "deploying"));
  const deployments = await all(`${project(name)}/deployments`);
  const progress = h("p", { class: "progress", role: "status", hidden: true });
  const author = can("author", name);
  const deploy = async (deployment) => {
    if (await runJob(`Deploying to ${deployment}`, progress, (onStatus) =>
      operation("PUT", `${project(name)}/deployments/${encodeURIComponent(deployment)}`, undefined, { onStatus }))) {
      say(`Deployed ${name} to ${deployment}.`);
      route();
    }
  };
  const cards = [];
  for (const d of deployments) {
    const diff = await diffOf(name, d.deploymentName);
    const same = !diff.added.length && !diff.changed.length && !diff.deleted.length;
    cards.push(h("section", { class: "card" }, h("h2", {}, d.deploymentName),
      h("p", {}, `Last deployed ${d.lastDeployedDateTime}. ${same ? "Identical to test." : "test differs:"}`),
      same ? null : changes(diff),
      author ? h("button", { type: "button", onclick: () => deploy(d.deploymentName) }, `Deploy test to ${d.deploymentName}`) : null));
  }
  const target = h("input", { value: deployments.length ? "" : "production", pattern: "[A-Za-z0-9][A-Za-z0-9_\\-]*", required: true });
  const preview = h("div", {});
  const form = h("form", { class: "card", onsubmit: async (event) => { event.preventDefault(); await deploy(target.value.trim()); } },
    h("h2", {}, "Deploy to a new name"), field("Deployment name", target),
    h("button", { type: "button", class: "secondary", onclick: async () => preview.replaceChildren(changes(await diffOf(name, target.value.trim()))) }, "Show changes"),
    preview, h("button", { type: "submit" }, "Deploy"));
  render(h("section", {}, tabs(name, "deploy"), h("h1", {}, `${name}: deployments`), progress,
    cards.length ? cards : h("p", {}, "Not deployed yet."), author ? form : null));
}
