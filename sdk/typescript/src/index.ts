// @hutch/sdk: the TypeScript client of hutchd (docs/api.md).

export { Client, Boxes, Secrets, Registries, Keys, SystemApi } from "./client.js";
export type { SetSecretOptions, CreateKeyOptions } from "./client.js";
export { Templates } from "./templates.js";
export type { BuildOptions, ProgressOptions, ArchiveOptions, ArchiveInput } from "./templates.js";
export { Box, Ports, PolicyApi, Processes } from "./box.js";
export type { CreateBoxOptions, ExecOptions, ForkOptions, PublishOptions, PolicyLog } from "./box.js";
export { Files } from "./files.js";
export type {
  UserOption,
  ReadOptions,
  WriteOptions,
  ListOptions,
  FileList,
  MkdirOptions,
  MkdirResult,
  MoveOptions,
  RemoveOptions,
  UploadResult,
  DownloadResult,
  FileStream,
} from "./files.js";
export { ExecHandle, Pty } from "./handles.js";
export type { OutputCallback, StdinInput, SpawnOptions, PtyOptions, Exit } from "./handles.js";
export type { Command, ExecResult, ExecError } from "./exec.js";
export type { ClientOptions } from "./config.js";
export { defaultSocketPath } from "./config.js";
export type { Size } from "./units.js";
export type { Signal, SignalName } from "./signals.js";
export { linuxSignals } from "./signals.js";
export * from "./errors.js";
export type * from "./models.js";
export { sdkVersion } from "./transport.js";
