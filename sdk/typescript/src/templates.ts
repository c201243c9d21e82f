// client.templates: list, remove, and make templates: recipe builds, frozen boxes, images pulled
// from a registry, image archives sent from here and Dockerfile builds (docs/templates.md). The
// long ones ask for NDJSON (Accept: application/x-ndjson) and hand each progress line to
// onProgress as it comes; their bodies (an archive, a build context) are streamed, never held
// whole in memory.

import { createReadStream } from "node:fs";
import { lstat, readdir, readFile, realpath, stat } from "node:fs/promises";
import type { IncomingMessage } from "node:http";
import * as path from "node:path";
import { Readable } from "node:stream";

import { Header, Pack } from "tar";

import type { Box } from "./box.js";
import { InvalidArgumentError, NotFoundError, UnavailableError, errorForCode } from "./errors.js";
import { type PolicyInput, type Template, policyToJson, templateFromJson } from "./models.js";
import { ndjson } from "./ndjson.js";
import { type BodyInput, type Query, type RequestSpec, type Transport, pathOf, readText } from "./transport.js";
import { type Size, sizeToMib } from "./units.js";
import { asObject, objects, parseJson, str } from "./wire.js";

export interface ProgressOptions {
  /** Each line of the build's, pull's or import's log as it comes. */
  onProgress?: (line: string) => void;
  abortSignal?: AbortSignal;
}

export interface BuildOptions extends ProgressOptions {
  /**
   * A Dockerfile build: the build context, a local directory, sent as a tar made while it is
   * sent (hutchd leaves out what its .dockerignore names). Without context, dockerfile and
   * dockerfileContent, build() builds hutch's recipe images/NAME on the host instead.
   */
  context?: string;
  /** The Dockerfile's local path (default CONTEXT/Dockerfile); it may be outside the context. */
  dockerfile?: string;
  /** The Dockerfile's text, instead of a path (with or without a context). */
  dockerfileContent?: string;
  /** ARG values. */
  buildArgs?: Record<string, string>;
  /** The stage to build (default the last). */
  target?: string;
  /** Run every step again, ignoring the build cache. */
  noCache?: boolean;
  /** A command started in the template's snapshot: every box of it starts with it running. */
  startCmd?: string;
  /** Polled until it exits 0 before the snapshot is taken. */
  readyCmd?: string;
  /** Egress of the RUN steps (default: the registries the host uses). */
  networkPolicy?: PolicyInput;
  /**
   * Host secrets (client.secrets.set) the RUN steps may use, as a box's: none reaches the
   * template, and such a build caches no step.
   */
  secrets?: string[];
  /** The build box's size (default 2 vCPUs, 1024 MiB, an 8 GiB disk). */
  cpus?: number;
  memory?: Size;
  disk?: Size;
  /** Seconds each step may take (default an hour). */
  stepTimeoutS?: number;
}

export interface ImageOptions extends ProgressOptions {
  /**
   * Boot the image's own systemd as PID 1, with hutch-agent as its service, as hutch's systemd
   * template does; an image without systemd is refused.
   */
  systemd?: boolean;
}

export interface ArchiveOptions extends ImageOptions {
  /** Of an archive holding several images, the one to use: a tag, or "@N". */
  image?: string;
}

function checkSystemd(options: ImageOptions): boolean {
  if (options.systemd !== undefined && typeof options.systemd !== "boolean") {
    throw new InvalidArgumentError(`systemd is true or false, got ${JSON.stringify(options.systemd)}`);
  }
  return options.systemd === true;
}

/**
 * An image archive: a local path (a `docker save` tar or an OCI archive, plain or compressed,
 * or an OCI image layout directory), bytes, a Node stream or an async iterable of chunks.
 */
export type ArchiveInput = string | Uint8Array | NodeJS.ReadableStream | AsyncIterable<Uint8Array | string>;

/** The name a Dockerfile from outside the context (or given as text) gets in the tar, as the CLI names it. */
export const outsideDockerfile = ".hutch-dockerfile";

const dockerfileOptions = [
  "context",
  "dockerfile",
  "dockerfileContent",
  "buildArgs",
  "target",
  "noCache",
  "startCmd",
  "readyCmd",
  "networkPolicy",
  "secrets",
  "cpus",
  "memory",
  "disk",
  "stepTimeoutS",
] as const;

export class Templates {
  /** @internal */
  constructor(private readonly transport: Transport) {}

  async list(): Promise<Template[]> {
    return this.transport.json({ method: "GET", path: "/v1/templates" }, (v) =>
      objects(asObject(v, "a template list"), "templates", "a template list").map(templateFromJson),
    );
  }

