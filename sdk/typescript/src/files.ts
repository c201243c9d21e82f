// Files in a running box without exec: /v1/boxes/{box}/files (docs/api.md, "Files without
// exec"). Reads and writes stream; trees go as tar through /files/archive, packed from the disk
// and unpacked to it as the bytes pass, never held whole in memory.

import { lstat, mkdir as mkdirLocal, readdir } from "node:fs/promises";
import type { IncomingMessage } from "node:http";
import * as path from "node:path";
import { Readable } from "node:stream";

import { Pack, Unpack } from "tar";

import { InvalidArgumentError, ProtocolError } from "./errors.js";
import { type FileInfo, fileInfoFromJson } from "./models.js";
import { type BodyInput, type Transport, readText } from "./transport.js";
import { asObject, bool, num, objects, parseJson, str } from "./wire.js";

export interface UserOption {
  /** The box user the operation runs as (default the box's default user, `hutch`). */
  user?: string;
}

export interface ReadOptions extends UserOption {
  /** "text" (default, UTF-8), "bytes" (a Uint8Array) or "stream" (a Readable of the bytes). */
  format?: "text" | "bytes" | "stream";
}

export interface WriteOptions extends UserOption {
  /** Permission bits, as a number (0o644) or octal text ("0644"). */
  mode?: number | string;
  owner?: string;
  group?: string;
}

export interface ListOptions extends UserOption {
  /** Levels below the directory (1-32, default 1). */
  depth?: number;
}

export interface FileList {
  /** Sorted by path. */
  entries: FileInfo[];
  /** More than 10 000 entries: the rest were left out. */
  truncated: boolean;
}

export interface MkdirOptions extends UserOption {
  mode?: number | string;
  /** Make missing parents too (default true). */
  parents?: boolean;
}

export interface MkdirResult extends FileInfo {
  /** False when the directory was already there. */
  created: boolean;
}

export interface MoveOptions extends UserOption {
  overwrite?: boolean;
}

export interface RemoveOptions extends UserOption {
  /** Remove a directory and everything in it. */
  recursive?: boolean;
}

export interface UploadResult {
  /** The directory in the box. */
  path: string;
  /** Entries hutchd unpacked. */
  entries: number;
}

export interface DownloadResult {
  /** The local directory. */
  path: string;
  /** Entries written (files, directories, links). */
  entries: number;
}

/** A file read as a stream, with what the headers say about it. */
export interface FileStream extends Readable {
  /** Content-Length. */
  size: number | undefined;
  /** X-Hutch-File-Mode. */
  mode: number | undefined;
  /** X-Hutch-File-Mtime-Ns. */
  mtimeNs: bigint | undefined;
}

function modeText(mode: number | string, what: string): string {
  if (typeof mode === "number") {
    if (!Number.isInteger(mode) || mode < 0 || mode > 0o7777) {
      throw new InvalidArgumentError(`${what} must be permission bits 0 to 0o7777, got ${mode}`);
    }
    return `0${mode.toString(8)}`;
  }
  if (!/^0?[0-7]{3,4}$/.test(mode)) throw new InvalidArgumentError(`${what} '${mode}' is not octal permission bits such as "0644"`);
  return mode.startsWith("0") ? mode : `0${mode}`;
}

function modeNumber(mode: number | string, what: string): number {
  return Number.parseInt(modeText(mode, what), 8);
}

function checkPath(p: string, what = "path"): void {
  if (typeof p !== "string" || p === "") throw new InvalidArgumentError(`${what} must be a non-empty string`);
  if (p.includes("\0")) throw new InvalidArgumentError(`${what} contains a NUL byte`);
}

// Two 512-byte zero blocks: a tar archive with nothing in it (for an empty directory).
const emptyTar = new Uint8Array(1024);

/** X-Hutch-File-Mode: octal text ("0644") or a decimal number ("420"). */
function modeHeader(res: IncomingMessage): number | undefined {
  const v = res.headers["x-hutch-file-mode"];
  const text = (Array.isArray(v) ? v[0] : v)?.trim();
  if (text === undefined) return undefined;
  if (/^0[0-7]+$/.test(text)) return Number.parseInt(text, 8);
  if (/^\d+$/.test(text)) return Number(text);
  return undefined;
}

function headerNumber(res: IncomingMessage, name: string): string | undefined {
  const v = res.headers[name];
  const text = Array.isArray(v) ? v[0] : v;
  return text !== undefined && /^\d+$/.test(text.trim()) ? text.trim() : undefined;
}

export class Files {
  /** @internal Use box.files. */
  constructor(
    private readonly transport: Transport,
    private readonly base: () => string,
  ) {}

