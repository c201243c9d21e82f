// Bundles the dashboard into dist/: index.html and content-hashed assets under dist/assets/
// (hutchd caches those for a year; index.html is revalidated).
//
// Why esbuild and not Vite: the page is one TypeScript entry point and two CSS files, with no
// dev server, plugins or framework to serve. esbuild does exactly that in one dependency (one
// package plus its platform binary, nothing else in the lockfile), where Vite would bring in
// Rollup, PostCSS and their trees to do the same here. Type checking is tsc's (npm run build
// runs tsc --noEmit first): esbuild only strips the types.
import { build } from "esbuild";
import { copyFile, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const dist = path.join(root, "dist");

await rm(dist, { recursive: true, force: true });
await mkdir(path.join(dist, "assets"), { recursive: true });

const result = await build({
  absWorkingDir: root,
  entryPoints: ["src/main.ts"],
  bundle: true,
  format: "esm",
  target: ["es2022"],
  platform: "browser",
  minify: true,
  sourcemap: "linked",
  outdir: "dist/assets",
  entryNames: "[name]-[hash]",
  assetNames: "[name]-[hash]",
  metafile: true,
  logLevel: "warning",
});

let js;
let css;
for (const [file, output] of Object.entries(result.metafile.outputs)) {
  if (output.entryPoint === "src/main.ts") {
    js = file;
    css = output.cssBundle;
  }
}
if (!js || !css) throw new Error("esbuild wrote no main script or stylesheet");
const relative = (file) => path.relative(dist, path.join(root, file)).split(path.sep).join("/");
const template = await readFile(path.join(root, "src", "index.html"), "utf8");
const html = template.replace("{{js}}", relative(js)).replace("{{css}}", relative(css));
await writeFile(path.join(dist, "index.html"), html);
await copyFile(path.join(root, "src", "favicon.svg"), path.join(dist, "favicon.svg"));
console.log(`dashboard: built ${relative(js)}, ${relative(css)} into ${dist}`);
