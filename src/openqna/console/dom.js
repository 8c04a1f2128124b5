// Building the page: h() makes an element from attributes and children (strings become text nodes,
// never HTML), field() a labelled control, and say() the polite status line screen readers announce.

export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "class") node.className = value;
    else if (name === "value") node.value = value;
    else if (name in node && typeof value !== "string") node[name] = value;
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

let fieldIds = 0;
export function field(label, control, hint) {
  const id = control.id || `f${++fieldIds}`;
  control.id = id;
  // right-to-left text (Hebrew, Arabic) laid out by its own direction, its full stop at its end
  if (control.tagName === "TEXTAREA" || (control.tagName === "INPUT" && ["text", "search", ""].includes(control.getAttribute("type") || ""))) {
    if (!control.hasAttribute("dir")) control.setAttribute("dir", "auto");
  }
  const hintNode = hint ? h("small", { id: `${id}-hint`, class: "hint" }, hint) : null;
  if (hintNode) control.setAttribute("aria-describedby", hintNode.id);
  return h("div", { class: "field" }, h("label", { for: id }, label), control, hintNode);
}

export function say(message, kind = "info") {
  const status = document.getElementById("status");
  status.className = `status ${kind}`;
  status.textContent = message;
}

// "1 question", "2 questions"
// Text as a search compares it: NFKC (full-width "ＰａｙＰａｙ" and "３００円" as typed by Japanese input methods, half-width
// katakana) and lower case.
export function fold(text) { return String(text || "").normalize("NFKC").toLowerCase(); }

export function plural(n, word) { return `${n} ${word}${n === 1 ? "" : "s"}`; }

export function errorText(error) {
  if (error && error.status === 401) {
    return "This tab's key no longer works on this server (it was revoked, or keys were created since). Copy any unsaved edit, then reload the page to sign in with a key.";
  }
  if (error && error.status === 403) return `Refused: ${error.message}`;
  if (error && error.status === 404) return `Not found (or not visible to this key): ${error.message}`;
  return error && error.message ? error.message : String(error);
}

export function fail(error) { say(errorText(error), "error"); }

// A table in a box of its own that scrolls sideways when the table is wider than the window (a phone), not the page.
export function table(headers, rows, caption) {
  return h("div", { class: "table-wrap" }, h("table", {}, caption ? h("caption", {}, caption) : null,
    h("thead", {}, h("tr", {}, headers.map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c) => h("td", { dir: "auto" }, c)))))));
}
