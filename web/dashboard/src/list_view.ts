// The box list: every box the key sees, forks under their parents, live state and usage
// (GET /v1/boxes and each running box's /stats, polled), and the operations on each.

import { ActionBar } from "./actions";
import type { Box, BoxStats, Template } from "./api";
import { type Context, Poller, report } from "./context";
import { formDialog } from "./dialogs";
import { h, setText } from "./dom";
import { flatten, forkForest, forkParentName } from "./forks";
import { age, bytes, ownerName, percent } from "./format";

const kPollMs = 3000;

const columnHelp: Record<string, string | undefined> = {
  CPU: "The VMM's CPU time between the last two samples; 100% is one host CPU",
  Memory: "What the VMM's cgroup uses now (guest memory and QEMU), and the box's memory size",
};

class BoxRow {
  readonly element: HTMLTableRowElement;
  private readonly link: HTMLAnchorElement;
  private readonly fork: HTMLElement;
  private readonly cells: Record<"id" | "state" | "template" | "owner" | "age" | "cpu" | "memory", HTMLElement>;
  private readonly actions: ActionBar;

  constructor(
    private readonly ctx: Context,
    box: Box,
  ) {
    this.link = h("a", { href: `#/boxes/${box.id}` }, box.name);
    this.fork = h("span", { class: "fork-of" });
    const td = (cls: string) => h("td", { class: cls });
    this.cells = {
      id: td("mono"),
      state: td("state"),
      template: td(""),
      owner: td(""),
      age: td("num"),
      cpu: td("num"),
      memory: td("num"),
    };
    this.actions = new ActionBar(ctx, box, {});
    this.element = h(
      "tr",
      { "data-box-id": box.id },
      h("th", { scope: "row", class: "name" }, this.link, this.fork),
      this.cells.id,
      this.cells.state,
      this.cells.template,
      this.cells.owner,
      this.cells.age,
      this.cells.cpu,
      this.cells.memory,
      h("td", {}, this.actions.element),
    );
  }

  update(box: Box, depth: number, stats: BoxStats | undefined): void {
    const el = this.element.querySelector("th") as HTMLElement;
    el.style.paddingLeft = `${0.5 + depth * 1.25}em`;
    setText(this.link, box.name);
    const parent = forkParentName(box);
    setText(this.fork, depth > 0 && parent ? ` fork of ${parent}` : "");
    setText(this.cells.id, box.id);
    const busy = this.ctx.busy.get(box.id);
    setText(this.cells.state, busy ?? box.state);
    this.cells.state.dataset.state = busy ? "busy" : box.state;
    this.cells.state.title = box.state === "failed" ? box.reason : "";
    setText(this.cells.template, box.template);
    setText(this.cells.owner, ownerName(box.owner));
    setText(this.cells.age, age(box.created_at));
    const sample = this.ctx.stats.latest(box.id);
    const running = box.state === "running";
    setText(this.cells.cpu, running && sample?.cpuPercent != null ? percent(sample.cpuPercent) : "–");
    setText(
      this.cells.memory,
      `${running && stats ? bytes(stats.memory.bytes) : "–"} (box ${box.memory_mib} MiB)`,
    );
    this.actions.update(box);
  }
}

export class ListView {
  readonly element: HTMLElement;
  private readonly body: HTMLTableSectionElement;
  private readonly empty: HTMLElement;
  private readonly count: HTMLElement;
  private readonly rows = new Map<string, BoxRow>();
  private readonly poller: Poller;
  private readonly unsubscribe: () => void;
  private boxes: Box[] = [];
  private lastStats = new Map<string, BoxStats>();
  private templates: Template[] | undefined;

