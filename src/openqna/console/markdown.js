// A small Markdown renderer that builds DOM nodes, never HTML strings: author and imported text is
// only ever a text node, so <script>, onerror=... and the like are shown as text and never run.
// Supported: paragraphs, #-headings, - / * / 1. lists, **bold**, *italic*, `code`, [links](http...) whose address may
// hold balanced parentheses (https://en.wikipedia.org/wiki/Bat_(animal)), and images ![alt](...).

const SAFE_URL = /^(https?:|mailto:)/i;
// The images the page's Content-Security-Policy lets it load (img-src 'self' data:): inline data of an image type. The
// policy keeps the console from calling out to hosts that content names, so an image elsewhere (https://...) is
// shown as a link to it, with its alt text; any other address (javascript:, a relative path) as the text it was.
const INLINE_IMAGE = /^data:image\/[a-z0-9.+-]+[;,]/i;
// A link's or image's address: no spaces, and parentheses only in balanced pairs (one level, as CommonMark allows).
const ADDRESS = String.raw`((?:[^()\s]|\([^()\s]*\))+)`;
const PATTERN = new RegExp(String.raw`(\*\*([^*]+)\*\*|\*([^*]+)\*|` + "`([^`]+)`" + String.raw`|!\[([^\]]*)\]\(` + ADDRESS
  + String.raw`\)|\[([^\]]+)\]\(` + ADDRESS + String.raw`\))`, "g");

function link(text, url) {
  const a = el("a", text);
  a.href = url;
  a.rel = "noopener noreferrer";
  a.target = "_blank";
  return a;
}

function image(alt, url) {
  if (INLINE_IMAGE.test(url)) {
    const img = document.createElement("img");
    img.alt = alt;
    img.src = url;
    return img;
  }
  if (/^https?:/i.test(url)) {
    const a = link(undefined, url);
    a.className = "image";
    a.textContent = `Image: ${alt || url}`;
    return a;
  }
  return null;
}

function inline(parent, text) {
  let last = 0;
  for (const m of text.matchAll(PATTERN)) {
    parent.append(document.createTextNode(text.slice(last, m.index)));
    let node = null;
    if (m[2] !== undefined) node = el("strong", m[2]);
    else if (m[3] !== undefined) node = el("em", m[3]);
    else if (m[4] !== undefined) node = el("code", m[4]);
    else if (m[6] !== undefined) node = image(m[5], m[6]);
    else if (SAFE_URL.test(m[8])) node = link(m[7], m[8]);
    parent.append(node || document.createTextNode(m[0]));
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
