// The templates (#/templates): every template with where it came from, and, for admin keys, New
// template: an image pulled from a registry or a Dockerfile built (POST /v1/templates with
// from_image, POST /v1/builds), with hutchd's progress shown as it streams and its error if any.

import { ApiError, type Template } from "./api";
import { type Context, Poller, report } from "./context";
import { h, setText } from "./dom";
import { bytes } from "./format";

const kPollMs = 10000;
const kLogLines = 200;

function origin(t: Template): string {
  const init = t.init ? `, ${t.init} as PID 1` : "";
  if (t.image) return (t.image.ref ? `${t.image.ref} (${short(t.image.digest)})` : `${t.image.archive ?? "archive"} ${short(t.image.digest)}`) + init;
  if (t.build) return `Dockerfile on ${t.build.base_image || t.build.base_template}, ${t.build.steps} steps`;
  if (t.source === "box" && t.source_box) return `box ${t.source_box}`;
  if (t.source === "recipe") return `recipe images/${t.name}`;
  return "";
}

function short(digest: string): string {
  return digest.replace(/^sha256:/, "").slice(0, 12);
}

export class TemplatesView {
  readonly element: HTMLElement;
  private readonly body: HTMLTableSectionElement;
  private readonly count: HTMLElement;
  private readonly poller: Poller;

  constructor(private readonly ctx: Context) {
    this.body = h("tbody");
    this.count = h("span", { class: "count" });
    const newButton = h(
      "button",
      {
        type: "button",
        onclick: () => void this.newTemplate(),
        disabled: !ctx.admin,
        title: ctx.admin ? undefined : "Only admin keys make templates",
      },
      "New template",
    );
    const table = h(
      "table",
      { class: "boxes", "aria-label": "Templates" },
      h(
        "thead",
        {},
        h("tr", {}, ...["Name", "Source", "From", "Disk", "Used by"].map((c) => h("th", { scope: "col" }, c))),
      ),
      this.body,
    );
    this.element = h(
      "section",
      { class: "view", "aria-labelledby": "templates-title" },
      h("div", { class: "view-head" }, h("h2", { id: "templates-title" }, "Templates"), this.count, newButton),
      h("div", { class: "table-wrap" }, table),
    );
    this.poller = new Poller(() => this.poll(), kPollMs);
    this.poller.now();
  }

  refresh(): void {
    this.poller.now();
  }

  destroy(): void {
    this.poller.stop();
  }

  private async poll(): Promise<void> {
    let templates: Template[];
    try {
      templates = await this.ctx.api.templates();
    } catch (e) {
      report(this.ctx, "Cannot list the templates", e);
      return;
    }
    templates.sort((a, b) => a.name.localeCompare(b.name));
    this.body.replaceChildren(
      ...templates.map((t) =>
        h(
          "tr",
          {},
          h("th", { scope: "row", class: "name" }, t.name),
          h("td", {}, t.source),
          h("td", { class: "mono" }, origin(t)),
          h("td", { class: "num" }, t.disk_bytes ? bytes(t.disk_bytes) : "–"),
          h("td", {}, (t.used_by ?? []).join(", ")),
        ),
      ),
    );
    setText(this.count, `${templates.length} ${templates.length === 1 ? "template" : "templates"}`);
  }

  private async newTemplate(): Promise<void> {
    const made = await newTemplateDialog(this.ctx);
    if (made) {
      this.ctx.notices.info(`Template ${made.name} made`);
      this.poller.now();
    }
  }
}

