// A few DOM helpers: the page builds its elements with these, never with innerHTML, so that
// text from boxes (names, logs, policy log hosts) is always text.

type Child = Node | string | null | undefined | false;
type Attrs = Record<string, string | number | boolean | EventListener | undefined>;

// h("button", {type: "button", onclick: f, "aria-label": "Stop dev"}, "Stop")
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    if (typeof value === "function") {
      el.addEventListener(name.replace(/^on/, ""), value);
    } else if (value === true) {
      el.setAttribute(name, "");
    } else {
      el.setAttribute(name, String(value));
    }
  }
  append(el, ...children);
  return el;
}

export function append(el: Node, ...children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    el.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
  }
}

export function clear(el: Node): void {
  while (el.firstChild) el.removeChild(el.firstChild);
}

// Sets an element's text only when it changed (no needless layout, selections survive).
export function setText(el: Element, text: string): void {
  if (el.textContent !== text) el.textContent = text;
}

export function button(
  text: string,
  onclick: () => void,
  attrs: Attrs = {},
): HTMLButtonElement {
  return h("button", { type: "button", onclick: () => onclick(), ...attrs }, text);
}