  async get(name: string): Promise<Template> {
    const found = (await this.list()).find((t) => t.name === name);
    if (found === undefined) {
      throw new NotFoundError(`No template ${name}`);
    }
    return found;
  }

  /**
   * Builds template NAME (admin only), streaming the build's log to onProgress; resolves with the
   * template when it is done. With context, dockerfile or dockerfileContent it builds a
   * Dockerfile (POST /v1/builds, as `hutch template build NAME -f FILE CONTEXT`): every step
   * runs in a box on hutchd's host; a Dockerfile hutchd cannot read is an InvalidArgumentError
   * naming its line. Without them it builds the recipe images/NAME on the daemon's host.
   */
  async build(name: string, options: BuildOptions = {}): Promise<Template> {
    checkName(name);
    const known = new Set<string>([...dockerfileOptions, "onProgress", "abortSignal"]);
    for (const key of Object.keys(options)) {
      if (!known.has(key)) throw new InvalidArgumentError(`Unknown option '${key}' for a build; known: ${[...known].join(", ")}`);
    }
    const given = dockerfileOptions.filter((k) => options[k] !== undefined);
    if (options.context === undefined && options.dockerfile === undefined && options.dockerfileContent === undefined) {
      if (given.length > 0) {
        throw new InvalidArgumentError(
          `${given.join(", ")} apply to Dockerfile builds: give context, dockerfile or dockerfileContent ` +
            `(without them, build() builds recipe images/${name})`,
        );
      }
      return this.stream(`The build of template ${name}`, options, {
        method: "POST",
        path: "/v1/templates",
        json: { name },
      });
    }
    const plan = await planContext(options);
    const query = buildQuery(name, plan.dockerfile, options);
    return this.stream(`The build of template ${name}`, options, {
      method: "POST",
      path: "/v1/builds",
      query,
      body: plan.stream(),
      contentType: "application/x-tar",
    });
  }

  /**
   * Pulls an OCI or Docker image from a registry hutchd reaches as template NAME (admin only):
   * "python:3.12-slim", "registry.example:5000/team/app:1", "NAME@sha256:...". Credentials are
   * the host's (`hutch registry login`). Resolves with the template once it is made.
   */
  async createFromImage(name: string, image: string, options: ImageOptions = {}): Promise<Template> {
    checkName(name);
    if (typeof image !== "string" || image.trim() === "") {
      throw new InvalidArgumentError(`An image reference such as "python:3.12-slim" is needed, got ${JSON.stringify(image)}`);
    }
    const json: Record<string, unknown> = { name, from_image: image };
    if (checkSystemd(options)) json.systemd = true;
    return this.stream(`The pull of ${image} as template ${name}`, options, {
      method: "POST",
      path: "/v1/templates",
      json,
    });
  }

  /**
   * Makes template NAME of an image archive sent from here, streamed (admin only): a path to a
   * `docker save` tar or an OCI archive (plain or compressed) or an OCI image layout directory,
   * or the archive's bytes as a Uint8Array, a stream or an async iterable.
   */
  async createFromArchive(name: string, archive: ArchiveInput, options: ArchiveOptions = {}): Promise<Template> {
    checkName(name);
    if (options.image !== undefined && (typeof options.image !== "string" || options.image === "")) {
      throw new InvalidArgumentError('image names one image of the archive: a tag, or "@N"');
    }
    const systemd = checkSystemd(options);
    const { body, length } = await archiveBody(archive);
    const query: Query = { image: options.image, systemd: systemd ? "true" : undefined };
    return this.stream(`The import of the archive as template ${name}`, options, {
      method: "POST",
      path: pathOf`/v1/templates/${name}/archive`,
      query,
      body,
      contentType: "application/x-tar",
      contentLength: length,
    });
  }

  /** Freezes a stopped box as a template (admin only). */
  async createFromBox(name: string, box: string | Box): Promise<Template> {
    const fromBox = typeof box === "string" ? box : box.id;
    return this.transport.json({ method: "POST", path: "/v1/templates", json: { name, from_box: fromBox } }, templateFromJson);
  }

  /** Removes a template no box uses (admin only). */
  async remove(name: string): Promise<void> {
    await this.transport.json({ method: "DELETE", path: pathOf`/v1/templates/${name}` }, (v) => asObject(v, "a template removal"));
  }