  constructor(private readonly ctx: Context) {
    this.body = h("tbody");
    this.empty = h(
      "p",
      { class: "empty", hidden: true },
      "No boxes yet. Make one with New box, or with hutch run.",
    );
    this.count = h("span", { class: "count" });
    const table = h(
      "table",
      { class: "boxes", "aria-label": "Boxes" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ...["Name", "ID", "State", "Template", "Owner", "Age", "CPU", "Memory", "Actions"].map((c) =>
            h("th", { scope: "col", title: columnHelp[c] }, c),
          ),
        ),
      ),
      this.body,
    );
    this.element = h(
      "section",
      { class: "view", "aria-labelledby": "list-title" },
      h(
        "div",
        { class: "view-head" },
        h("h2", { id: "list-title" }, "Boxes"),
        this.count,
        h("button", { type: "button", onclick: () => void this.newBox() }, "New box"),
      ),
      h("div", { class: "table-wrap" }, table),
      this.empty,
    );
    this.unsubscribe = ctx.busy.onChange(() => this.render());
    this.poller = new Poller(() => this.poll(), kPollMs);
    this.poller.now();
  }

  refresh(): void {
    this.poller.now();
  }

  destroy(): void {
    this.poller.stop();
    this.unsubscribe();
  }

  private async poll(): Promise<void> {
    let boxes: Box[];
    try {
      boxes = await this.ctx.api.boxes();
    } catch (e) {
      report(this.ctx, "Cannot list the boxes", e);
      return;
    }
    const running = boxes.filter((b) => b.state === "running");
    const results = await Promise.allSettled(running.map((b) => this.ctx.api.stats(b.id)));
    const at = performance.now();
    const stats = new Map<string, BoxStats>();
    results.forEach((r, i) => {
      if (r.status === "fulfilled") {
        stats.set(running[i].id, r.value);
        this.ctx.stats.add(running[i].id, r.value, at);
      }
    });
    for (const b of boxes) if (b.state !== "running") this.ctx.stats.forget(b.id);
    this.ctx.stats.keepOnly(new Set(boxes.map((b) => b.id)));
    this.boxes = boxes;
    this.lastStats = stats;
    this.render();
  }

  private render(): void {
    const order = flatten(forkForest(this.boxes));
    const seen = new Set<string>();
    let previous: Element | null = null;
    for (const node of order) {
      const b = node.box;
      seen.add(b.id);
      let row = this.rows.get(b.id);
      if (!row) {
        row = new BoxRow(this.ctx, b);
        this.rows.set(b.id, row);
      }
      row.update(b, node.depth, this.lastStats.get(b.id));
      // In tree order; a row moves only when it is out of place.
      const want: Element | null = previous ? previous.nextElementSibling : this.body.firstElementChild;
      if (want !== row.element) this.body.insertBefore(row.element, want);
      previous = row.element;
    }
    for (const [id, row] of this.rows) {
      if (!seen.has(id)) {
        row.element.remove();
        this.rows.delete(id);
      }
    }
    this.empty.hidden = this.boxes.length > 0;
    const n = this.boxes.length;
    setText(this.count, `${n} ${n === 1 ? "box" : "boxes"}`);
  }

  private async newBox(): Promise<void> {
    if (!this.templates) {
      try {
        this.templates = await this.ctx.api.templates();
      } catch (e) {
        report(this.ctx, "Cannot list the templates", e);
        return;
      }
    }
    const names = this.templates.map((t) => t.name);
    const values = await formDialog(
      "New box",
      [
        { name: "name", label: "Name (optional)", placeholder: "a generated name" },
        { name: "template", label: "Template", options: names.length ? names : ["base"], value: names.includes("base") ? "base" : names[0] },
        { name: "cpus", label: "CPUs", type: "number", value: "1", min: 1, max: 64 },
        { name: "memory_mib", label: "Memory (MiB)", type: "number", value: "512", min: 128, max: 65536 },
      ],
      "Create",
    );
    if (!values) return;
    const pending = `new-${Date.now()}`;
    this.ctx.notices.info(`Creating ${values.name || "a box"} from ${values.template}…`);
    this.ctx.busy.set(pending, "creating");
    try {
      const box = await this.ctx.api.createBox({
        name: values.name || undefined,
        template: values.template || undefined,
        cpus: Number(values.cpus) || undefined,
        memory_mib: Number(values.memory_mib) || undefined,
      });
      this.ctx.notices.info(`Created ${box.name}`);
    } catch (e) {
      report(this.ctx, "Cannot create the box", e);
    } finally {
      this.ctx.busy.set(pending, undefined);
      this.poller.now();
    }
  }
}
