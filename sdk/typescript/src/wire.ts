// Reading hutchd's JSON: small typed accessors. A field that is absent takes its default (an
// older hutchd may not send it); a field of the wrong type is a ProtocolError naming it, so a
// server that breaks the contract is noticed instead of turning into `undefined` somewhere.

import { ProtocolError } from "./errors.js";

export type JsonObject = Record<string, unknown>;

export function asObject(value: unknown, what: string): JsonObject {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ProtocolError(`hutchd sent ${what} that is not a JSON object`);
  }
  return value as JsonObject;
}

function wrongType(o: JsonObject, key: string, what: string, want: string): never {
  const got = o[key] === null ? "null" : Array.isArray(o[key]) ? "array" : typeof o[key];
  throw new ProtocolError(`hutchd sent ${what} whose '${key}' is ${got}, not ${want}`);
}

export function str(o: JsonObject, key: string, what: string, fallback = ""): string {
  const v = o[key];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== "string") wrongType(o, key, what, "a string");
  return v;
}

export function num(o: JsonObject, key: string, what: string, fallback = 0): number {
  const v = o[key];
  if (v === undefined || v === null) return fallback;
  if (typeof v === "bigint") return Number(v);
  if (typeof v === "string" && /^-?\d+$/.test(v)) return Number(v); // a quoted big integer
  if (typeof v !== "number") wrongType(o, key, what, "a number");
  return v;
}

/** A number that may be null or absent (`exit_code` vs `signal`). */
export function optNum(o: JsonObject, key: string, what: string): number | null {
  const v = o[key];
  if (v === undefined || v === null) return null;
  return num(o, key, what);
}

export function bool(o: JsonObject, key: string, what: string, fallback = false): boolean {
  const v = o[key];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== "boolean") wrongType(o, key, what, "a boolean");
  return v;
}

export function strings(o: JsonObject, key: string, what: string): string[] {
  const v = o[key];
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || v.some((s) => typeof s !== "string")) {
    wrongType(o, key, what, "an array of strings");
  }
  return v as string[];
}

export function numbers(o: JsonObject, key: string, what: string): number[] {
  const v = o[key];
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || v.some((s) => typeof s !== "number")) {
    wrongType(o, key, what, "an array of numbers");
  }
  return v as number[];
}

export function objects(o: JsonObject, key: string, what: string): JsonObject[] {
  const v = o[key];
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) wrongType(o, key, what, "an array");
  return v.map((item, i) => asObject(item, `${what}'s ${key}[${i}]`));
}

export function obj(o: JsonObject, key: string, what: string): JsonObject {
  const v = o[key];
  if (v === undefined || v === null) return {};
  return asObject(v, `${what}'s '${key}'`);
}

/** A map of strings (`env`); an array of "K=V" is read too. */
export function stringMap(o: JsonObject, key: string, what: string): Record<string, string> {
  const v = o[key];
  if (v === undefined || v === null) return {};
  const out: Record<string, string> = {};
  if (Array.isArray(v)) {
    for (const item of v) {
      if (typeof item !== "string" || !item.includes("=")) {
        wrongType(o, key, what, 'an object or an array of "K=V"');
      }
      const eq = item.indexOf("=");
      out[item.slice(0, eq)] = item.slice(eq + 1);
    }
    return out;
  }
  const m = asObject(v, `${what}'s '${key}'`);
  for (const [k, value] of Object.entries(m)) {
    if (typeof value !== "string") wrongType(m, k, `${what}'s '${key}'`, "a string");
    out[k] = value;
  }
  return out;
}

export function numberMap(o: JsonObject, key: string, what: string): Record<string, number> {
  const m = obj(o, key, what);
  const out: Record<string, number> = {};
  for (const k of Object.keys(m)) out[k] = num(m, k, `${what}'s '${key}'`);
  return out;
}

// Nanosecond timestamps pass 2^53: JSON.parse would round them. Before parsing, the values of
// these keys are quoted so they survive as text and become bigints. Inside a JSON string a
// quote is escaped (\"), so the pattern cannot match text that is part of a string value.
const bigIntegerKeys = /"(mtime_ns|started_ns|cpu_ns)"(\s*):(\s*)(-?\d+)/g;

export function parseJson(text: string, what = "an answer"): unknown {
  try {
    return JSON.parse(text.replace(bigIntegerKeys, '"$1"$2:$3"$4"'));
  } catch (e) {
    const snippet = text.length > 200 ? `${text.slice(0, 200)}...` : text;
    throw new ProtocolError(`hutchd sent ${what} that is not valid JSON: ${snippet}`, { cause: e });
  }
}

/** A nanosecond field read by parseJson (quoted) or sent as a plain number. */
export function bigNs(o: JsonObject, key: string, what: string): bigint {
  const v = o[key];
  if (v === undefined || v === null) return 0n;
  if (typeof v === "string" && /^-?\d+$/.test(v)) return BigInt(v);
  if (typeof v === "number" && Number.isInteger(v)) return BigInt(v);
  wrongType(o, key, what, "an integer");
}
