// One box: its details and operations, usage charts, a terminal, checkpoints, forks, published
// ports, the serial console and the egress policy log.

import { ActionBar } from "./actions";
import { ApiError, type Box, type Checkpoint, type PolicyLogEntry, type Port } from "./api";
import { type Context, Poller, report } from "./context";
import { confirmDialog } from "./dialogs";
import { button, clear, h, setText } from "./dom";
import { forkForest, forkParentName, treeOf, type TreeNode } from "./forks";
import { age, bytes, dateTime, ownerName, percent, time } from "./format";
import { Sparkline } from "./sparkline";
import { BoxTerminal, type TerminalState } from "./terminal";

const kPollMs = 3000;
const kConsoleShown = 200_000; // characters of the console's end that are shown
const kPolicyRows = 500;

function section(id: string, title: string, ...children: (Node | string)[]): HTMLElement {
  return h("section", { class: "panel", "aria-labelledby": id }, h("h3", { id }, title), ...children);
}

export class BoxView {
  readonly element: HTMLElement;
  private box: Box | undefined;
  private gone = false;
  private readonly poller: Poller;
  private readonly unsubscribe: () => void;

  private readonly title = h("h2", { id: "box-title" });
  private readonly state = h("span", { class: "state badge" });
  private readonly actionSlot = h("div");
  private actions: ActionBar | undefined;
  private readonly details = h("dl", { class: "details" });

  private readonly cpuChart = new Sparkline("CPU");
  private readonly memChart = new Sparkline("Memory");
  private readonly cpuText = h("span", { class: "num" });
  private readonly memText = h("span", { class: "num" });

  private readonly termContainer = h("div", { class: "terminal", hidden: true });
  private readonly termStatus = h("span", { class: "term-status", role: "status" });
  private readonly termOpen: HTMLButtonElement;
  private readonly termClose: HTMLButtonElement;
  private terminal: BoxTerminal | undefined;

  private readonly checkpointBody = h("tbody");
  private readonly checkpointEmpty = h("p", { class: "empty" }, "No checkpoints.");
  private readonly checkpointName = h("input", { id: "checkpoint-name", name: "checkpoint-name", placeholder: "a generated name" });
  private checkpointKey = "";

  private readonly forkTree = h("div", { class: "fork-tree" });
  private forkKey = "";

  private readonly portBody = h("tbody");
  private readonly portEmpty = h("p", { class: "empty" }, "No published ports.");
  private portKey = "";

  private readonly console = h("pre", { class: "console", tabindex: 0, "aria-label": "Console log" });
  private readonly policyBody = h("tbody");
  private readonly policyNote = h("p", { class: "empty" }, "Nothing reached or refused yet.");
  private policyNext = 0;
  private policyUnsupported = false;

