// Modal dialogs (<dialog>): a confirmation, and a small form. Each resolves once it is closed.

import { h } from "./dom";

export function confirmDialog(title: string, text: string, confirmLabel: string): Promise<boolean> {
  return new Promise((resolve) => {
    const heading = h("h2", { id: "dialog-title" }, title);
    const dialog = h(
      "dialog",
      { "aria-labelledby": "dialog-title", class: "dialog" },
      heading,
      h("p", {}, text),
    );
    const done = (ok: boolean) => {
      dialog.close();
      dialog.remove();
      resolve(ok);
    };
    dialog.append(
      h(
        "div",
        { class: "dialog-buttons" },
        h("button", { type: "button", class: "danger", onclick: () => done(true) }, confirmLabel),
        h("button", { type: "button", onclick: () => done(false) }, "Cancel"),
      ),
    );
    dialog.addEventListener("cancel", (e) => {
      e.preventDefault();
      done(false);
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}

export interface Field {
  name: string;
  label: string;
  type?: "text" | "number";
  value?: string;
  required?: boolean;
  placeholder?: string;
  min?: number;
  max?: number;
  options?: string[]; // a <select> instead of an input
}

// The values by field name, or null when cancelled.
export function formDialog(
  title: string,
  fields: Field[],
  submitLabel: string,
): Promise<Record<string, string> | null> {
  return new Promise((resolve) => {
    const form = h("form", { method: "dialog", class: "dialog-form" });
    const inputs = new Map<string, HTMLInputElement | HTMLSelectElement>();
    for (const f of fields) {
      const id = `field-${f.name}`;
      let input: HTMLInputElement | HTMLSelectElement;
      if (f.options) {
        input = h("select", { id, name: f.name });
        for (const o of f.options) input.append(h("option", { value: o }, o));
        if (f.value !== undefined) input.value = f.value;
      } else {
        input = h("input", {
          id,
          name: f.name,
          type: f.type ?? "text",
          value: f.value,
          required: f.required,
          placeholder: f.placeholder,
          min: f.min,
          max: f.max,
        });
      }
      inputs.set(f.name, input);
      form.append(h("label", { for: id }, f.label), input);
    }
    const heading = h("h2", { id: "dialog-title" }, title);
    const dialog = h("dialog", { "aria-labelledby": "dialog-title", class: "dialog" }, heading);
    let settled = false;
    const done = (values: Record<string, string> | null) => {
      if (settled) return;
      settled = true;
      dialog.close();
      dialog.remove();
      resolve(values);
    };
    form.append(
      h(
        "div",
        { class: "dialog-buttons" },
        h("button", { type: "submit" }, submitLabel),
        h("button", { type: "button", onclick: () => done(null) }, "Cancel"),
      ),
    );
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const values: Record<string, string> = {};
      for (const [name, input] of inputs) values[name] = input.value.trim();
      done(values);
    });
    dialog.addEventListener("cancel", (e) => {
      e.preventDefault();
      done(null);
    });
    dialog.append(form);
    document.body.append(dialog);
    dialog.showModal();
    const first = inputs.values().next().value;
    if (first) first.focus();
  });
}