  // Sends a template creation asking for NDJSON and reads it: progress lines, then the template
  // or the error (as the SDK's error class of its code).
  private async stream(what: string, options: ProgressOptions, spec: Omit<RequestSpec, "accept" | "signal">): Promise<Template> {
    const res: IncomingMessage = await this.transport.send({ ...spec, accept: "application/x-ndjson", signal: options.abortSignal });
    const type = String(res.headers["content-type"] ?? "");
    try {
      if (!type.includes("ndjson")) {
        // A daemon that answers when done (no stream): the body is the Template.
        return templateFromJson(parseJson(await readText(res), "a template"));
      }
      for await (const line of ndjson(res, "a template build line")) {
        const o = asObject(line, "a template build line");
        if (typeof o["progress"] === "string") {
          options.onProgress?.(o["progress"]);
        } else if (o["template"] !== undefined) {
          return templateFromJson(o["template"]);
        } else if (o["error"] !== undefined) {
          const e = asObject(o["error"], "a template build error");
          throw errorForCode(str(e, "code", "a build error", "internal"), str(e, "message", "a build error"));
        }
      }
    } catch (e) {
      throw this.transport.connectionError(e);
    }
    throw new UnavailableError(`${what} ended without a result (the connection closed)`);
  }
}

function checkName(name: string): void {
  if (typeof name !== "string" || name === "") throw new InvalidArgumentError("A template needs a non-empty name");
}

/** The query of POST /v1/builds (the body is the context's tar). */
export function buildQuery(name: string, dockerfile: string, o: BuildOptions): Query {
  const query: Query = { name, dockerfile };
  if (o.buildArgs !== undefined) {
    if (typeof o.buildArgs !== "object" || o.buildArgs === null || Array.isArray(o.buildArgs)) {
      throw new InvalidArgumentError("buildArgs is an object of ARG names to string values");
    }
    for (const [k, v] of Object.entries(o.buildArgs)) {
      if (k === "" || typeof v !== "string") throw new InvalidArgumentError(`buildArgs maps names to strings; ${k} is ${typeof v}`);
    }
    query["build_args"] = JSON.stringify(o.buildArgs);
  }
  for (const [key, value] of [
    ["target", o.target],
    ["start_cmd", o.startCmd],
    ["ready_cmd", o.readyCmd],
  ] as const) {
    if (value === undefined) continue;
    if (typeof value !== "string" || value === "") throw new InvalidArgumentError(`${key} is a non-empty string`);
    query[key] = value;
  }
  if (o.noCache === true) query["no_cache"] = "true";
  if (o.networkPolicy !== undefined) {
    const policy = policyToJson(o.networkPolicy);
    query["network_policy"] = typeof policy === "string" ? policy : JSON.stringify(policy);
  }
  if (o.secrets !== undefined) {
    if (!Array.isArray(o.secrets) || o.secrets.some((s) => typeof s !== "string" || s === "" || s.includes(","))) {
      throw new InvalidArgumentError("secrets is an array of secret names");
    }
    if (o.secrets.length > 0) query["secrets"] = o.secrets.join(",");
  }
  if (o.cpus !== undefined) {
    if (!Number.isInteger(o.cpus) || o.cpus < 1) throw new InvalidArgumentError(`cpus must be a whole number from 1, got ${o.cpus}`);
    query["cpus"] = o.cpus;
  }
  if (o.memory !== undefined) query["memory_mib"] = sizeToMib(o.memory, "memory");
  if (o.disk !== undefined) query["disk_mib"] = sizeToMib(o.disk, "disk");
  if (o.stepTimeoutS !== undefined) {
    if (!Number.isInteger(o.stepTimeoutS) || o.stepTimeoutS < 1) {
      throw new InvalidArgumentError(`stepTimeoutS must be a whole number of seconds from 1, got ${o.stepTimeoutS}`);
    }
    query["step_timeout_s"] = o.stepTimeoutS;
  }
  return query;
}

interface ContextPlan {
  /** The Dockerfile's name in the tar. */
  dockerfile: string;
  stream(): BodyInput;
}

