// Shared by the suites: the MCP SDK's own client against the hutchd that run.sh started.
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

export const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run the suites with tests/mcp/run.sh`);
  return value;
};

export const MCP_URL = () => env("HUTCH_MCP_URL");
export const KEY_A = () => env("HUTCH_MCP_KEY_A");
export const KEY_B = () => env("HUTCH_MCP_KEY_B");
export const SOCKET = () => env("HUTCH_MCP_SOCKET");
export const HUTCH = () => env("HUTCH_MCP_CLI");
export const HTTP_URL = () => env("HUTCH_MCP_HTTP_URL");

// A box name unique to this run.
let counter = 0;
export const boxName = (what) => `mcp-${what}-${process.pid}-${++counter}`;

// Boot and commands under TCG take seconds; a create may make the template snapshot first.
export const LONG = { timeout: 300_000 };

export async function httpClient(key = KEY_A()) {
  const client = new Client({ name: "hutch-tests", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(MCP_URL()), {
    requestInit: { headers: { Authorization: `Bearer ${key}` } },
  });
  await client.connect(transport);
  return client;
}

// `hutch mcp` as an MCP client starts it: over the unix socket (the host administrator), or
// with extra arguments and environment (--host and a key).
export async function stdioClient({ args = ["--socket", SOCKET()], env: extra = {} } = {}) {
  const client = new Client({ name: "hutch-tests-stdio", version: "1.0.0" });
  const transport = new StdioClientTransport({
    command: HUTCH(),
    args: [...args, "mcp"],
    env: { PATH: process.env.PATH, ...extra },
    stderr: "pipe",
  });
  await client.connect(transport);
  return client;
}

// Calls a tool; its structuredContent (checked against the text content, which carries the
// same JSON after any note).
export async function call(client, name, args = {}, { expectError = false } = {}) {
  const result = await client.callTool({ name, arguments: args }, undefined, LONG);
  const text = result.content?.[0]?.text ?? "";
  assert.equal(result.content[0].type, "text");
  assert.equal(Boolean(result.isError), expectError, `${name}: ${text}`);
  const json = JSON.parse(text.slice(text.indexOf("{")));
  assert.deepEqual(result.structuredContent, json);
  return { ...json, _text: text };
}

export async function createBox(client, name) {
  const box = await call(client, "create_box", { name });
  assert.equal(box.name, name);
  assert.equal(box.state, "running");
  return box;
}
