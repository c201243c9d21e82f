// What every view shares: the API client, messages to the user, which boxes have an operation
// under way, the usage history, and a way to poll again at once.

import { Api, ApiError } from "./api";
import { h, clear } from "./dom";
import { StatsHistory } from "./stats";

export class Notices {
  private readonly status: HTMLElement;
  private readonly alerts: HTMLElement;
  readonly element: HTMLElement;

  constructor() {
    this.status = h("div", { class: "notices", role: "status", "aria-live": "polite" });
    this.alerts = h("div", { class: "notices", role: "alert" });
    this.element = h("div", { class: "notice-area" }, this.alerts, this.status);
  }

  info(text: string): void {
    const item = h("p", { class: "notice" }, text);
    this.status.append(item);
    while (this.status.childElementCount > 3) this.status.firstElementChild?.remove();
    window.setTimeout(() => item.remove(), 15000);
  }

  error(text: string): void {
    const item = h("p", { class: "notice error" });
    const dismiss = h("button", { type: "button", class: "link", onclick: () => item.remove() }, "Dismiss");
    item.append(h("span", {}, text), " ", dismiss);
    this.alerts.append(item);
    while (this.alerts.childElementCount > 3) this.alerts.firstElementChild?.remove();
  }

  clearAll(): void {
    clear(this.status);
    clear(this.alerts);
  }
}

export class Busy {
  private readonly ops = new Map<string, string>();
  private readonly listeners = new Set<() => void>();

  get(boxId: string): string | undefined {
    return this.ops.get(boxId);
  }
  set(boxId: string, what: string | undefined): void {
    if (what === undefined) this.ops.delete(boxId);
    else this.ops.set(boxId, what);
    for (const l of this.listeners) l();
  }
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

export interface Context {
  api: Api;
  // The key is an admin key (GET /v1/info's caller): admin-only actions are offered.
  admin: boolean;
  notices: Notices;
  busy: Busy;
  stats: StatsHistory;
  // Polls the current view again now (after an operation changed something).
  refresh(): void;
  navigate(hash: string): void;
  // A 401 after login (the key was removed): back to the login form with this message.
  unauthenticated(error: ApiError): void;
}

// Reports an error of a call: a 401 logs out; anything else is shown.
export function report(ctx: Context, what: string, e: unknown): void {
  if (e instanceof ApiError && e.status === 401) {
    ctx.unauthenticated(e);
    return;
  }
  const message = e instanceof Error ? e.message : String(e);
  ctx.notices.error(`${what}: ${message}`);
}

// Runs `fn` every `ms` milliseconds, never two at once, not while the tab is hidden; `now()`
// runs it at once (and restarts the interval).
export class Poller {
  private timer: number | undefined;
  private running = false;
  private again = false;
  private stopped = false;
  private readonly onVisible = () => {
    if (!document.hidden) this.now();
  };

  constructor(
    private readonly fn: () => Promise<void>,
    private readonly ms: number,
  ) {
    document.addEventListener("visibilitychange", this.onVisible);
  }

  now(): void {
    if (this.stopped) return;
    window.clearTimeout(this.timer);
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    this.fn()
      .catch(() => undefined)
      .finally(() => {
        this.running = false;
        if (this.stopped) return;
        if (this.again) {
          this.again = false;
          this.now();
          return;
        }
        this.timer = window.setTimeout(() => {
          if (!document.hidden) this.now();
        }, this.ms);
      });
  }

  stop(): void {
    this.stopped = true;
    window.clearTimeout(this.timer);
    document.removeEventListener("visibilitychange", this.onVisible);
  }
}