  constructor(
    private readonly ctx: Context,
    private readonly boxId: string,
  ) {
    this.termOpen = button("Open terminal", () => this.openTerminal());
    this.termClose = button("Close terminal", () => this.closeTerminal(), { hidden: true });
    const checkpointForm = h(
      "form",
      { class: "inline-form", onsubmit: (e: Event) => { e.preventDefault(); void this.createCheckpoint(); } },
      h("label", { for: "checkpoint-name" }, "Checkpoint name (optional)"),
      this.checkpointName,
      h("button", { type: "submit" }, "Create checkpoint"),
    );
    this.element = h(
      "article",
      { class: "view", "aria-labelledby": "box-title" },
      h("p", {}, h("a", { href: "#/" }, "← All boxes")),
      h("div", { class: "view-head" }, this.title, this.state),
      this.actionSlot,
      this.details,
      section(
        "usage-title",
        "Usage",
        h(
          "div",
          { class: "charts" },
          h("figure", {}, this.cpuChart.element, h("figcaption", {}, "CPU ", this.cpuText)),
          h("figure", {}, this.memChart.element, h("figcaption", {}, "Memory ", this.memText)),
        ),
      ),
      section(
        "terminal-title",
        "Terminal",
        h("div", { class: "toolbar" }, this.termOpen, this.termClose, this.termStatus),
        this.termContainer,
      ),
      section(
        "checkpoints-title",
        "Checkpoints",
        checkpointForm,
        h(
          "table",
          { "aria-label": "Checkpoints" },
          h("thead", {}, h("tr", {}, ...["Name", "ID", "Size", "Created", "Actions"].map((c) => h("th", { scope: "col" }, c)))),
          this.checkpointBody,
        ),
        this.checkpointEmpty,
      ),
      section(
        "forks-title",
        "Forks",
        h(
          "p",
          { class: "hint" },
          "Forks known from each box's boot record (hutchd has no parent field yet): a fork that was stopped and started again no longer shows under its parent.",
        ),
        this.forkTree,
      ),
      section(
        "ports-title",
        "Published ports",
        h(
          "table",
          { "aria-label": "Published ports" },
          h("thead", {}, h("tr", {}, ...["Host", "Box port", "Listening", "Connections", "Actions"].map((c) => h("th", { scope: "col" }, c)))),
          this.portBody,
        ),
        this.portEmpty,
      ),
      section(
        "console-title",
        "Console log",
        h("div", { class: "toolbar" }, button("Refresh console log", () => void this.loadConsole())),
        this.console,
      ),
      section(
        "policy-title",
        "Policy log",
        h(
          "table",
          { "aria-label": "Policy log" },
          h("thead", {}, h("tr", {}, ...["Time", "Protocol", "Destination", "Decision", "Up", "Down", "Reason"].map((c) => h("th", { scope: "col" }, c)))),
          this.policyBody,
        ),
        this.policyNote,
      ),
    );
    this.unsubscribe = ctx.busy.onChange(() => this.renderHead());
    this.poller = new Poller(() => this.poll(), kPollMs);
    this.poller.now();
    void this.loadConsole();
  }

  refresh(): void {
    this.poller.now();
  }

  destroy(): void {
    this.poller.stop();
    this.unsubscribe();
    this.closeTerminal();
  }

  // For tests and for copying: the terminal's buffer as text.
  terminalText(): string {
    return this.terminal ? this.terminal.text() : "";
  }

  terminalSize(): { rows: number; cols: number } | null {
    return this.terminal ? { rows: this.terminal.terminal.rows, cols: this.terminal.terminal.cols } : null;
  }

