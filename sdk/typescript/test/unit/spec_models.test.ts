// The SDK's models (src/models.ts, exec.ts, box.ts, files.ts) and the dashboard's
// (web/dashboard/src/api.ts) against docs/openapi.yaml: a field in the spec and not in a model,
// or the reverse, fails here. The check is scripts/check_client_models.py (its ALLOWED list has
// the deliberate differences); it reads the interfaces with the TypeScript compiler API
// (scripts/model-shapes.mjs) and the YAML with PyYAML, which the build needs too (python3-yaml):
// it runs with HUTCH_SPEC_PYTHON, else python3. HUTCH_OPENAPI_SPEC checks another spec.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

// build-test/test/unit/ -> the repository.
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../../..");
const check = path.join(repo, "scripts/check_client_models.py");

function yamlPython(): string {
  const candidates = [process.env["HUTCH_SPEC_PYTHON"], "python3", "/usr/bin/python3"];
  for (const python of candidates) {
    if (python && spawnSync(python, ["-c", "import yaml"]).status === 0) return python;
  }
  assert.fail("No python3 with PyYAML to read docs/openapi.yaml: install python3-yaml (as the build needs) or set HUTCH_SPEC_PYTHON");
}

function runCheck(...args: string[]) {
  return spawnSync(yamlPython(), [check, "--client", "typescript", "--client", "dashboard", ...args], {
    cwd: repo,
    encoding: "utf8",
  });
}

test("the SDK's and the dashboard's models match docs/openapi.yaml", () => {
  const done = runCheck();
  assert.equal(done.status, 0, `${done.stdout}${done.stderr}`);
});

test("a field in the spec and not in the models fails, naming the schema, field, model and file", () => {
  // The spec as JSON (which is YAML too), with a property no client knows.
  const specPath = process.env["HUTCH_OPENAPI_SPEC"] || path.join(repo, "docs/openapi.yaml");
  const dump = spawnSync(
    yamlPython(),
    ["-c", "import json, sys, yaml; json.dump(yaml.safe_load(open(sys.argv[1])), sys.stdout)", specPath],
    { encoding: "utf8" },
  );
  assert.equal(dump.status, 0, dump.stderr);
  const spec = JSON.parse(dump.stdout);
  spec.components.schemas.Port.properties.bytes_in = { type: "integer" };
  const dir = mkdtempSync(path.join(tmpdir(), "hutch-spec-"));
  try {
    const scratch = path.join(dir, "openapi.yaml");
    writeFileSync(scratch, JSON.stringify(spec));
    const done = runCheck("--spec", scratch);
    assert.equal(done.status, 1, `${done.stdout}${done.stderr}`);
    assert.match(
      done.stderr,
      /components\.schemas\.Port: 'bytes_in' is in the spec but not in the client's model \(as 'bytesIn'\) \[typescript: Port in sdk\/typescript\/src\/models\.ts\]/,
    );
    assert.match(
      done.stderr,
      /components\.schemas\.Port: 'bytes_in' is in the spec but not in the client's model \(as 'bytes_in'\) \[dashboard: Port in web\/dashboard\/src\/api\.ts\]/,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