  private url(suffix: string): string {
    return `${this.base()}/files${suffix}`;
  }

  /** Reads a file: text by default, bytes or a stream with `format`. */
  read(path: string, options?: UserOption & { format?: "text" }): Promise<string>;
  read(path: string, options: UserOption & { format: "bytes" }): Promise<Uint8Array>;
  read(path: string, options: UserOption & { format: "stream" }): Promise<FileStream>;
  async read(path: string, options: ReadOptions = {}): Promise<string | Uint8Array | FileStream> {
    checkPath(path);
    const res = await this.transport.send({
      method: "GET",
      path: this.url(""),
      query: { path, user: options.user },
      accept: "application/octet-stream",
    });
    const format = options.format ?? "text";
    if (format === "stream") {
      const stream = res as unknown as FileStream;
      const size = headerNumber(res, "content-length");
      const mtime = headerNumber(res, "x-hutch-file-mtime-ns");
      stream.size = size === undefined ? undefined : Number(size);
      stream.mode = modeHeader(res);
      stream.mtimeNs = mtime === undefined ? undefined : BigInt(mtime);
      return stream;
    }
    const chunks: Buffer[] = [];
    try {
      for await (const chunk of res) chunks.push(chunk as Buffer);
    } catch (e) {
      throw this.transport.connectionError(e);
    }
    if (!res.complete) throw this.transport.connectionError(new Error("the connection closed before the whole file came"));
    const bytes = Buffer.concat(chunks);
    return format === "bytes" ? new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength) : bytes.toString("utf8");
  }

  /**
   * Writes a file (parents made); the new content replaces the old one only once it is all
   * there. `data` is text, bytes, a Readable or an async iterable of chunks (streamed).
   */
  async write(path: string, data: BodyInput, options: WriteOptions = {}): Promise<FileInfo> {
    checkPath(path);
    if (data === undefined || data === null) throw new InvalidArgumentError("write needs the data: text, bytes or a stream");
    return this.transport.json(
      {
        method: "PUT",
        path: this.url(""),
        query: {
          path,
          mode: options.mode === undefined ? undefined : modeText(options.mode, "mode"),
          owner: options.owner,
          group: options.group,
          user: options.user,
        },
        body: data,
        contentType: "application/octet-stream",
      },
      fileInfoFromJson,
    );
  }

  /** What is at `path` (a symlink itself, not its target). */
  async stat(path: string, options: UserOption = {}): Promise<FileInfo> {
    checkPath(path);
    return this.transport.json(
      { method: "GET", path: this.url("/stat"), query: { path, user: options.user } },
      fileInfoFromJson,
    );
  }

  /** Whether anything is at `path` (a stat that answers not_found is false). */
  async exists(path: string, options: UserOption = {}): Promise<boolean> {
    try {
      await this.stat(path, options);
      return true;
    } catch (e) {
      if ((e as { code?: string }).code === "not_found") return false;
      throw e;
    }
  }

  /** What is in a directory, down to `depth` levels. */
  async list(path: string, options: ListOptions = {}): Promise<FileList> {
    checkPath(path);
    if (options.depth !== undefined && (!Number.isInteger(options.depth) || options.depth < 1 || options.depth > 32)) {
      throw new InvalidArgumentError(`depth must be 1 to 32, got ${options.depth}`);
    }
    return this.transport.json(
      { method: "GET", path: this.url("/list"), query: { path, depth: options.depth, user: options.user } },
      (value) => {
        const o = asObject(value, "a file list");
        return {
          entries: objects(o, "entries", "a file list").map(fileInfoFromJson),
          truncated: bool(o, "truncated", "a file list"),
        };
      },
    );
  }

  /** Makes a directory (and its parents unless parents is false); fine if it is there. */
  async mkdir(path: string, options: MkdirOptions = {}): Promise<MkdirResult> {
    checkPath(path);
    const body: Record<string, unknown> = { path };
    if (options.mode !== undefined) body["mode"] = modeNumber(options.mode, "mode");
    if (options.parents !== undefined) body["parents"] = options.parents;
    if (options.user !== undefined) body["user"] = options.user;
    const res = await this.transport.send({ method: "POST", path: this.url("/mkdir"), json: body });
    const created = res.statusCode === 201;
    const text = await readText(res).catch((e) => {
      throw this.transport.connectionError(e);
    });
    const value = parseJson(text, "a mkdir answer");
    const info = fileInfoFromJson(value);
    const o = asObject(value, "a mkdir answer");
    return { ...info, created: o["created"] === undefined ? created : bool(o, "created", "a mkdir answer") };
  }

  /** Renames `from` to `to`; refused when `to` exists unless overwrite. */
  async move(from: string, to: string, options: MoveOptions = {}): Promise<FileInfo> {
    checkPath(from, "from");
    checkPath(to, "to");
    const body: Record<string, unknown> = { from, to };
    if (options.overwrite !== undefined) body["overwrite"] = options.overwrite;
    if (options.user !== undefined) body["user"] = options.user;
    return this.transport.json({ method: "POST", path: this.url("/move"), json: body }, fileInfoFromJson);
  }

  /** Removes a file, or a directory (an empty one, or any with recursive). */
  async remove(path: string, options: RemoveOptions = {}): Promise<void> {
    checkPath(path);
    await this.transport.json(
      {
        method: "DELETE",
        path: this.url(""),
        query: { path, recursive: options.recursive ? "true" : undefined, user: options.user },
      },
      (value) => asObject(value, "a remove answer"),
    );
  }

  /**
   * Copies a local directory into the box: afterwards `boxDir` (made if missing) holds what
   * `localDir` holds. Symlinks stay symlinks; the files belong to the box user.
   */
  async upload(localDir: string, boxDir: string, options: UserOption = {}): Promise<UploadResult> {
    checkPath(localDir, "localDir");
    checkPath(boxDir, "boxDir");
    const st = await lstat(localDir).catch((e: NodeJS.ErrnoException) => {
      throw new InvalidArgumentError(`Cannot read ${localDir}: ${e.message}`, { cause: e });
    });
    if (!st.isDirectory()) {
      throw new InvalidArgumentError(`${localDir} is not a directory; write a single file with files.write`);
    }
    const names = (await readdir(localDir)).sort();
    let body: BodyInput;
    if (names.length === 0) {
      body = emptyTar;
    } else {
      // Pack.add, not tar.c: tar.c reads a name starting with '@' as an archive to include.
      const pack = new Pack({ cwd: localDir, portable: true, follow: false });
      for (const name of names) pack.add(name);
      pack.end();
      body = Readable.from(pack as unknown as AsyncIterable<Buffer>);
    }
    return this.transport.json(
      {
        method: "PUT",
        path: this.url("/archive"),
        query: { path: boxDir, user: options.user },
        body,
        contentType: "application/x-tar",
      },
      (value) => {
        const o = asObject(value, "an archive upload answer");
        return { path: str(o, "path", "an archive upload answer"), entries: num(o, "entries", "an archive upload answer") };
      },
    );
  }

  /**
   * Copies a directory of the box to the local disk: afterwards `localDir` (made if missing)
   * holds what `boxDir` holds. Entries that would land outside localDir are refused.
   */
  async download(boxDir: string, localDir: string, options: UserOption = {}): Promise<DownloadResult> {
    checkPath(boxDir, "boxDir");
    checkPath(localDir, "localDir");
    const info = await this.stat(boxDir, options);
    if (info.type !== "dir") {
      throw new InvalidArgumentError(`${boxDir} in the box is a ${info.type}, not a directory; read a single file with files.read`);
    }
    await mkdirLocal(localDir, { recursive: true });
    const res = await this.transport.send({
      method: "GET",
      path: this.url("/archive"),
      query: { path: boxDir, user: options.user },
      accept: "application/x-tar",
    });
    let entries = 0;
    const unpack = new Unpack({
      cwd: path.resolve(localDir),
      // The archive has one top entry named after boxDir: its contents go into localDir.
      strip: 1,
      strict: true,
      preserveOwner: false,
    });
    unpack.on("entry", () => {
      entries++;
    });
    await new Promise<void>((resolve, reject) => {
      let failed = false;
      const fail = (e: unknown) => {
        if (failed) return;
        failed = true;
        res.destroy();
        reject(e instanceof Error && "code" in e && typeof e.code === "string" && e.code.startsWith("TAR_")
          ? new ProtocolError(`The archive of ${boxDir} could not be unpacked into ${localDir}: ${e.message}`, { cause: e })
          : this.transport.connectionError(e));
      };
      unpack.on("error", fail);
      res.on("error", fail);
      res.on("close", () => {
        if (!res.complete) fail(new Error("the connection closed before the whole archive came"));
      });
      unpack.on("finish", () => {
        if (!failed) resolve();
      });
      res.pipe(unpack as unknown as NodeJS.WritableStream);
    });
    // The top entry (boxDir itself) is stripped, not written.
    return { path: path.resolve(localDir), entries: Math.max(0, entries - 1) };
  }
}
