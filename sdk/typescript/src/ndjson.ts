// Newline-delimited JSON: one object per line, as the long operations stream them.

import { parseJson } from "./wire.js";

/** Yields each non-empty line of a byte stream as parsed JSON. */
export async function* ndjson(stream: AsyncIterable<Buffer | Uint8Array | string>, what: string): AsyncGenerator<unknown> {
  const decoder = new TextDecoder("utf-8");
  let buffered = "";
  for await (const chunk of stream) {
    buffered += typeof chunk === "string" ? chunk : decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = buffered.indexOf("\n")) >= 0) {
      const line = buffered.slice(0, nl).trim();
      buffered = buffered.slice(nl + 1);
      if (line !== "") yield parseJson(line, what);
    }
  }
  buffered += decoder.decode();
  if (buffered.trim() !== "") yield parseJson(buffered.trim(), what);
}
