// Sizes: a number is MiB; a string is a number with an optional unit (K, M, G, T, with or
// without "i" and "B"; binary multiples, as the CLI's --memory and --disk take them).

import { InvalidArgumentError } from "./errors.js";

/** MiB as a number, or a string such as "512M", "2G", "1.5GiB", "2048". */
export type Size = number | string;

const unitMib: Record<string, number> = { k: 1 / 1024, m: 1, g: 1024, t: 1024 * 1024 };

/** Converts a Size to whole MiB; `what` names the option in the error ("memory"). */
export function sizeToMib(size: Size, what: string): number {
  if (typeof size === "number") {
    if (!Number.isSafeInteger(size) || size < 0) {
      throw new InvalidArgumentError(`${what} must be a whole number of MiB, got ${size}`);
    }
    return size;
  }
  if (typeof size !== "string") {
    throw new InvalidArgumentError(`${what} must be MiB as a number or a string such as "512M" or "2G"`);
  }
  const m = /^\s*(\d+(?:\.\d+)?)\s*(?:([kmgt])(?:i?b)?)?\s*$/i.exec(size);
  if (m === null) {
    throw new InvalidArgumentError(
      `${what} '${size}' is not a size: use MiB as a number or a string such as "512M", "2G" or "1.5GiB"`,
    );
  }
  const mib = Number(m[1]) * unitMib[(m[2] ?? "m").toLowerCase()]!;
  if (!Number.isSafeInteger(mib)) {
    throw new InvalidArgumentError(`${what} '${size}' is not a whole number of MiB (${mib} MiB)`);
  }
  return mib;
}
