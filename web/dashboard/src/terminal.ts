// A terminal in a box: xterm.js over the streaming exec WebSocket (docs/api.md "Streaming: GET
// /v1/boxes/{box}/exec/ws"). The first message asks for the user's login shell on a PTY of the
// terminal's size; then binary messages carry bytes (first byte 0 stdin, 1 stdout, 2 stderr),
// text messages are JSON control messages (resize from us; started, exit, error from hutchd).

import { FitAddon } from "@xterm/addon-fit";
import { Terminal } from "@xterm/xterm";

import type { Api } from "./api";

export type TerminalState =
  | { kind: "connecting" }
  | { kind: "running"; pid: number }
  | { kind: "ended"; message: string };

const kStdin = 0;
const kStdout = 1;
const kStderr = 2;

export class BoxTerminal {
  readonly terminal: Terminal;
  private readonly fit = new FitAddon();
  private readonly socket: WebSocket;
  private readonly resizeObserver: ResizeObserver;
  private readonly encoder = new TextEncoder();
  private ended = false;

  constructor(
    container: HTMLElement,
    api: Api,
    boxId: string,
    private readonly onState: (state: TerminalState) => void,
  ) {
    this.terminal = new Terminal({
      cursorBlink: true,
      fontFamily: "ui-monospace, 'DejaVu Sans Mono', Menlo, Consolas, monospace",
      fontSize: 14,
      scrollback: 5000,
    });
    this.terminal.loadAddon(this.fit);
    this.terminal.open(container);
    this.fitNow();
    onState({ kind: "connecting" });

    this.socket = api.execSocket(boxId);
    this.socket.addEventListener("open", () => {
      this.socket.send(
        JSON.stringify({
          argv: [],
          login_shell: true,
          tty: true,
          stdin: true,
          rows: this.terminal.rows,
          cols: this.terminal.cols,
          env: { TERM: "xterm-256color" },
        }),
      );
    });
    this.socket.addEventListener("message", (ev: MessageEvent) => this.receive(ev.data));
    this.socket.addEventListener("close", (ev: CloseEvent) => {
      if (this.ended) return;
      // Refused before the upgrade (box not running, key refused): the browser says only 1006.
      const why = ev.reason ? `: ${ev.reason}` : ev.code === 1006 ? " (the connection was refused or lost)" : "";
      this.end(`Disconnected${why}`);
    });

    this.terminal.onData((data) => this.send(kStdin, this.encoder.encode(data)));
    this.terminal.onBinary((data) => {
      const bytes = new Uint8Array(data.length);
      for (let i = 0; i < data.length; i++) bytes[i] = data.charCodeAt(i) & 0xff;
      this.send(kStdin, bytes);
    });
    this.terminal.onResize(({ rows, cols }) => {
      if (this.socket.readyState === WebSocket.OPEN) {
        this.socket.send(JSON.stringify({ type: "resize", rows, cols }));
      }
    });
    this.resizeObserver = new ResizeObserver(() => this.fitNow());
    this.resizeObserver.observe(container);
  }

  focus(): void {
    this.terminal.focus();
  }

  // The whole buffer as text, one line per row (for tests and copying).
  text(): string {
    const buffer = this.terminal.buffer.active;
    const lines: string[] = [];
    for (let i = 0; i < buffer.length; i++) {
      lines.push(buffer.getLine(i)?.translateToString(true) ?? "");
    }
    return lines.join("\n");
  }

  // Closing the WebSocket ends the shell (hutchd kills it).
  dispose(): void {
    this.ended = true;
    this.resizeObserver.disconnect();
    if (this.socket.readyState === WebSocket.OPEN || this.socket.readyState === WebSocket.CONNECTING) {
      this.socket.close(1000, "closed by the dashboard");
    }
    this.terminal.dispose();
  }

  private fitNow(): void {
    try {
      this.fit.fit();
    } catch {
      // not laid out yet (hidden): the next resize fits it
    }
  }

  private send(channel: number, data: Uint8Array): void {
    if (this.socket.readyState !== WebSocket.OPEN || this.ended) return;
    const message = new Uint8Array(data.length + 1);
    message[0] = channel;
    message.set(data, 1);
    this.socket.send(message);
  }

  private receive(data: unknown): void {
    if (data instanceof ArrayBuffer) {
      const bytes = new Uint8Array(data);
      if (bytes.length > 0 && (bytes[0] === kStdout || bytes[0] === kStderr)) {
        this.terminal.write(bytes.subarray(1));
      }
      return;
    }
    if (typeof data !== "string") return;
    let message: { type?: string; pid?: number; exit_code?: number | null; signal?: number | null; code?: string; message?: string };
    try {
      message = JSON.parse(data);
    } catch {
      return;
    }
    if (message.type === "started") {
      this.onState({ kind: "running", pid: message.pid ?? 0 });
    } else if (message.type === "exit") {
      const how =
        message.signal !== null && message.signal !== undefined
          ? `killed by signal ${message.signal}`
          : `exited with code ${message.exit_code}`;
      this.end(`The shell ${how}`);
    } else if (message.type === "error") {
      this.end(`Error: ${message.message ?? message.code ?? "unknown"}`);
    }
  }

  private end(message: string): void {
    if (this.ended) return;
    this.ended = true;
    this.terminal.write(`\r\n\x1b[2m[${message}]\x1b[0m\r\n`);
    this.onState({ kind: "ended", message });
  }
}
