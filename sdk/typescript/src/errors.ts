// Errors: one class per API error code (docs/api.md, "Errors"), all subclasses of HutchError.
// `status` is the HTTP status hutchd answered, or 0 when the error was found on this side
// (a bad option, a connection that could not be made, a WebSocket that broke off).

/** The error codes of the API (`{"error": {"code", "message"}}`). */
export type ErrorCode =
  | "invalid_argument"
  | "not_found"
  | "already_exists"
  | "failed_precondition"
  | "unavailable"
  | "timeout"
  | "protocol"
  | "unsupported"
  | "cancelled"
  | "internal"
  | "unauthenticated"
  | "permission_denied"
  | "resource_exhausted";

export interface HutchErrorOptions {
  status?: number;
  cause?: unknown;
}

export class HutchError extends Error {
  readonly code: ErrorCode;
  readonly status: number;

  constructor(code: ErrorCode, message: string, options: HutchErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.status = options.status ?? 0;
    this.name = new.target.name;
  }
}

export class InvalidArgumentError extends HutchError {
  constructor(message: string, options?: HutchErrorOptions) {
    super("invalid_argument", message, options);
  }
}
export class NotFoundError extends HutchError {
  constructor(message: string, options?: HutchErrorOptions) {
    super("not_found", message, options);
  }
}
export class AlreadyExistsError extends HutchError {
  constructor(message: string, options?: HutchErrorOptions) {
    super("already_exists", message, options);
  }
}
export class FailedPreconditionError extends HutchError {
  constructor(message: string, options?: HutchErrorOptions) {
    super("failed_precondition", message, options);
  }
}
export class UnavailableError extends HutchError {
  constructor(message: string, options?: HutchErrorOptions) {
    super("unavailable", message, options);
  }
}
/** Code `timeout`; named so as not to clash with the DOM's TimeoutError. */
export class HutchTimeoutError extends HutchError {
  constructor(message: string, options?: HutchErrorOptions) {
    super("timeout", message, options);
  }
}
export class ProtocolError extends HutchError {
  constructor(message: string, options?: HutchErrorOptions) {
    super("protocol", message, options);
  }
}
export class UnsupportedError extends HutchError {
  constructor(message: string, options?: HutchErrorOptions) {
    super("unsupported", message, options);
  }
}
export class CancelledError extends HutchError {
  constructor(message: string, options?: HutchErrorOptions) {
    super("cancelled", message, options);
  }
}
export class InternalError extends HutchError {
  constructor(message: string, options?: HutchErrorOptions) {
    super("internal", message, options);
  }
}
export class UnauthenticatedError extends HutchError {
  constructor(message: string, options?: HutchErrorOptions) {
    super("unauthenticated", message, options);
  }
}
export class PermissionDeniedError extends HutchError {
  constructor(message: string, options?: HutchErrorOptions) {
    super("permission_denied", message, options);
  }
}
export class ResourceExhaustedError extends HutchError {
  /** Seconds from a `Retry-After` header (429 after too many failed keys), if there was one. */
  readonly retryAfterSeconds: number | undefined;

  constructor(message: string, options?: HutchErrorOptions & { retryAfterSeconds?: number }) {
    super("resource_exhausted", message, options);
    this.retryAfterSeconds = options?.retryAfterSeconds;
  }
}

/**
 * The server's TLS certificate is not the pinned one (`fingerprint`, `HUTCH_FINGERPRINT`).
 * Nothing was sent to that server: the check runs before the request (and the API key) is
 * written.
 */
export class FingerprintMismatchError extends UnavailableError {
  readonly expected: string;
  readonly actual: string;

  constructor(message: string, expected: string, actual: string) {
    super(message);
    this.expected = expected;
    this.actual = actual;
  }
}

type ErrorClass = new (message: string, options?: HutchErrorOptions) => HutchError;

const byCode: Record<ErrorCode, ErrorClass> = {
  invalid_argument: InvalidArgumentError,
  not_found: NotFoundError,
  already_exists: AlreadyExistsError,
  failed_precondition: FailedPreconditionError,
  unavailable: UnavailableError,
  timeout: HutchTimeoutError,
  protocol: ProtocolError,
  unsupported: UnsupportedError,
  cancelled: CancelledError,
  internal: InternalError,
  unauthenticated: UnauthenticatedError,
  permission_denied: PermissionDeniedError,
  resource_exhausted: ResourceExhaustedError,
};

// When a body has no (known) code: the code the API's table gives that status.
const byStatus: Record<number, ErrorCode> = {
  400: "invalid_argument",
  401: "unauthenticated",
  403: "permission_denied",
  404: "not_found",
  405: "unsupported",
  429: "resource_exhausted",
  499: "cancelled",
  500: "internal",
  501: "unsupported",
  502: "protocol",
  503: "unavailable",
  504: "timeout",
};

export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === "string" && Object.prototype.hasOwnProperty.call(byCode, code);
}

/** The error for a code (unknown codes become `internal`, as the protocol says). */
export function errorForCode(
  code: string,
  message: string,
  options: HutchErrorOptions & { retryAfterSeconds?: number } = {},
): HutchError {
  const known: ErrorCode = isErrorCode(code) ? code : "internal";
  if (known === "resource_exhausted") return new ResourceExhaustedError(message, options);
  return new byCode[known](message, options);
}

/**
 * The error for an HTTP answer that is not a success: the body's `{"error": {"code",
 * "message"}}` when it has one, else the code the status maps to and the body's first bytes.
 */
export function errorFromResponse(
  status: number,
  body: string,
  headers: Record<string, string | string[] | undefined> = {},
): HutchError {
  const retryHeader = headers["retry-after"];
  const retryText = Array.isArray(retryHeader) ? retryHeader[0] : retryHeader;
  const retryAfterSeconds =
    retryText !== undefined && /^\d+$/.test(retryText.trim()) ? Number(retryText) : undefined;
  const options = { status, retryAfterSeconds };
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    parsed = undefined;
  }
  if (typeof parsed === "object" && parsed !== null && "error" in parsed) {
    const e = (parsed as { error: unknown }).error;
    if (typeof e === "object" && e !== null) {
      const { code, message } = e as { code?: unknown; message?: unknown };
      const text = typeof message === "string" && message !== "" ? message : `HTTP ${status}`;
      if (isErrorCode(code)) return errorForCode(code, text, options);
      return errorForCode(byStatus[status] ?? "internal", text, options);
    }
  }
  const snippet = body.length > 200 ? `${body.slice(0, 200)}...` : body;
  return errorForCode(
    byStatus[status] ?? (status >= 500 ? "internal" : "invalid_argument"),
    `hutchd answered HTTP ${status}${snippet.trim() === "" ? "" : `: ${snippet.trim()}`}`,
    options,
  );
}
