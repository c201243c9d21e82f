// The operations on one box, as a row of buttons: start or stop, fork, checkpoint, publish a
// port, remove (confirmed). The same bar is in the box list and on the box page. Buttons are
// named after the box ("Stop dev") so that each is found by its role and name.

import type { Box } from "./api";
import { type Context, report } from "./context";
import { confirmDialog, formDialog } from "./dialogs";
import { h } from "./dom";

export interface ActionOptions {
  onRemoved?: (box: Box) => void;
  onForked?: (children: Box[]) => void;
}

export class ActionBar {
  readonly element: HTMLElement;
  private box: Box;
  private readonly start: HTMLButtonElement;
  private readonly stop: HTMLButtonElement;
  private readonly fork: HTMLButtonElement;
  private readonly checkpoint: HTMLButtonElement;
  private readonly publish: HTMLButtonElement;
  private readonly remove: HTMLButtonElement;

  constructor(
    private readonly ctx: Context,
    box: Box,
    private readonly options: ActionOptions = {},
  ) {
    this.box = box;
    const b = (text: string, run: () => Promise<void>, cls?: string) =>
      h("button", { type: "button", class: cls, onclick: () => void run() }, text);
    this.start = b("Start", () => this.run("Starting", "start", async () => {
      await ctx.api.start(this.box.id);
      ctx.notices.info(`Started ${this.box.name}`);
    }));
    this.stop = b("Stop", () => this.run("Stopping", "stop", async () => {
      await ctx.api.stop(this.box.id);
      ctx.notices.info(`Stopped ${this.box.name}`);
    }));
    this.fork = b("Fork", () => this.run("Forking", "fork", async () => {
      const children = await ctx.api.fork(this.box.id);
      ctx.notices.info(`Forked ${this.box.name}: ${children.map((c) => c.name).join(", ")}`);
      this.options.onForked?.(children);
    }));
    this.checkpoint = b("Checkpoint", () => this.run("Checkpointing", "checkpoint", async () => {
      const cp = await ctx.api.checkpoint(this.box.id);
      ctx.notices.info(`Checkpoint ${cp.name} of ${this.box.name} saved`);
    }));
    this.publish = b("Publish port", () => this.publishPort());
    this.remove = b("Remove", () => this.confirmRemove(), "danger");
    this.element = h(
      "div",
      { class: "actions", role: "group", "aria-label": `Actions for ${box.name}` },
      this.start,
      this.stop,
      this.fork,
      this.checkpoint,
      this.publish,
      this.remove,
    );
    this.update(box);
  }

  update(box: Box): void {
    this.box = box;
    const busy = this.ctx.busy.get(box.id) !== undefined;
    // A paused box is alive too: stop suspends it, and what it is asked wakes it.
    const running = box.state === "running" || box.state === "paused";
    const name = box.name;
    const set = (el: HTMLButtonElement, label: string, enabled: boolean, why = "") => {
      el.setAttribute("aria-label", `${label} ${name}`);
      el.disabled = busy || !enabled;
      if (why && !enabled) el.title = why;
      else el.removeAttribute("title");
    };
    this.start.hidden = running;
    this.stop.hidden = !running;
    set(this.start, "Start",
        box.state === "stopped" || box.state === "suspended" || box.state === "failed",
        "Only a stopped, suspended or failed box starts");
    set(this.stop, "Stop", running);
    set(this.fork, "Fork", running, "Only a running box forks");
    set(this.checkpoint, "Checkpoint", running, "Only a running box is checkpointed");
    set(this.publish, "Publish a port of", true);
    set(this.remove, "Remove", box.state !== "creating" && box.state !== "stopping");
  }

  private async run(doing: string, what: string, op: () => Promise<void>): Promise<void> {
    const id = this.box.id;
    this.ctx.busy.set(id, `${doing}…`);
    try {
      await op();
    } catch (e) {
      report(this.ctx, `Cannot ${what} ${this.box.name}`, e);
    } finally {
      this.ctx.busy.set(id, undefined);
      this.ctx.refresh();
    }
  }

  private async confirmRemove(): Promise<void> {
    const box = this.box;
    const running = box.state === "running" || box.state === "paused";
    const ok = await confirmDialog(
      `Remove ${box.name}?`,
      `Box ${box.name} (${box.id}) and its disk, checkpoints and published ports are deleted.` +
        (running ? " It is running: it is stopped first." : "") +
        " This cannot be undone.",
      "Remove",
    );
    if (!ok) return;
    await this.run("Removing", "remove", async () => {
      await this.ctx.api.remove(box.id, running);
      this.ctx.notices.info(`Removed ${box.name}`);
      this.options.onRemoved?.(box);
    });
  }

  private async publishPort(): Promise<void> {
    const box = this.box;
    const values = await formDialog(
      `Publish a port of ${box.name}`,
      [
        { name: "box_port", label: "Port in the box", type: "number", required: true, min: 1, max: 65535 },
        { name: "host_port", label: "Port on the host", type: "number", required: true, min: 1, max: 65535 },
        { name: "address", label: "Host address", value: "127.0.0.1" },
      ],
      "Publish",
    );
    if (!values) return;
    await this.run("Publishing", "publish a port of", async () => {
      const port = await this.ctx.api.publishPort(
        box.id,
        Number(values.host_port),
        Number(values.box_port),
        values.address || undefined,
      );
      this.ctx.notices.info(`${port.address}:${port.host_port} now reaches ${box.name}:${port.box_port}`);
    });
  }
}
