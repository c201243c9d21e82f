// hutch's dashboard: log in with an API key, then the box list (#/), box pages (#/boxes/ID) and
// the templates (#/templates).
// The key lives in sessionStorage: it is gone when the tab closes, and never leaves this origin
// except in the requests to hutchd itself.

import "@xterm/xterm/css/xterm.css";
import "./style.css";

import { Api, ApiError, apiBase, type Info } from "./api";
import { BoxView } from "./box_view";
import { Busy, type Context, Notices } from "./context";
import { clear, h, setText } from "./dom";
import { ListView } from "./list_view";
import { StatsHistory } from "./stats";
import { TemplatesView } from "./templates_view";

const kKeyItem = "hutch.apiKey";

interface View {
  element: HTMLElement;
  refresh(): void;
  destroy(): void;
}

class App {
  private readonly main = h("main", { id: "main" });
  private readonly notices = new Notices();
  private readonly who = h("span", { class: "who" });
  private readonly boxesLink = h("a", { href: "#/" }, "Boxes");
  private readonly templatesLink = h("a", { href: "#/templates" }, "Templates");
  private readonly logoutButton: HTMLButtonElement;
  private readonly header: HTMLElement;
  private ctx: Context | undefined;
  private view: View | undefined;
  private readonly onHash = () => this.route();

  constructor(root: HTMLElement) {
    this.logoutButton = h("button", { type: "button", onclick: () => this.logout() }, "Log out");
    this.header = h(
      "header",
      { class: "top" },
      h("h1", {}, h("a", { href: "#/" }, "hutch")),
      h("nav", { "aria-label": "Views" }, this.boxesLink, this.templatesLink),
      h("span", { class: "spacer" }),
      this.who,
      this.logoutButton,
    );
    root.append(this.header, this.notices.element, this.main);
  }

  async start(): Promise<void> {
    const key = sessionStorage.getItem(kKeyItem);
    if (!key) {
      this.showLogin();
      return;
    }
    const error = await this.login(key);
    if (error) this.showLogin(error);
  }

  // Checks the key against hutchd (GET /v1/info and GET /v1/boxes); the error to show, if any.
  private async login(key: string): Promise<string | undefined> {
    const api = new Api(key, apiBase(window.location));
    let info: Info;
    try {
      info = await api.info();
      await api.boxes();
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) {
        return `hutchd refused this key: ${e.message}`;
      }
      if (e instanceof ApiError && e.status === 429) return `Too many failed attempts: ${e.message}`;
      return `Cannot log in: ${e instanceof Error ? e.message : String(e)}`;
    }
    sessionStorage.setItem(kKeyItem, key);
    const caller = info.caller;
    setText(
      this.who,
      caller ? `Key ${caller.name || "(host)"}${caller.admin ? " (admin)" : ""} · hutchd ${info.version}, ${info.accel.name}` : "",
    );
    this.ctx = {
      api,
      admin: caller?.admin ?? false,
      notices: this.notices,
      busy: new Busy(),
      stats: new StatsHistory(),
      refresh: () => this.view?.refresh(),
      navigate: (hash) => {
        if (window.location.hash === hash) this.route();
        else window.location.hash = hash;
      },
      unauthenticated: (e) => this.logout(`Logged out: hutchd no longer accepts the key (${e.message})`),
    };
    this.header.hidden = false;
    window.addEventListener("hashchange", this.onHash);
    this.route();
    return undefined;
  }

  private logout(message?: string): void {
    sessionStorage.removeItem(kKeyItem);
    window.removeEventListener("hashchange", this.onHash);
    this.view?.destroy();
    this.view = undefined;
    this.ctx = undefined;
    this.notices.clearAll();
    this.showLogin(message);
  }

  private showLogin(error?: string): void {
    this.header.hidden = true;
    setText(this.who, "");
    document.title = "hutch";
    clear(this.main);
    const input = h("input", {
      id: "api-key",
      name: "api-key",
      type: "password",
      autocomplete: "off",
      spellcheck: "false",
      required: true,
      placeholder: "e2b_…",
    });
    const errorText = h("p", { class: "login-error", role: "alert" }, error ?? "");
    const submit = h("button", { type: "submit" }, "Log in");
    const form = h(
      "form",
      { class: "login", "aria-labelledby": "login-title" },
      h("h1", { id: "login-title" }, "hutch"),
      h("p", {}, "Paste an API key (hutch key create NAME makes one). It is kept in this tab only."),
      h("label", { for: "api-key" }, "API key"),
      input,
      submit,
      errorText,
    );
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const key = input.value.trim();
      if (!key) return;
      submit.disabled = true;
      setText(errorText, "");
      void this.login(key).then((failed) => {
        if (failed) {
          submit.disabled = false;
          setText(errorText, failed);
          input.select();
        }
      });
    });
    this.main.append(form);
    input.focus();
  }

  private route(): void {
    const ctx = this.ctx;
    if (!ctx) return;
    this.view?.destroy();
    clear(this.main);
    const m = /^#\/boxes\/([^/]+)$/.exec(window.location.hash);
    const onTemplates = window.location.hash === "#/templates";
    this.boxesLink.removeAttribute("aria-current");
    this.templatesLink.removeAttribute("aria-current");
    (onTemplates ? this.templatesLink : this.boxesLink).setAttribute("aria-current", "page");
    if (m) {
      this.view = new BoxView(ctx, decodeURIComponent(m[1]));
    } else if (onTemplates) {
      document.title = "Templates · hutch";
      this.view = new TemplatesView(ctx);
    } else {
      document.title = "Boxes · hutch";
      this.view = new ListView(ctx);
    }
    this.main.append(this.view.element);
  }

  // The open box page's terminal, as text and its size (for the browser tests; also handy in a
  // console).
  terminalText(): string {
    return this.view instanceof BoxView ? this.view.terminalText() : "";
  }

  terminalSize(): { rows: number; cols: number } | null {
    return this.view instanceof BoxView ? this.view.terminalSize() : null;
  }
}

declare global {
  interface Window {
    hutchDashboard?: { terminalText(): string; terminalSize(): { rows: number; cols: number } | null };
  }
}

const app = new App(document.getElementById("app") ?? document.body);
window.hutchDashboard = { terminalText: () => app.terminalText(), terminalSize: () => app.terminalSize() };
void app.start();