  private async poll(): Promise<void> {
    if (this.gone) return;
    let box: Box;
    try {
      box = await this.ctx.api.box(this.boxId);
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) {
        this.markGone();
        return;
      }
      report(this.ctx, "Cannot read the box", e);
      return;
    }
    this.box = box;
    this.renderHead();
    const api = this.ctx.api;
    const running = box.state === "running";
    const [stats, checkpoints, ports, all, policy] = await Promise.allSettled([
      running ? api.stats(box.id) : Promise.reject(new Error("not running")),
      api.checkpoints(box.id),
      api.ports(box.id),
      api.boxes(),
      this.policyUnsupported ? Promise.reject(new Error("unsupported")) : api.policyLog(box.id, this.policyNext),
    ]);
    if (stats.status === "fulfilled") this.ctx.stats.add(box.id, stats.value, performance.now());
    else this.ctx.stats.forget(box.id);
    this.renderUsage(running, stats.status === "fulfilled" ? stats.value.memory.bytes : undefined);
    if (checkpoints.status === "fulfilled") this.renderCheckpoints(checkpoints.value);
    if (ports.status === "fulfilled") this.renderPorts(ports.value);
    if (all.status === "fulfilled") this.renderForks(all.value);
    if (policy.status === "fulfilled") {
      this.appendPolicy(policy.value.entries);
      this.policyNext = policy.value.next;
    } else if (policy.reason instanceof ApiError && policy.reason.code === "unsupported") {
      this.policyUnsupported = true;
      setText(this.policyNote, `No policy log: ${policy.reason.message}`);
    }
    for (const r of [checkpoints, ports, all]) {
      if (r.status === "rejected" && !(r.reason instanceof ApiError && r.reason.status === 404)) {
        report(this.ctx, "Cannot read the box's state", r.reason);
        break;
      }
    }
  }

  private markGone(): void {
    this.gone = true;
    this.closeTerminal();
    setText(this.title, this.box ? this.box.name : this.boxId);
    setText(this.state, "removed");
    this.state.dataset.state = "removed";
    clear(this.actionSlot);
    this.actionSlot.append(h("p", { class: "empty" }, "This box no longer exists."));
  }

  private renderHead(): void {
    const box = this.box;
    if (!box || this.gone) return;
    setText(this.title, box.name);
    document.title = `${box.name} · hutch`;
    const busy = this.ctx.busy.get(box.id);
    setText(this.state, busy ?? box.state);
    this.state.dataset.state = busy ? "busy" : box.state;
    if (!this.actions) {
      this.actions = new ActionBar(this.ctx, box, {
        onRemoved: () => this.ctx.navigate("#/"),
      });
      this.actionSlot.append(this.actions.element);
    }
    this.actions.update(box);
    const rows: [string, string][] = [
      ["ID", box.id],
      ["State", box.state + (box.reason ? ` (${box.reason})` : "")],
      ["Template", box.template],
      ["Owner", ownerName(box.owner)],
      ["CPUs", String(box.cpus)],
      ["Memory", `${box.memory_mib} MiB`],
      ["Disk", box.disk_mib ? `${box.disk_mib} MiB` : "the template's size"],
      ["Acceleration", box.accel],
      ["Boot", box.boot],
      ["Created", `${dateTime(box.created_at)} (${age(box.created_at)} ago)`],
      ["Secrets", box.secrets.length ? box.secrets.join(", ") : "none"],
      ["Environment", box.env && Object.keys(box.env).length ? Object.keys(box.env).join(", ") : "none"],
    ];
    if (this.details.childElementCount !== rows.length * 2) {
      clear(this.details);
      for (const [k] of rows) this.details.append(h("dt", {}, k), h("dd", {}));
    }
    rows.forEach(([, v], i) => setText(this.details.children[i * 2 + 1], v));
    const canOpen = box.state === "running";
    this.termOpen.disabled = !canOpen || this.terminal !== undefined;
    this.termOpen.title = canOpen ? "" : "The box must be running";
  }

  private renderUsage(running: boolean, memoryBytes: number | undefined): void {
    const history = this.ctx.stats.history(this.boxId);
    const cpu = history.map((s) => s.cpuPercent ?? 0);
    const mem = history.map((s) => s.memoryBytes);
    const last = history[history.length - 1];
    const cpuNow = running && last?.cpuPercent != null ? percent(last.cpuPercent) : "–";
    const limit = (this.box?.memory_mib ?? 0) * 1024 * 1024;
    const memNow = running && memoryBytes !== undefined ? bytes(memoryBytes) : "–";
    this.cpuChart.update(cpu, 100, `now ${cpuNow}, last ${cpu.length} samples, 100% is one host CPU`);
    this.memChart.update(mem, Math.max(last?.memoryMaxBytes ?? 0, limit), `now ${memNow}`);
    setText(this.cpuText, cpuNow);
    setText(this.memText, `${memNow} (VMM; the box has ${this.box?.memory_mib ?? "?"} MiB)`);
  }

  private renderCheckpoints(list: Checkpoint[]): void {
    const key = list.map((c) => `${c.id}:${c.name}`).join(",") + `|${this.box?.state}|${this.box?.name}`;
    if (key === this.checkpointKey) {
      // Ages only.
      list.forEach((c, i) => {
        const cell = this.checkpointBody.children[i]?.children[3];
        if (cell) setText(cell, `${age(c.created_at)} ago`);
      });
      return;
    }
    this.checkpointKey = key;
    clear(this.checkpointBody);
    for (const c of list) {
      this.checkpointBody.append(
        h(
          "tr",
          {},
          h("th", { scope: "row" }, c.name),
          h("td", { class: "mono" }, c.id),
          h("td", { class: "num" }, bytes(c.size_bytes)),
          h("td", {}, `${age(c.created_at)} ago`),
          h(
            "td",
            {},
            button("Roll back", () => void this.rollback(c), { "aria-label": `Roll back to ${c.name}` }),
            button("Remove", () => void this.removeCheckpoint(c), {
              class: "danger",
              "aria-label": `Remove checkpoint ${c.name}`,
            }),
          ),
        ),
      );
    }
    this.checkpointEmpty.hidden = list.length > 0;
  }

  private renderForks(all: Box[]): void {
    const tree = treeOf(forkForest(all), this.boxId);
    const key = JSON.stringify(tree ? this.treeKey(tree) : null);
    if (key === this.forkKey) return;
    this.forkKey = key;
    clear(this.forkTree);
    if (!tree || tree.children.length === 0) {
      const parent = this.box ? forkParentName(this.box) : undefined;
      this.forkTree.append(
        h(
          "p",
          { class: "empty" },
          parent ? `A fork of ${parent}, which no longer exists. No forks of its own.` : "No forks.",
        ),
      );
      return;
    }
    const render = (n: TreeNode): HTMLLIElement => {
      const current = n.box.id === this.boxId;
      const label = current
        ? h("strong", { "aria-current": "page" }, n.box.name)
        : h("a", { href: `#/boxes/${n.box.id}` }, n.box.name);
      const li = h("li", {}, label, h("span", { class: "muted" }, ` ${n.box.state}`));
      if (n.children.length) li.append(h("ul", {}, ...n.children.map(render)));
      return li;
    };
    this.forkTree.append(h("ul", { class: "tree", "aria-label": "Fork tree" }, render(tree)));
  }

  private treeKey(n: TreeNode): unknown {
    return [n.box.id, n.box.name, n.box.state, n.children.map((c) => this.treeKey(c))];
  }

  private renderPorts(list: Port[]): void {
    const key = JSON.stringify(list.map((p) => [p.address, p.host_port, p.box_port, p.listening, p.error, p.connections]));
    if (key === this.portKey) return;
    this.portKey = key;
    clear(this.portBody);
    for (const p of list) {
      const where = `${p.address}:${p.host_port}`;
      this.portBody.append(
        h(
          "tr",
          {},
          h("th", { scope: "row", class: "mono" }, where),
          h("td", { class: "num" }, String(p.box_port)),
          h("td", {}, p.listening ? "yes" : p.error ? `no: ${p.error}` : "no (the box is not running)"),
          h("td", { class: "num" }, `${p.connections} open, ${p.accepted} accepted`),
          h("td", {}, button("Unpublish", () => void this.unpublish(p), { "aria-label": `Unpublish ${where}` })),
        ),
      );
    }
    this.portEmpty.hidden = list.length > 0;
  }

  private appendPolicy(entries: PolicyLogEntry[]): void {
    for (const e of entries) {
      const dest = e.host ? `${e.host}:${e.port}` : `${e.address}${e.port ? `:${e.port}` : ""}`;
      this.policyBody.prepend(
        h(
          "tr",
          { "data-decision": e.decision },
          h("td", {}, time(e.time_ms)),
          h("td", {}, e.proto),
          h("td", { class: "mono" }, dest),
          h("td", { class: `decision ${e.decision}` }, e.decision),
          h("td", { class: "num" }, bytes(e.bytes_up)),
          h("td", { class: "num" }, bytes(e.bytes_down)),
          h("td", {}, e.reason + (e.secrets.length ? ` (secrets: ${e.secrets.join(", ")})` : "")),
        ),
      );
    }
    while (this.policyBody.childElementCount > kPolicyRows) this.policyBody.lastElementChild?.remove();
    this.policyNote.hidden = this.policyBody.childElementCount > 0;
  }

  private async loadConsole(): Promise<void> {
    try {
      const text = await this.ctx.api.logs(this.boxId);
      const shown = text.length > kConsoleShown ? `[…]\n${text.slice(-kConsoleShown)}` : text;
      setText(this.console, shown || "(empty)");
      this.console.scrollTop = this.console.scrollHeight;
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) return;
      report(this.ctx, "Cannot read the console log", e);
    }
  }

  private openTerminal(): void {
    if (this.terminal || !this.box) return;
    this.termContainer.hidden = false;
    this.termOpen.disabled = true;
    this.termClose.hidden = false;
    this.terminal = new BoxTerminal(this.termContainer, this.ctx.api, this.box.id, (s) => this.terminalState(s));
    this.terminal.focus();
  }

  private terminalState(s: TerminalState): void {
    if (s.kind === "connecting") setText(this.termStatus, "Connecting…");
    else if (s.kind === "running") setText(this.termStatus, `Connected (shell pid ${s.pid})`);
    else {
      // Close terminal (still shown) makes room for a new one.
      setText(this.termStatus, s.message);
    }
  }

  private closeTerminal(): void {
    this.terminal?.dispose();
    this.terminal = undefined;
    this.termContainer.hidden = true;
    this.termClose.hidden = true;
    setText(this.termStatus, "");
    this.termOpen.disabled = this.box?.state !== "running";
  }

  private async busy(what: string, op: () => Promise<void>, failure: string): Promise<void> {
    this.ctx.busy.set(this.boxId, what);
    try {
      await op();
    } catch (e) {
      report(this.ctx, failure, e);
    } finally {
      this.ctx.busy.set(this.boxId, undefined);
      this.poller.now();
    }
  }

  private async createCheckpoint(): Promise<void> {
    const name = this.checkpointName.value.trim();
    await this.busy("Checkpointing…", async () => {
      const cp = await this.ctx.api.checkpoint(this.boxId, name || undefined);
      this.checkpointName.value = "";
      this.ctx.notices.info(`Checkpoint ${cp.name} saved`);
    }, "Cannot make a checkpoint");
  }

  private async rollback(c: Checkpoint): Promise<void> {
    const name = this.box?.name ?? this.boxId;
    const ok = await confirmDialog(
      `Roll ${name} back to ${c.name}?`,
      `The box's disk and memory return to checkpoint ${c.name} (${age(c.created_at)} ago); what changed since is lost. Open terminals end.`,
      "Roll back",
    );
    if (!ok) return;
    this.closeTerminal();
    await this.busy("Rolling back…", async () => {
      await this.ctx.api.rollback(this.boxId, c.name);
      this.ctx.notices.info(`${name} rolled back to ${c.name}`);
    }, `Cannot roll back to ${c.name}`);
  }

  private async removeCheckpoint(c: Checkpoint): Promise<void> {
    const ok = await confirmDialog(`Remove checkpoint ${c.name}?`, `Checkpoint ${c.name} (${c.id}) is deleted.`, "Remove");
    if (!ok) return;
    await this.busy("Removing checkpoint…", async () => {
      await this.ctx.api.removeCheckpoint(this.boxId, c.name);
      this.ctx.notices.info(`Removed checkpoint ${c.name}`);
    }, `Cannot remove checkpoint ${c.name}`);
  }

  private async unpublish(p: Port): Promise<void> {
    try {
      await this.ctx.api.unpublishPort(this.boxId, p);
      this.ctx.notices.info(`Unpublished ${p.address}:${p.host_port}`);
    } catch (e) {
      report(this.ctx, "Cannot unpublish the port", e);
    }
    this.poller.now();
  }
}