// Checks a build's inputs here, before anything is sent, and says what to send, as the CLI
// does: the context's entries (hutchd applies .dockerignore itself) and the Dockerfile.
export async function planContext(o: BuildOptions): Promise<ContextPlan> {
  if (o.dockerfile !== undefined && o.dockerfileContent !== undefined) {
    throw new InvalidArgumentError("Give dockerfile (a path) or dockerfileContent (its text), not both");
  }
  let dir: string | undefined;
  if (o.context !== undefined) {
    if (typeof o.context !== "string" || o.context === "") throw new InvalidArgumentError("context is a local directory's path");
    const st = await stat(o.context).catch(() => undefined);
    if (st === undefined || !st.isDirectory()) {
      throw new InvalidArgumentError(
        `The build context ${o.context} ${st === undefined ? "does not exist" : "is not a directory"}: give a directory (or no context, with the Dockerfile alone)`,
      );
    }
    dir = path.resolve(o.context);
  }
  let extra: Buffer | undefined;
  let name = outsideDockerfile;
  if (o.dockerfileContent !== undefined) {
    if (typeof o.dockerfileContent !== "string" || o.dockerfileContent.trim() === "") {
      throw new InvalidArgumentError("dockerfileContent is empty");
    }
    extra = Buffer.from(o.dockerfileContent, "utf8");
  } else {
    const file = o.dockerfile ?? (dir !== undefined ? path.join(dir, "Dockerfile") : undefined);
    if (file === undefined) throw new InvalidArgumentError("A build needs a context directory, a dockerfile path or dockerfileContent");
    const st = await stat(file).catch(() => undefined);
    if (st === undefined || !st.isFile()) {
      throw new InvalidArgumentError(`${file}: no such Dockerfile${o.dockerfile === undefined ? " (give one with dockerfile)" : ""}`);
    }
    let inside: string | undefined;
    if (dir !== undefined) {
      const rel = path.relative(await realpath(dir), await realpath(file));
      if (rel !== "" && rel !== ".." && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel)) inside = rel;
    }
    if (inside !== undefined) {
      name = inside.split(path.sep).join("/");
    } else {
      if (st.size > 16 * 1024 * 1024) throw new InvalidArgumentError(`${file} is over 16 MiB: that is no Dockerfile`);
      extra = await readFile(file);
    }
  }
  const names = dir === undefined ? [] : (await readdir(dir)).sort();
  return {
    dockerfile: name,
    stream: () => contextTar(dir, names, extra === undefined ? undefined : { name, data: extra }),
  };
}

// The tar: the Dockerfile from outside first (if any), then the context's entries as node-tar
// packs them (symlinks as symlinks, portable: no owners), ending with its end blocks.
async function* contextTar(
  dir: string | undefined,
  names: string[],
  extra: { name: string; data: Buffer } | undefined,
): AsyncGenerator<Uint8Array> {
  if (extra !== undefined) {
    const header = new Header({
      path: extra.name,
      mode: 0o644,
      size: extra.data.length,
      mtime: new Date(),
      type: "File",
      uid: 0,
      gid: 0,
    });
    const block = Buffer.alloc(512);
    header.encode(block, 0);
    yield block;
    yield extra.data;
    const pad = (512 - (extra.data.length % 512)) % 512;
    if (pad > 0) yield Buffer.alloc(pad);
  }
  // Our own Dockerfile's name is ours: a context entry of that name is left out.
  const entries = names.filter((n) => extra === undefined || n !== extra.name);
  if (dir === undefined || entries.length === 0) {
    yield Buffer.alloc(1024);
    return;
  }
  // Pack.add, not tar.c: tar.c reads a name starting with '@' as an archive to include.
  const pack = new Pack({ cwd: dir, portable: true, follow: false });
  for (const n of entries) pack.add(n);
  pack.end();
  for await (const chunk of pack as unknown as AsyncIterable<Buffer>) yield chunk;
}

// An archive as a request body, streamed; a regular file's length is announced, so hutchd
// refuses one past its limit before it is sent.
async function archiveBody(archive: ArchiveInput): Promise<{ body: BodyInput; length?: number }> {
  if (typeof archive === "string") {
    const st = await lstat(archive).catch((e: NodeJS.ErrnoException) => {
      throw new InvalidArgumentError(`Cannot read the image archive ${archive}: ${e.message}`, { cause: e });
    });
    if (st.isDirectory()) {
      const index = await stat(path.join(archive, "index.json")).catch(() => undefined);
      if (index === undefined || !index.isFile()) {
        throw new InvalidArgumentError(
          `${archive} is a directory without index.json: give an OCI image layout, or a docker save archive as a file`,
        );
      }
      const pack = new Pack({ cwd: archive, portable: true, follow: false });
      for (const n of (await readdir(archive)).sort()) pack.add(n);
      pack.end();
      return { body: Readable.from(pack as unknown as AsyncIterable<Buffer>) };
    }
    const file = await stat(archive).catch(() => st);
    return { body: createReadStream(archive), length: file.isFile() ? file.size : undefined };
  }
  if (archive instanceof Uint8Array) return { body: archive };
  if (archive !== null && typeof archive === "object" && (Symbol.asyncIterator in archive || "pipe" in archive)) {
    return { body: archive };
  }
  throw new InvalidArgumentError("An archive is a path, a Uint8Array, a stream or an async iterable of bytes");
}
