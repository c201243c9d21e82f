// The TypeScript SDK's side of bench/api_bench.py: one Client, kept for the whole run, driven
// by JSON lines on stdin; every answer is one JSON line on stdout.
//
//   node bench/api_bench_ts.mjs SDK_DIST_INDEX_JS      (HUTCH_HOST, HUTCH_API_KEY, HUTCH_CA_CERT)
//
// {"op":"exec","box":ID[,"ws":true]}  -> {"s": seconds of one box.exec(["true"])}; with ws the
//                                        exec has an onStdout callback, so it runs over the
//                                        exec WebSocket instead of POST /exec
// {"op":"create_exec"[,"template":T]} -> {"s": seconds of boxes.create() + exec(["true"]), "id"}
//                                        (the box stays: api_bench.py removes it, untimed)
// {"op":"quit"}
// A failure answers {"error": "..."}; the first line is {"ready": true, "version": ...}.

import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

const { Client } = await import(pathToFileURL(process.argv[2]).href);

const out = (v) => process.stdout.write(JSON.stringify(v) + "\n");
const now = () => process.hrtime.bigint();
const seconds = (t0) => Number(now() - t0) / 1e9;

const client = new Client();
const info = await client.info();
out({ ready: true, version: info.version, endpoint: client.endpoint });

const boxes = new Map();
for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const cmd = JSON.parse(line);
  try {
    if (cmd.op === "quit") break;
    if (cmd.op === "exec") {
      let box = boxes.get(cmd.box);
      if (!box) {
        box = await client.boxes.get(cmd.box);
        boxes.set(cmd.box, box);
      }
      const options = cmd.ws ? { onStdout: () => {} } : {};
      const t0 = now();
      const r = await box.exec(["true"], options);
      const s = seconds(t0);
      if (r.exitCode !== 0) throw new Error(`true ended with ${r.exitCode ?? "signal " + r.signal}`);
      out({ s });
    } else if (cmd.op === "create_exec") {
      const t0 = now();
      const box = await client.boxes.create({ template: cmd.template ?? "base" });
      const r = await box.exec(["true"]);
      const s = seconds(t0);
      if (r.exitCode !== 0) throw new Error(`true ended with ${r.exitCode ?? "signal " + r.signal}`);
      out({ s, id: box.id });
    } else {
      throw new Error(`unknown op ${cmd.op}`);
    }
  } catch (e) {
    out({ error: String(e?.stack ?? e) });
  }
}
client.close();
process.exit(0); // stdin stays referenced after the loop; nothing else is left to do
