#!/usr/bin/env node
// Prints the interfaces and type aliases that TypeScript files declare, as JSON, for
// scripts/check_client_models.py (which compares them with docs/openapi.yaml's schemas):
//
//   node sdk/typescript/scripts/model-shapes.mjs FILE.ts...
//
// The files are parsed with the TypeScript compiler API (this package's devDependency), not
// type-checked: a declaration is read as written. Output: {"interfaces": {Name: {"file",
// "extends": [Name...], "members": {prop: {"optional", "type"}}}}, "aliases": {Name: {"file",
// "type"}}}, where a type is one of
//   {"kind": "keyword", "name": "string" | "number" | "bigint" | "boolean" | "null" | ...}
//   {"kind": "literal", "value": "x" | 1 | true}
//   {"kind": "union", "types": [type...]}
//   {"kind": "array", "element": type}
//   {"kind": "ref", "name": "Name", "args": [type...]}       (Record<string, T>, Date, BoxState)
//   {"kind": "object", "members": {prop: {"optional", "type"}}}  (an inline { a: T; b?: U })
//   {"kind": "other", "text": "..."}                          (anything else, as written)
// Names are global across the files given: a name declared twice is an error.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const ts = createRequire(path.join(root, "package.json"))("typescript");

const files = process.argv.slice(2);
if (files.length === 0) {
  process.stderr.write("usage: model-shapes.mjs FILE.ts...\n");
  process.exit(2);
}

function propName(name, sf) {
  if (ts.isIdentifier(name) || ts.isStringLiteral(name) || ts.isNumericLiteral(name)) return name.text;
  return name.getText(sf);
}

function members(list, sf) {
  const out = {};
  for (const m of list) {
    if (!ts.isPropertySignature(m) || m.name === undefined) continue; // methods, index signatures
    out[propName(m.name, sf)] = {
      optional: m.questionToken !== undefined,
      type: m.type === undefined ? { kind: "keyword", name: "any" } : shape(m.type, sf),
    };
  }
  return out;
}

const keywords = new Map([
  [ts.SyntaxKind.StringKeyword, "string"],
  [ts.SyntaxKind.NumberKeyword, "number"],
  [ts.SyntaxKind.BigIntKeyword, "bigint"],
  [ts.SyntaxKind.BooleanKeyword, "boolean"],
  [ts.SyntaxKind.UndefinedKeyword, "undefined"],
  [ts.SyntaxKind.UnknownKeyword, "unknown"],
  [ts.SyntaxKind.AnyKeyword, "any"],
  [ts.SyntaxKind.NeverKeyword, "never"],
  [ts.SyntaxKind.ObjectKeyword, "object"],
]);

function shape(node, sf) {
  if (keywords.has(node.kind)) return { kind: "keyword", name: keywords.get(node.kind) };
  if (ts.isParenthesizedTypeNode(node)) return shape(node.type, sf);
  if (ts.isTypeOperatorNode(node) && node.operator === ts.SyntaxKind.ReadonlyKeyword) return shape(node.type, sf);
  if (ts.isLiteralTypeNode(node)) {
    const lit = node.literal;
    if (lit.kind === ts.SyntaxKind.NullKeyword) return { kind: "keyword", name: "null" };
    if (ts.isStringLiteral(lit)) return { kind: "literal", value: lit.text };
    if (ts.isNumericLiteral(lit)) return { kind: "literal", value: Number(lit.text) };
    if (lit.kind === ts.SyntaxKind.TrueKeyword) return { kind: "literal", value: true };
    if (lit.kind === ts.SyntaxKind.FalseKeyword) return { kind: "literal", value: false };
  }
  if (ts.isUnionTypeNode(node)) return { kind: "union", types: node.types.map((t) => shape(t, sf)) };
  if (ts.isArrayTypeNode(node)) return { kind: "array", element: shape(node.elementType, sf) };
  if (ts.isTypeLiteralNode(node)) return { kind: "object", members: members(node.members, sf) };
  if (ts.isTypeReferenceNode(node)) {
    const name = node.typeName.getText(sf);
    const args = (node.typeArguments ?? []).map((t) => shape(t, sf));
    if ((name === "Array" || name === "ReadonlyArray") && args.length === 1) return { kind: "array", element: args[0] };
    return { kind: "ref", name, args };
  }
  return { kind: "other", text: node.getText(sf) };
}

const interfaces = {};
const aliases = {};
const seen = new Map();
function declare(name, file) {
  if (seen.has(name)) throw new Error(`${name} is declared in ${seen.get(name)} and in ${file}`);
  seen.set(name, file);
}

for (const file of files) {
  const sf = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
  for (const stmt of sf.statements) {
    if (ts.isInterfaceDeclaration(stmt)) {
      declare(stmt.name.text, file);
      const bases = (stmt.heritageClauses ?? []).flatMap((h) => h.types.map((t) => t.expression.getText(sf)));
      interfaces[stmt.name.text] = { file, extends: bases, members: members(stmt.members, sf) };
    } else if (ts.isTypeAliasDeclaration(stmt)) {
      declare(stmt.name.text, file);
      aliases[stmt.name.text] = { file, type: shape(stmt.type, sf) };
    }
  }
}
process.stdout.write(`${JSON.stringify({ interfaces, aliases })}\n`);
