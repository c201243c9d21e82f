// The client: one connection to hutchd (unix socket, HTTP on loopback or HTTPS with a key) and
// the resources that are not a box's own.

import { Box, type CreateBoxOptions, createBoxRequest } from "./box.js";
import { type ClientOptions, resolveEndpoint } from "./config.js";
import { InvalidArgumentError, ProtocolError } from "./errors.js";
import {
  type ApiKey,
  type DiskUsage,
  type Info,
  type PoolStatus,
  type RegistryLogin,
  type Secret,
  boxInfoFromJson,
  diskUsageFromJson,
  infoFromJson,
  keyFromJson,
  poolFromJson,
  registryLoginFromJson,
  secretFromJson,
} from "./models.js";
import { Templates } from "./templates.js";
import { Transport, pathOf } from "./transport.js";
import { asObject, objects } from "./wire.js";

export class Boxes {
  /** @internal */
  constructor(private readonly client: Client) {}

  /** Boots a box; resolves once its guest agent answers. */
  async create(options: CreateBoxOptions & { client?: Client } = {}): Promise<Box> {
    const info = await this.client.transport.json(
      { method: "POST", path: "/v1/boxes", json: createBoxRequest(options) },
      boxInfoFromJson,
    );
    return new Box(this.client, info);
  }

  /** Every box the caller may see. */
  async list(): Promise<Box[]> {
    const infos = await this.client.transport.json({ method: "GET", path: "/v1/boxes" }, (v) =>
      objects(asObject(v, "a box list"), "boxes", "a box list").map(boxInfoFromJson),
    );
    return infos.map((info) => new Box(this.client, info));
  }

  /** A box by name, id or unique id prefix. */
  async get(box: string): Promise<Box> {
    if (typeof box !== "string" || box === "") throw new InvalidArgumentError("A box is named by its name, id or id prefix");
    const info = await this.client.transport.json({ method: "GET", path: pathOf`/v1/boxes/${box}` }, boxInfoFromJson);
    return new Box(this.client, info);
  }
}

export interface SetSecretOptions {
  /** The secret itself; it stays on the host. */
  value: string;
  /** Where the egress proxy may put it ("api.example.com", "*.example.com"). */
  domains: string[];
  /** The header it goes in (default Authorization). */
  header?: string;
  /** How it is written, e.g. "Bearer {value}". */
  format?: string;
}

export class Secrets {
  /** @internal */
  constructor(private readonly transport: Transport) {}

  /** Never the values. */
  async list(): Promise<Secret[]> {
    return this.transport.json({ method: "GET", path: "/v1/secrets" }, (v) =>
      objects(asObject(v, "a secret list"), "secrets", "a secret list").map(secretFromJson),
    );
  }

  async set(name: string, options: SetSecretOptions): Promise<Secret> {
    const body: Record<string, unknown> = { value: options.value, domains: options.domains };
    if (options.header !== undefined) body["header"] = options.header;
    if (options.format !== undefined) body["format"] = options.format;
    return this.transport.json({ method: "PUT", path: pathOf`/v1/secrets/${name}`, json: body }, secretFromJson);
  }

  async remove(name: string): Promise<void> {
    await this.transport.json({ method: "DELETE", path: pathOf`/v1/secrets/${name}` }, (v) => asObject(v, "a secret removal"));
  }
}

/** `client.registries`: credentials hutchd pulls images with (admin), as `docker login` keeps them; no box sees them. */
export class Registries {
  /** @internal */
  constructor(private readonly transport: Transport) {}

  /** Never the passwords. */
  async list(): Promise<RegistryLogin[]> {
    return this.transport.json({ method: "GET", path: "/v1/registries" }, (v) =>
      objects(asObject(v, "a registry list"), "registries", "a registry list").map(registryLoginFromJson),
    );
  }

  /** Keeps the credentials on the host for pulls from `registry` (host[:port] or docker.io); a second login replaces the first. */
  async login(registry: string, username: string, password: string): Promise<RegistryLogin> {
    if (!registry || !username || !password) {
      throw new InvalidArgumentError("registry, username and password are all needed");
    }
    return this.transport.json(
      { method: "PUT", path: pathOf`/v1/registries/${registry}`, json: { username, password } },
      registryLoginFromJson,
    );
  }

