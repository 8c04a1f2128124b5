// A project's sources on its QnAs page: each file or URL it was built from, and for a URL source its refresh: how
// often it is checked, when it was last checked, whether it was unchanged, changed or failed, and what changed
// (QnAs and passages added, changed and removed, named by their first question).  "Check now" checks a URL source
// at once; nothing reaches a deployment before the next deploy.
import { call, get } from "./api.js";
import { fail, h, plural, say, table } from "./dom.js";

const EVERY = [["0", "never"], ["1h", "every hour"], ["6h", "every 6 hours"], ["1d", "every day"], ["7d", "every week"]];

function when(iso) { return iso ? iso.replace("T", " ").replace(/\.\d+/, "").replace("Z", " UTC") : ""; }
function isUrl(s) { return /^https?:\/\//i.test(s.sourceUri || ""); }

// "updated": counts of QnAs and passages apart, then each changed record by its first question (or its id).
function changes(outcome) {
  const titles = outcome.titles || {};
  const named = (ids) => ids.map((id) => titles[String(id)] ? `${titles[String(id)]} (#${id})` : `#${id}`);
  const counts = ["qnas", "passages"].filter((k) => outcome[k]).map((k) => {
    const c = outcome[k];
    return `${k === "qnas" ? "QnAs" : "Passages"}: ${c.added} added, ${c.updated} changed, ${c.deleted} removed`;
  });
  const lists = [["Added", outcome.addedIds || []], ["Changed", outcome.updatedIds || []], ["Removed", outcome.deletedIds || []]]
    .filter(([, ids]) => ids.length);
  return h("div", { class: "refresh-diff" },
    h("p", {}, counts.length ? counts.join(" · ") : `${outcome.added} added, ${outcome.updated} changed, ${outcome.deleted} removed`),
    lists.length ? h("dl", { class: "changes" }, lists.flatMap(([label, ids]) => [h("dt", {}, `${label} (${ids.length})`),
      h("dd", {}, h("ul", {}, named(ids).map((x) => h("li", {}, x))))])) : null);
}

function lastCheck(refresh) {
  if (!refresh || !refresh.lastCheckedDateTime) return "Not checked yet.";
  const o = refresh.outcome || {};
  const at = `Checked ${when(refresh.lastCheckedDateTime)}: `;
  if (o.status === "updated") return h("div", {}, h("p", {}, h("strong", {}, `${at}changed`), " (the QnAs page shows the new content; deploy to answer with it)."), changes(o));
  if (o.status === "failed") return h("p", { class: "error" }, `${at}failed: ${o.error || "no reason given"}. Nothing changed.`);
  return h("div", {}, h("p", {}, `${at}unchanged${o.notModified ? " (the server said Not Modified)" : ""}.`),
    refresh.lastChangedDateTime ? h("p", { class: "hint" }, `Last changed ${when(refresh.lastChangedDateTime)}.`) : null);
}

// The card; `reload` redraws the page around it after a check that changed the project.
export async function sourcesCard(name, editable, reload) {
  const base = `/openqna/projects/${encodeURIComponent(name)}/sources`;
  const card = h("section", { class: "card sources", "aria-label": "Sources" });
  let listed;
  try { listed = (await get(base)).value; } catch (error) { fail(error); return card; }
  const path = (s) => `${base}/${encodeURIComponent(s.source)}`;
  const rows = listed.map((s) => {
    const url = isUrl(s);
    const every = h("select", { "aria-label": `Refresh ${s.displayName || s.source}`, disabled: !editable || !url,
      onchange: async () => {
        try {
          const { refresh } = (await call("PUT", `${path(s)}/refresh`, { every: every.value })).data;
          say(refresh.everySeconds ? `${s.displayName} is checked ${EVERY.find(([v]) => v === every.value)[1]}; next check ${when(refresh.nextDueDateTime)}.`
            : `${s.displayName} is no longer checked.`);
        } catch (error) { fail(error); }
      } }, EVERY.map(([v, text]) => h("option", { value: v }, text)));
    const current = s.refresh ? s.refresh.every : "off";
    every.value = EVERY.some(([v]) => v === current) ? current : "0";
    if (s.refresh && s.refresh.everySeconds && every.value === "0") every.prepend(h("option", { value: current, selected: true }, `every ${current}`));
    const check = url && editable ? h("button", { type: "button", class: "secondary", "aria-label": `Check ${s.displayName || s.source} now`, onclick: async () => {
      check.disabled = true;
      say(`Checking ${s.sourceUri}…`);
      try {
        const { refresh } = (await call("POST", `${path(s)}/:refresh`)).data;
        const o = refresh.outcome || {};
        say(o.status === "updated" ? `${s.displayName} changed: ${plural(o.added, "record")} added, ${o.updated} changed, ${o.deleted} removed.`
          : o.status === "failed" ? `Checking ${s.displayName} failed: ${o.error}` : `${s.displayName} is unchanged.`, o.status === "failed" ? "error" : "info");
        await reload();
      } catch (error) { check.disabled = false; fail(error); }
    } }, "Check now") : null;
    return [h("span", {}, h("strong", {}, s.displayName || s.source), url ? h("br") : null, url ? h("small", {}, s.sourceUri) : null),
      url ? "URL" : "file", when(s.lastUpdatedDateTime), url ? every : "–", url ? lastCheck(s.refresh) : "–", check || ""];
  });
  card.append(h("h2", {}, "Sources"),
    listed.length ? table(["Source", "Kind", "Last updated", "Refresh", "Last check", ""], rows)
      : h("p", {}, "No sources yet."));
  return card;
}