// The New template dialog: a name and an image reference (or a Dockerfile's text). It stays open
// while hutchd works, showing each progress line, and says when the template is made (Close
// then resolves with it); an error is shown in it (role alert) and the form can be sent again.
// Cancel while it runs aborts the request: hutchd stops a pull whose client went away (a build
// goes on).
export function newTemplateDialog(ctx: Context): Promise<Template | null> {
  return new Promise((resolve) => {
    const field = (id: string, label: string, input: HTMLElement) => [h("label", { for: id }, label), input];
    const name = h("input", { id: "template-name", name: "name", required: true, placeholder: "py", autocomplete: "off" });
    const kind = h(
      "select",
      { id: "template-kind", name: "kind" },
      h("option", { value: "image" }, "An image from a registry"),
      h("option", { value: "dockerfile" }, "A Dockerfile"),
    );
    const image = h("input", {
      id: "template-image",
      name: "image",
      placeholder: "python:3.12-slim, registry.example:5000/team/app:1",
      autocomplete: "off",
      spellcheck: "false",
    });
    const dockerfile = h("textarea", {
      id: "template-dockerfile",
      name: "dockerfile",
      rows: 8,
      spellcheck: "false",
      placeholder: "FROM base\nRUN apt-get install -y ...",
    });
    const systemd = h("input", { id: "template-systemd", name: "systemd", type: "checkbox" });
    const imageRow = h(
      "div",
      { class: "dialog-form" },
      ...field("template-image", "Image", image),
      ...field("template-systemd", "Run systemd as PID 1 (it must be installed)", systemd),
    );
    const dockerfileRow = h(
      "div",
      { class: "dialog-form", hidden: true },
      ...field("template-dockerfile", "Dockerfile (no context: COPY has nothing to copy)", dockerfile),
    );
    const syncKind = () => {
      const isImage = kind.value === "image";
      imageRow.hidden = !isImage;
      dockerfileRow.hidden = isImage;
      image.required = isImage;
      dockerfile.required = !isImage;
    };
    kind.addEventListener("change", syncKind);
    syncKind();

    const log = h("pre", { class: "progress-log", role: "log", "aria-label": "Progress", hidden: true });
    const error = h("p", { class: "dialog-error", role: "alert" });
    const status = h("p", { class: "dialog-status", role: "status" });
    const submit = h("button", { type: "submit" }, "Create");
    const cancel = h("button", { type: "button" }, "Cancel");
    const form = h(
      "form",
      { class: "dialog-form" },
      ...field("template-name", "Name", name),
      ...field("template-kind", "Source", kind),
      imageRow,
      dockerfileRow,
      log,
      error,
      status,
      h("div", { class: "dialog-buttons" }, submit, cancel),
    );
    const dialog = h(
      "dialog",
      { "aria-labelledby": "dialog-title", class: "dialog wide" },
      h("h2", { id: "dialog-title" }, "New template"),
      form,
    );
    let running: AbortController | undefined;
    let made: Template | null = null;
    let settled = false;
    const done = (made: Template | null) => {
      if (settled) return;
      settled = true;
      running?.abort();
      dialog.close();
      dialog.remove();
      resolve(made);
    };
    const lines: string[] = [];
    const say = (line: string) => {
      lines.push(line);
      if (lines.length > kLogLines) lines.splice(0, lines.length - kLogLines);
      log.hidden = false;
      log.textContent = lines.join("\n");
      log.scrollTop = log.scrollHeight;
    };
    cancel.addEventListener("click", () => done(made));
    dialog.addEventListener("cancel", (e) => {
      e.preventDefault();
      done(made);
    });
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      if (running) return;
      const values = { name: name.value.trim(), image: image.value.trim(), dockerfile: dockerfile.value };
      setText(error, "");
      lines.length = 0;
      log.textContent = "";
      running = new AbortController();
      submit.disabled = true;
      setText(submit, "Creating…");
      const signal = running.signal;
      const request =
        kind.value === "image"
          ? ctx.api.createTemplateFromImage(values.name, values.image, say, signal, systemd.checked)
          : ctx.api.buildTemplate(values.name, values.dockerfile, say, signal);
      request.then(
        (template) => {
          // Done: the log stays for reading; the form is spent.
          made = template;
          running = undefined;
          submit.hidden = true;
          setText(cancel, "Close");
          setText(status, `Template ${template.name} made (${template.source}).`);
          cancel.focus();
        },
        (err: unknown) => {
          running = undefined;
          submit.disabled = false;
          setText(submit, "Create");
          if (settled) return;
          if (err instanceof ApiError && err.status === 401) {
            done(null);
            ctx.unauthenticated(err);
            return;
          }
          setText(error, `Cannot make template ${values.name}: ${err instanceof Error ? err.message : String(err)}`);
        },
      );
    });
    document.body.append(dialog);
    dialog.showModal();
    name.focus();
  });
}