  async logout(registry: string): Promise<void> {
    await this.transport.json({ method: "DELETE", path: pathOf`/v1/registries/${registry}` }, (v) =>
      asObject(v, "a registry logout"),
    );
  }
}

export interface CreateKeyOptions {
  /** 1-63 characters of [a-zA-Z0-9_.-]. */
  name: string;
  admin?: boolean;
  /** 0 or absent: no limit. */
  maxBoxes?: number;
  maxCpus?: number;
  maxMemoryMib?: number;
  maxDiskMib?: number;
}

/** API keys (the host administrator and admin keys only). */
export class Keys {
  /** @internal */
  constructor(private readonly transport: Transport) {}

  async list(): Promise<ApiKey[]> {
    return this.transport.json({ method: "GET", path: "/v1/keys" }, (v) =>
      objects(asObject(v, "a key list"), "keys", "a key list").map(keyFromJson),
    );
  }

  /** Makes a key; the answer's `key` is the secret, shown this once. */
  async create(options: CreateKeyOptions): Promise<ApiKey & { key: string }> {
    const body: Record<string, unknown> = { name: options.name };
    if (options.admin !== undefined) body["admin"] = options.admin;
    if (options.maxBoxes !== undefined) body["max_boxes"] = options.maxBoxes;
    if (options.maxCpus !== undefined) body["max_cpus"] = options.maxCpus;
    if (options.maxMemoryMib !== undefined) body["max_memory_mib"] = options.maxMemoryMib;
    if (options.maxDiskMib !== undefined) body["max_disk_mib"] = options.maxDiskMib;
    const key = await this.transport.json({ method: "POST", path: "/v1/keys", json: body }, keyFromJson);
    if (key.key === undefined) {
      throw new ProtocolError("hutchd made the key but its answer has no 'key'");
    }
    return key as ApiKey & { key: string };
  }

  /** Removes a key; connections made with it are closed at once. */
  async remove(name: string): Promise<void> {
    await this.transport.json({ method: "DELETE", path: pathOf`/v1/keys/${name}` }, (v) => asObject(v, "a key removal"));
  }
}

export class SystemApi {
  /** @internal */
  constructor(private readonly transport: Transport) {}

  async df(): Promise<DiskUsage> {
    return this.transport.json({ method: "GET", path: "/v1/system/df" }, diskUsageFromJson);
  }

  async pool(): Promise<PoolStatus[]> {
    return this.transport.json({ method: "GET", path: "/v1/system/pool" }, (v) =>
      objects(asObject(v, "a pool list"), "pools", "a pool list").map(poolFromJson),
    );
  }
}

export class Client {
  /** @internal */
  readonly transport: Transport;
  readonly boxes: Boxes;
  readonly templates: Templates;
  readonly secrets: Secrets;
  readonly registries: Registries;
  readonly keys: Keys;
  readonly system: SystemApi;

  /**
   * With no options: HUTCH_HOST (and HUTCH_API_KEY, HUTCH_CA_CERT, HUTCH_FINGERPRINT) if set,
   * else the unix socket HUTCH_SOCKET (default /run/hutch/hutchd.sock).
   */
  constructor(options: ClientOptions = {}) {
    this.transport = new Transport(resolveEndpoint(options));
    this.boxes = new Boxes(this);
    this.templates = new Templates(this.transport);
    this.secrets = new Secrets(this.transport);
    this.registries = new Registries(this.transport);
    this.keys = new Keys(this.transport);
    this.system = new SystemApi(this.transport);
  }

  /** Where this client connects: "unix:/run/hutch/hutchd.sock", "https://host:8443". */
  get endpoint(): string {
    return this.transport.where;
  }

  /** The daemon: version, backend, acceleration, TLS fingerprint, listeners, who you are. */
  async info(): Promise<Info> {
    return this.transport.json({ method: "GET", path: "/v1/info" }, infoFromJson);
  }

  /** The OpenAPI document hutchd serves. */
  async openapi(): Promise<Record<string, unknown>> {
    return this.transport.json({ method: "GET", path: "/v1/openapi.json" }, (v) => asObject(v, "the OpenAPI document"));
  }

  /** Closes idle connections (the process can then exit without waiting for them). */
  close(): void {
    this.transport.close();
  }
}
