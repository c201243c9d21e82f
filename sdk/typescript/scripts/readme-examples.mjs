#!/usr/bin/env node
// Extracts the ```ts blocks of README.md into test/readme/ so that tsc type-checks them and the
// integration tests run them against a real hutchd. A block right after "<!-- not run: why -->"
// is only type-checked. "// => text" on a line says the example's stdout contains text.

import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const readme = readFileSync(path.join(root, "README.md"), "utf8");
const out = path.join(root, "test/readme");
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

const lines = readme.split("\n");
const examples = [];
let notRun = null;
for (let i = 0; i < lines.length; i++) {
  const line = lines[i];
  const marker = /^<!-- not run: (.*) -->$/.exec(line.trim());
  if (marker) {
    notRun = marker[1];
    continue;
  }
  if (line.trim() !== "```ts") {
    if (line.trim() !== "") notRun = null;
    continue;
  }
  const start = i + 1;
  let end = start;
  while (end < lines.length && lines[end].trim() !== "```") end++;
  if (end >= lines.length) throw new Error(`README.md:${i + 1}: a ts block that never ends`);
  const code = lines.slice(start, end);
  const expect = code.flatMap((l) => {
    const m = /\/\/ => (.*)$/.exec(l);
    return m ? [m[1].trim()] : [];
  });
  const name = `example_${String(examples.length + 1).padStart(2, "0")}`;
  // Each block is a module of its own (top-level await); the line comment maps errors back.
  writeFileSync(path.join(out, `${name}.ts`), `// README.md line ${start + 1}\n${code.join("\n")}\nexport {};\n`);
  examples.push({ name, line: start + 1, run: notRun === null, why: notRun ?? "", expect });
  notRun = null;
  i = end;
}
if (examples.length === 0) throw new Error("README.md has no ts examples");
writeFileSync(path.join(out, "examples.json"), `${JSON.stringify(examples, null, 2)}\n`);
console.log(`readme-examples: ${examples.length} examples (${examples.filter((e) => e.run).length} run) in test/readme/`);
