// A small Markdown renderer that builds DOM nodes, never HTML strings: author and imported text is
// only ever a text node, so <script>, onerror=... and the like are shown as text and never run.
// Supported: paragraphs, #-headings, - / * / 1. lists, **bold**, *italic*, `code`, [links](http...).

const SAFE_URL = /^(https?:|mailto:)/i;

function inline(parent, text) {
  const pattern = /(\*\*([^*]+)\*\*|\*([^*]+)\*|`([^`]+)`|\[([^\]]+)\]\(([^)\s]+)\))/g;
  let last = 0;
  for (const m of text.matchAll(pattern)) {
    parent.append(document.createTextNode(text.slice(last, m.index)));
    if (m[2] !== undefined) parent.append(el("strong", m[2]));
    else if (m[3] !== undefined) parent.append(el("em", m[3]));
    else if (m[4] !== undefined) parent.append(el("code", m[4]));
    else if (SAFE_URL.test(m[6])) {
      const a = el("a", m[5]);
      a.href = m[6];
      a.rel = "noopener noreferrer";
      a.target = "_blank";
      parent.append(a);
    } else parent.append(document.createTextNode(m[0]));
    last = m.index + m[0].length;
  }
  parent.append(document.createTextNode(text.slice(last)));
}

function el(tag, text) {
  const node = document.createElement(tag);
  if (text !== undefined) inline(node, text);
  return node;
}

export function renderMarkdown(source) {
  const root = document.createElement("div");
  root.className = "markdown";
  let list = null;
  let para = [];
  const flush = () => {
    if (para.length) root.append(el("p", para.join(" ")));
    para = [];
  };
  for (const line of String(source || "").split(/\r?\n/)) {
    const heading = line.match(/^(#{1,6})\s+(.*)$/);
    const item = line.match(/^\s*([-*]|\d+[.)])\s+(.*)$/);
    if (!line.trim()) { flush(); list = null; continue; }
    if (heading) { flush(); list = null; root.append(el(`h${Math.min(6, heading[1].length + 2)}`, heading[2])); continue; }
    if (item) {
      flush();
      const ordered = /\d/.test(item[1]);
      if (!list || (list.tagName === "OL") !== ordered) { list = document.createElement(ordered ? "ol" : "ul"); root.append(list); }
      list.append(el("li", item[2]));
      continue;
    }
    list = null;
    para.push(line.trim());
  }
  flush();
  return root;
}

// Plain text with [offset, offset+length) marked: the answer span inside the answer.
export function highlighted(text, offset, length) {
  const p = document.createElement("p");
  p.className = "span-text";
  p.append(document.createTextNode(text.slice(0, offset)));
  const mark = document.createElement("mark");
  mark.textContent = text.slice(offset, offset + length);
  p.append(mark, document.createTextNode(text.slice(offset + length)));
  return p;
}
