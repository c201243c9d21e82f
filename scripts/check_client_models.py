#!/usr/bin/env python3
"""Checks the clients' models against docs/openapi.yaml: a field in the spec and not in a
client's model (or in a client's model and not in the spec) fails, naming the schema, the field,
the model and its file.

    scripts/check_client_models.py [--spec SPEC.yaml] [--client python|typescript|dashboard]...

The spec is --spec, else $HUTCH_OPENAPI_SPEC, else docs/openapi.yaml. Without --client every
client is checked. Run by the SDKs' unit tests: sdk/python/tests/unit/test_models_match_spec.py
(--client python) and sdk/typescript/test/unit/spec_models.test.ts (--client typescript
--client dashboard). Needs python3 with PyYAML (python3-yaml, which the build needs too) and, for
the TypeScript clients, node with sdk/typescript/node_modules (npm ci there).

The clients mirror the spec by hand; this compares them, it does not generate them:
  * python      sdk/python/hutch/_models.py: the dataclasses, read with `ast` (each field's name
                and annotation; `raw`, the JSON object as sent, is every model's and skipped).
  * typescript  sdk/typescript/src/{models,exec,box,files}.ts: interfaces and type aliases, read
                with the TypeScript compiler API (sdk/typescript/scripts/model-shapes.mjs). Fields
                are the spec's in camelCase.
  * dashboard   web/dashboard/src/api.ts: the page's interfaces, the JSON exactly as sent (it
                casts the answers, it has no parser), so presence is checked strictly there.

MODELS says which client model mirrors which schema. For each pair, the properties are compared
by name, and then:
  * basic types: string, integer (number/bigint in TypeScript), boolean, array (with its items),
    map (additionalProperties: Record / dict) and object (a nested model, compared the same way);
    a closed set of string literals in TypeScript must be the spec's enum exactly. `Any`,
    `unknown`, `dict[str, Any]` and `Record<string, unknown>` keep a JSON object as sent: they
    match any object, but not a string or a number.
  * presence: the SDKs parse leniently (an absent or null field takes its default), so they may
    type a field the spec calls optional or nullable as always there; the reverse, a field the
    client types as optional (`?`, `| null`, `| None`) that hutchd always sends, is a mismatch.
    The dashboard's types are the JSON itself: optional or nullable exactly when the spec says.
Every object schema in components must be modelled by some client or be in NOT_MODELED, so a new
schema is a decision too. ALLOWED lists the deliberate differences, each with why; an entry that
no longer matches anything fails, so the list stays true.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import os
import pathlib
import subprocess
import sys
from typing import Any

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent

# --- which client model mirrors which schema ----------------------------------------------------

#: A schema is "Name" (components/schemas/Name) or "METHOD /path" (that operation's JSON answer).
#: mode "mirror": both ways. "answer-subset": the schema is a smaller answer read into the model
#: (every spec field must be in the model; the model has more). "request-subset": a request the
#: client fills in part (every model field must be in the spec; the spec has more).
MODELS: list[tuple[str, str, str, str]] = [
    # (client, schema, model, mode)
    ("python", "Box", "BoxInfo", "mirror"),
    ("python", "Checkpoint", "Checkpoint", "mirror"),
    ("python", "Port", "Port", "mirror"),
    ("python", "Process", "Process", "mirror"),
    ("python", "ProcessStarted", "Process", "answer-subset"),
    ("python", "Service", "Service", "mirror"),
    ("python", "Template", "Template", "mirror"),
    ("python", "RegistryLogin", "RegistryLogin", "mirror"),
    ("python", "Secret", "Secret", "mirror"),
    ("python", "Key", "Key", "mirror"),
    ("python", "KeyCreated", "Key", "mirror"),
    ("python", "Caller", "Caller", "mirror"),
    ("python", "Info", "Info", "mirror"),
    ("python", "FileInfo", "FileInfo", "mirror"),
    ("python", "BoxPolicy", "Policy", "mirror"),
    ("python", "LogEntry", "PolicyLogEntry", "mirror"),
    ("python", "GET /v1/boxes/{box}/policy/log", "PolicyLog", "mirror"),
    ("python", "ExecResult", "ExecResult", "mirror"),
    ("typescript", "Box", "BoxInfo", "mirror"),
    ("typescript", "Checkpoint", "Checkpoint", "mirror"),
    ("typescript", "Port", "Port", "mirror"),
    ("typescript", "Process", "ProcessInfo", "mirror"),
    ("typescript", "ProcessStarted", "ProcessInfo", "answer-subset"),
    ("typescript", "Service", "ServiceInfo", "mirror"),
    ("typescript", "Template", "Template", "mirror"),
    ("typescript", "RegistryLogin", "RegistryLogin", "mirror"),
    ("typescript", "Secret", "Secret", "mirror"),
    ("typescript", "Key", "ApiKey", "mirror"),
    ("typescript", "KeyCreated", "ApiKey", "mirror"),
    ("typescript", "Caller", "Caller", "mirror"),
    ("typescript", "Info", "Info", "mirror"),
    ("typescript", "BoxStats", "BoxStats", "mirror"),
    ("typescript", "Rule", "PolicyRule", "mirror"),
    ("typescript", "PolicyDocument", "Policy", "mirror"),
    ("typescript", "LogEntry", "PolicyLogEntry", "mirror"),
    ("typescript", "GET /v1/boxes/{box}/policy/log", "PolicyLog", "mirror"),
    ("typescript", "FileInfo", "FileInfo", "mirror"),
    ("typescript", "FileInfo", "MkdirResult", "mirror"),
    ("typescript", "GET /v1/boxes/{box}/files/list", "FileList", "mirror"),
    ("typescript", "DiskUsage", "DiskUsage", "mirror"),
    ("typescript", "Pool", "PoolStatus", "mirror"),
    ("typescript", "ExecResult", "ExecResult", "mirror"),
    ("dashboard", "Box", "Box", "mirror"),
    ("dashboard", "BoxStats", "BoxStats", "mirror"),
    ("dashboard", "Checkpoint", "Checkpoint", "mirror"),
    ("dashboard", "Port", "Port", "mirror"),
    ("dashboard", "LogEntry", "PolicyLogEntry", "mirror"),
    ("dashboard", "Template", "Template", "mirror"),
    ("dashboard", "Info", "Info", "mirror"),
    ("dashboard", "CreateBoxRequest", "CreateBoxRequest", "request-subset"),
]

#: Object schemas no client models, and why. (Schemas reached from a modelled one, such as Share
#: from Box, are covered through it.)
NOT_MODELED: dict[str, str] = {
    "Error": "Errors are exception classes, one per code (hutch/_errors.py, src/errors.ts)",
    "RemovedName": "A delete's {removed} answer; the SDKs' remove methods return nothing",
    "KeyRequest": "A request body: built from create_key/createKey's arguments",
    "Event": "GET /v1/events (NDJSON): no SDK method reads it yet",
    "AuditRecord": "GET /v1/audit: no SDK method reads it yet",
    "AuditVerdict": "GET /v1/audit/verify: no SDK method reads it yet",
    "ForkRequest": "A request body: built from fork()'s arguments",
    "CheckpointRequest": "A request body: built from checkpoint()'s argument",
    "RollbackRequest": "A request body: built from rollback()'s argument",
    "Diff": "GET /v1/boxes/{box}/diff: no SDK method reads it yet",
    "DiffEntry": "Part of Diff",
    "DiffChange": "Part of Diff",
    "SshKeyRequest": "A request body (hutch key ssh add); the SDKs do not manage SSH keys yet",
    "SshKey": "GET /v1/ssh/keys: hutch key ssh ls reads it; no SDK method yet (docs/ssh.md)",
    "SshHostKey": "GET /v1/ssh/host-key: hutch ssh-known-hosts reads it; no SDK method yet",
    "ExecRequest": "A request (the upgraded exec): built from exec's arguments",
    "ExecWsRequest": "A request (the WebSocket exec): built from exec's arguments",
    "ExecWsClientMessage": "Messages the SDKs send, written by their exec sessions",
    "ExecWsServerMessage": "Messages the SDKs' exec sessions read (hutch/_exec_proto.py, "
                           "src/ws_exec.ts), not API objects",
    "ExecRun": "A request body: built from exec/run's arguments",
    "MkdirRequest": "A request body: built from files.mkdir's arguments",
    "MoveRequest": "A request body: built from files.move's arguments",
    "PortRequest": "A request body: built from ports.publish's arguments",
    "ProcessRequest": "A request body: built from processes.start's arguments",
    "SignalRequest": "A request body: built from signal()'s argument",
    "SecretRequest": "A request body: built from secrets.set's arguments",
    "TemplateRequest": "A request body: built from templates.create's arguments",
    "TemplateBuildEvent": "NDJSON lines the template methods read as a stream (progress, then "
                          "the Template, which is modelled)",
}


@dataclasses.dataclass(frozen=True)
class Allow:
    """A deliberate difference between the spec and a client's model.

    kind: "omitted" (a spec field the model leaves out), "renamed" (the spec field `field` is
    the model's field `to`; where the spec's is an object and the model's a plain value, the
    value is the object's only property, which must be named `to`: Info.tls in Python),
    "extra" (a model field not in the spec), "presence" (the model's optionality differs from
    the spec's) or "type" (the basic types differ).
    field: the spec's name for "omitted" and "renamed", the model's for the others.
    model: the model's name, or "Model.field" for an object written inline in it.
    """

    client: str
    model: str
    field: str
    kind: str
    why: str
    to: str = ""


ALLOWED: list[Allow] = [
    # Python --------------------------------------------------------------------------------------
    Allow("python", "Info", "tls", "renamed", to="fingerprint_sha256",
          why="Info.fingerprint_sha256 holds tls.fingerprint_sha256 (None: no TLS listener); "
              "the object has nothing else"),
    Allow("python", "Key", "key", "extra",
          why="KeyCreated's key: one Key class for both answers, key None except in the answer "
              "that made it"),
    Allow("python", "Key", "key", "presence",
          why="KeyCreated always has key, but the same class reads Key (no key): None there"),
    Allow("python", "ExecResult", "stdout", "renamed", to="stdout_bytes",
          why="The bytes, decoded from base64 when stdout_encoding says so; .stdout is the text"),
    Allow("python", "ExecResult", "stderr", "renamed", to="stderr_bytes",
          why="As stdout"),
    Allow("python", "ExecResult", "stdout_encoding", "omitted",
          why="Consumed by from_json: stdout_bytes holds the bytes either way"),
    Allow("python", "ExecResult", "stderr_encoding", "omitted", why="As stdout_encoding"),
    # TypeScript ----------------------------------------------------------------------------------
    Allow("typescript", "ProcessInfo", "code", "renamed", to="exitCode",
          why="exitCode, as ExecResult and Exit call it (null until it ends, or when a signal "
              "ended it)"),
    Allow("typescript", "ServiceInfo.lastExit", "code", "renamed", to="exitCode",
          why="As ProcessInfo.exitCode"),
    Allow("typescript", "ApiKey", "key", "extra",
          why="KeyCreated's key: one interface for both answers, set only in the answer that "
              "made the key"),
    Allow("typescript", "ApiKey", "key", "presence",
          why="KeyCreated always has key, but the same interface reads Key (no key)"),
    Allow("typescript", "Policy", "presets", "omitted",
          why="The SDK sends one preset by name (PolicyInput) or a document of rules; a "
              "document combining presets with rules is not offered"),
    Allow("typescript", "FileInfo", "created", "omitted",
          why="Only mkdir's answer has it: MkdirResult (files.ts) extends FileInfo with it"),
    Allow("typescript", "FileInfo", "mtime", "extra",
          why="mtime_ns as a Date (millisecond precision), derived by fileInfoFromJson"),
    Allow("typescript", "MkdirResult", "mtime", "extra", why="As FileInfo.mtime"),
    Allow("typescript", "MkdirResult", "created", "presence",
          why="mkdir's answer always has created; the spec's FileInfo, shared with stat and "
              "list, has it optional"),
    Allow("typescript", "ExecResult", "stdout_encoding", "omitted",
          why="Consumed by the parser: stdoutBytes holds the bytes either way"),
    Allow("typescript", "ExecResult", "stderr_encoding", "omitted", why="As stdout_encoding"),
    Allow("typescript", "ExecResult", "stdoutBytes", "extra",
          why="stdout's bytes (base64-decoded when stdout_encoding says so); stdout is the text"),
    Allow("typescript", "ExecResult", "stderrBytes", "extra", why="As stdoutBytes"),
]


# --- the spec -------------------------------------------------------------------------------------

@dataclasses.dataclass
class SpecType:
    """A schema reduced to what the check compares."""

    kind: str  # string integer number boolean array map object any union
    nullable: bool = False
    enum: frozenset[Any] | None = None
    items: Any = None  # array: the items' schema; map: the values' schema
    props: dict[str, Any] = dataclasses.field(default_factory=dict)
    required: frozenset[str] = frozenset()
    ref: str = ""  # the components/schemas name it came from, if any


class Spec:
    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        with open(path, encoding="utf-8") as f:
            self.doc = yaml.safe_load(f)
        self.schemas: dict[str, Any] = self.doc["components"]["schemas"]

    def deref(self, s: Any) -> tuple[Any, str]:
        name = ""
        while isinstance(s, dict) and "$ref" in s:
            ref = s["$ref"]
            prefix = "#/components/schemas/"
            if not ref.startswith(prefix):
                raise SystemExit(f"{self.path}: cannot follow $ref {ref}")
            name = ref[len(prefix):]
            s = self.schemas[name]
        return s, name

    def locate(self, where: str) -> Any:
        if " " not in where:
            return {"$ref": f"#/components/schemas/{where}"}
        method, path = where.split(" ", 1)
        try:
            op = self.doc["paths"][path][method.lower()]
            return op["responses"]["200"]["content"]["application/json"]["schema"]
        except KeyError:
            raise SystemExit(f"{self.path}: no JSON 200 answer for {where}") from None

    def norm(self, s: Any) -> SpecType:
        s, name = self.deref(s)
        if not isinstance(s, dict):
            return SpecType("any", ref=name)
        if "allOf" in s and len(s["allOf"]) == 1 and "type" not in s:
            t = self.norm(s["allOf"][0])
            return dataclasses.replace(t, ref=t.ref or name)
        # oneOf/anyOf is the type only where the schema has none of its own (ExecResult's oneOf
        # is a constraint beside its properties).
        branches_key = next((k for k in ("oneOf", "anyOf") if k in s), None)
        if branches_key and "type" not in s and "properties" not in s:
            branches = s[branches_key]
            real = [b for b in branches if not _is_null(b)]
            nullable = len(real) < len(branches)
            types = [self.norm(b) for b in real]
            if len(types) == 1:
                return dataclasses.replace(types[0], nullable=types[0].nullable or nullable,
                                           ref=types[0].ref or name)
            kinds = {t.kind for t in types}
            if len(kinds) == 1 and kinds <= {"string", "integer", "number", "boolean"}:
                enums = [t.enum for t in types]
                enum = None if any(e is None for e in enums) else frozenset().union(*enums)
                return SpecType(kinds.pop(), nullable=nullable, enum=enum, ref=name)
            return SpecType("union", nullable=nullable, ref=name)
        t = s.get("type")
        nullable = False
        if isinstance(t, list):
            nullable = "null" in t
            rest = [x for x in t if x != "null"]
            t = rest[0] if len(rest) == 1 else None
        enum = None
        if "const" in s:
            enum = frozenset([s["const"]])
            t = t or _json_kind(s["const"])
        if "enum" in s:
            enum = frozenset(v for v in s["enum"] if v is not None)
            t = t or _json_kind(next(iter(enum)))
        if t == "object" or (t is None and "properties" in s):
            if "properties" in s:
                return SpecType("object", nullable, props=s["properties"],
                                required=frozenset(s.get("required", [])), ref=name)
            extra = s.get("additionalProperties")
            if isinstance(extra, dict):
                return SpecType("map", nullable, items=extra, ref=name)
            return SpecType("map", nullable, items={}, ref=name)  # any JSON object
        if t == "array":
            return SpecType("array", nullable, items=s.get("items", {}), ref=name)
        if t in ("string", "integer", "number", "boolean"):
            return SpecType(t, nullable, enum=enum, ref=name)
        return SpecType("any", nullable, ref=name)

    def refs_from(self, s: Any, seen: set[str]) -> None:
        """Adds every components/schemas name that schema `s` reaches to `seen`."""
        if isinstance(s, dict):
            ref = s.get("$ref", "")
            if ref.startswith("#/components/schemas/"):
                name = ref.rsplit("/", 1)[1]
                if name not in seen:
                    seen.add(name)
                    self.refs_from(self.schemas[name], seen)
            for v in s.values():
                self.refs_from(v, seen)
        elif isinstance(s, list):
            for v in s:
                self.refs_from(v, seen)


def _is_null(s: Any) -> bool:
    return isinstance(s, dict) and s.get("type") == "null"


def _json_kind(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    return "string"


# --- the clients' models --------------------------------------------------------------------------

@dataclasses.dataclass
class CType:
    """A client's type reduced to what the check compares."""

    kind: str  # string number integer boolean bytes list map model any date other
    nullable: bool = False
    literals: frozenset[Any] | None = None  # a closed set of literals (TypeScript)
    element: CType | None = None  # list items, map values
    model: Model | None = None
    text: str = ""  # as written, for messages


@dataclasses.dataclass
class Field:
    optional: bool  # may be absent (TypeScript `?`)
    type: CType


@dataclasses.dataclass
class Model:
    name: str
    file: str
    fields: dict[str, Field]


class Client:
    name: str
    #: The dashboard casts JSON to its types: they must say exactly when a field may be missing.
    strict_presence = False

    def model(self, name: str) -> Model:
        raise NotImplementedError

    def field_name(self, spec_name: str) -> str:
        return spec_name


class PythonClient(Client):
    name = "python"
    file = "sdk/python/hutch/_models.py"

    def __init__(self) -> None:
        tree = ast.parse((ROOT / self.file).read_text(encoding="utf-8"))
        self.classes: dict[str, ast.ClassDef] = {}
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and any(
                    _decorator_name(d) == "dataclass" for d in node.decorator_list):
                self.classes[node.name] = node
        self.cache: dict[str, Model] = {}

    def model(self, name: str) -> Model:
        if name in self.cache:
            return self.cache[name]
        if name not in self.classes:
            raise SystemExit(f"{self.file}: no dataclass {name} (scripts/check_client_models.py "
                             f"MODELS names it)")
        m = Model(name, self.file, {})
        self.cache[name] = m
        for stmt in self.classes[name].body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                if stmt.target.id == "raw":  # the JSON object as sent: every model's
                    continue
                m.fields[stmt.target.id] = Field(False, self.ctype(stmt.annotation))
        return m

    def ctype(self, node: ast.expr) -> CType:
        text = ast.unparse(node)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a string annotation
            return self.ctype(ast.parse(node.value, mode="eval").body)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            parts = _flatten_union(node)
            real = [p for p in parts if not (isinstance(p, ast.Constant) and p.value is None)]
            if len(real) == 1:
                t = self.ctype(real[0])
                return dataclasses.replace(t, nullable=t.nullable or len(real) < len(parts))
            return CType("other", text=text)
        if isinstance(node, ast.Name):
            simple = {"str": "string", "int": "integer", "float": "number", "bool": "boolean",
                      "bytes": "bytes", "Any": "any"}
            if node.id in simple:
                return CType(simple[node.id], text=text)
            if node.id in self.classes:
                return CType("model", model=self.model(node.id), text=text)
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if node.value.id in ("list", "List", "Sequence") and len(args) == 1:
                return CType("list", element=self.ctype(args[0]), text=text)
            if node.value.id in ("dict", "Dict", "Mapping") and len(args) == 2:
                return CType("map", element=self.ctype(args[1]), text=text)
        return CType("other", text=text)


def _decorator_name(d: ast.expr) -> str:
    if isinstance(d, ast.Call):
        d = d.func
    return d.id if isinstance(d, ast.Name) else d.attr if isinstance(d, ast.Attribute) else ""


def _flatten_union(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _flatten_union(node.left) + _flatten_union(node.right)
    return [node]


class TypeScriptClient(Client):
    def __init__(self, name: str, files: list[str], camel: bool, strict: bool) -> None:
        self.name = name
        self.camel = camel
        self.strict_presence = strict
        helper = ROOT / "sdk/typescript/scripts/model-shapes.mjs"
        if not (ROOT / "sdk/typescript/node_modules/typescript").is_dir():
            raise SystemExit("check_client_models: sdk/typescript/node_modules has no typescript "
                             "(run npm ci in sdk/typescript)")
        done = subprocess.run(["node", str(helper), *files], cwd=ROOT, capture_output=True,
                              text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"check_client_models: {helper.name} failed:\n{done.stderr}")
        shapes = json.loads(done.stdout)
        self.interfaces: dict[str, Any] = shapes["interfaces"]
        self.aliases: dict[str, Any] = shapes["aliases"]
        self.cache: dict[str, Model] = {}

    def field_name(self, spec_name: str) -> str:
        if not self.camel:
            return spec_name
        head, *rest = spec_name.split("_")
        return head + "".join(p[:1].upper() + p[1:] for p in rest)

    def model(self, name: str) -> Model:
        if name in self.cache:
            return self.cache[name]
        if name not in self.interfaces:
            raise SystemExit(f"{self.name}: no interface {name} (scripts/check_client_models.py "
                             f"MODELS names it)")
        decl = self.interfaces[name]
        m = Model(name, decl["file"], {})
        self.cache[name] = m
        for base in decl["extends"]:
            m.fields.update(self.model(base).fields)
        m.fields.update(self.members(decl["members"], name, decl["file"]))
        return m

    def members(self, members: dict[str, Any], owner: str, file: str) -> dict[str, Field]:
        return {k: Field(v["optional"], self.ctype(v["type"], f"{owner}.{k}", file))
                for k, v in members.items()}

    def ctype(self, t: dict[str, Any], where: str, file: str) -> CType:
        kind = t["kind"]
        if kind == "keyword":
            simple = {"string": "string", "number": "number", "bigint": "integer",
                      "boolean": "boolean", "unknown": "any", "any": "any"}
            if t["name"] in simple:
                return CType(simple[t["name"]], text=t["name"])
            if t["name"] in ("null", "undefined"):
                return CType("null", nullable=True, text=t["name"])
        if kind == "literal":
            value = t["value"]
            return CType(_json_kind(value), literals=frozenset([value]), text=json.dumps(value))
        if kind == "union":
            parts = [self.ctype(p, where, file) for p in t["types"]]
            nullable = any(p.kind == "null" for p in parts)
            real = [p for p in parts if p.kind != "null"]
            text = " | ".join(p.text for p in parts)
            if len(real) == 1:
                return dataclasses.replace(real[0], nullable=real[0].nullable or nullable)
            kinds = {p.kind for p in real}
            if len(kinds) == 1 and kinds <= {"string", "number", "integer", "boolean"}:
                # "a" | "b" is closed; "a" | string is any string.
                closed = all(p.literals is not None for p in real)
                literals = frozenset().union(*(p.literals for p in real)) if closed else None
                return CType(kinds.pop(), nullable, literals=literals, text=text)
            return CType("other", nullable, text=text)
        if kind == "array":
            return CType("list", element=self.ctype(t["element"], where, file),
                         text=f"{t['element']}[]")
        if kind == "object":
            inline = Model(where, file, self.members(t["members"], where, file))
            return CType("model", model=inline, text="{...}")
        if kind == "ref":
            name, args = t["name"], t["args"]
            if name == "Record" and len(args) == 2:
                return CType("map", element=self.ctype(args[1], where, file), text="Record")
            if name == "JsonObject":
                return CType("map", element=CType("any"), text=name)
            if name == "Date":
                return CType("date", text=name)
            if name in ("Uint8Array", "Buffer"):
                return CType("bytes", text=name)
            if name in self.interfaces:
                return CType("model", model=self.model(name), text=name)
            if name in self.aliases:
                aliased = self.ctype(self.aliases[name]["type"], where, file)
                return dataclasses.replace(aliased, text=name)
        return CType("other", text=t.get("text", kind))


def make_client(name: str) -> Client:
    if name == "python":
        return PythonClient()
    if name == "typescript":
        return TypeScriptClient(name, ["sdk/typescript/src/models.ts", "sdk/typescript/src/exec.ts",
                                       "sdk/typescript/src/box.ts", "sdk/typescript/src/files.ts"],
                                camel=True, strict=False)
    if name == "dashboard":
        return TypeScriptClient(name, ["web/dashboard/src/api.ts"], camel=False, strict=True)
    raise SystemExit(f"check_client_models: no client {name}")


# --- the comparison -------------------------------------------------------------------------------

class Checker:
    def __init__(self, spec: Spec, client: Client) -> None:
        self.spec = spec
        self.client = client
        self.problems: list[str] = []
        self.used: set[Allow] = set()
        self.done: set[tuple[str, str, str]] = set()
        self.allowed = {(a.model, a.field, a.kind): a for a in ALLOWED if a.client == client.name}

    def allow(self, model: str, field: str, kind: str) -> Allow | None:
        a = self.allowed.get((model, field, kind))
        if a is not None:
            self.used.add(a)
        return a

    def problem(self, where: str, model: Model, text: str) -> None:
        self.problems.append(f"{where}: {text} [{self.client.name}: {model.name} in {model.file}]")

    def compare_model(self, where: str, st: SpecType, model: Model, mode: str) -> None:
        key = (where, model.name, mode)
        if key in self.done:
            return
        self.done.add(key)
        seen: set[str] = set()
        for spec_field, schema in st.props.items():
            if self.allow(model.name, spec_field, "omitted"):
                continue
            renamed = self.allow(model.name, spec_field, "renamed")
            name = renamed.to if renamed else self.client.field_name(spec_field)
            field = model.fields.get(name)
            if field is None:
                if mode != "request-subset":
                    self.problem(where, model, f"'{spec_field}' is in the spec but not in the "
                                 f"client's model (as '{name}')")
                continue
            seen.add(name)
            ftype = self.spec.norm(schema)
            if renamed and ftype.kind == "object" and field.type.kind != "model":
                # Flattened: the model's field holds the object's only property.
                if set(ftype.props) != {renamed.to}:
                    self.problem(where, model, f"'{spec_field}' is flattened into '{name}' but "
                                 f"has the properties {sorted(ftype.props)}")
                    continue
                inner = self.spec.norm(ftype.props[renamed.to])
                inner.nullable = inner.nullable or ftype.nullable
                ftype = inner
            self.compare_field(f"{where}.{spec_field}", spec_field in st.required, ftype,
                               model, name, field)
        if mode == "answer-subset":
            return
        for name in model.fields:
            if name not in seen and not self.allow(model.name, name, "extra"):
                self.problem(where, model, f"'{name}' is in the client's model but not in the "
                             f"spec")

    def compare_field(self, where: str, required: bool, st: SpecType, model: Model, name: str,
                      field: Field) -> None:
        ct = field.type
        spec_missing = not required or st.nullable
        client_missing = field.optional or ct.nullable
        if client_missing != spec_missing and not self.allow(model.name, name, "presence"):
            if client_missing and not spec_missing:
                self.problem(where, model, f"'{name}' is optional or nullable in the client, "
                             f"but hutchd always sends it (required, not null)")
            elif self.client.strict_presence:
                self.problem(where, model, f"'{name}' may be absent or null (the spec), but the "
                             f"client's type says it is always there")
        if self.allow(model.name, name, "type"):
            return
        self.compare_type(where, st, ct, model, name)

    def compare_type(self, where: str, st: SpecType, ct: CType, model: Model, name: str) -> None:
        def mismatch(why: str = "") -> None:
            self.problem(where, model, f"'{name}' is {ct.text or ct.kind} in the client, "
                         f"{st.kind} in the spec{why}")

        if st.kind == "any":
            return
        if ct.kind == "any" or (ct.kind == "map" and ct.element and ct.element.kind == "any"):
            # The JSON object as sent.
            if st.kind not in ("object", "map", "union"):
                mismatch(" (a JSON object kept as sent; the spec's is not an object)")
            return
        if st.kind == "union":
            mismatch(" (a union of several types: model it as Any/unknown)")
            return
        if st.kind == "string":
            if ct.kind not in ("string", "bytes"):
                return mismatch()
            if ct.literals is not None:
                if st.enum is None:
                    return mismatch(f": the client allows only {sorted(ct.literals)}, the spec "
                                    f"any string")
                missing, extra = set(st.enum) - ct.literals, ct.literals - set(st.enum)
                if missing:
                    self.problem(where, model, f"'{name}' may be {sorted(missing)} (the spec's "
                                 f"enum), which the client's type {ct.text} does not allow")
                if extra:
                    self.problem(where, model, f"'{name}' allows {sorted(extra)} in the client "
                                 f"({ct.text}), which the spec's enum does not have")
            return
        if st.kind in ("integer", "number"):
            if ct.kind not in ("integer", "number") or (st.kind == "number"
                                                        and ct.kind == "integer"):
                mismatch()
            return
        if st.kind == "boolean":
            if ct.kind != "boolean":
                mismatch()
            return
        if st.kind == "array":
            if ct.kind != "list" or ct.element is None:
                return mismatch()
            self.compare_type(f"{where}[]", self.spec.norm(st.items), ct.element, model, name)
            return
        if st.kind == "map":
            if ct.kind != "map" or ct.element is None:
                return mismatch()
            self.compare_type(f"{where}{{}}", self.spec.norm(st.items), ct.element, model, name)
            return
        if st.kind == "object":
            if ct.kind != "model" or ct.model is None:
                return mismatch()
            inner = f"components.schemas.{st.ref}" if st.ref else where
            self.compare_model(inner, st, ct.model, "mirror")
            return
        mismatch()


def check(spec: Spec, clients: list[str]) -> list[str]:
    problems: list[str] = []
    covered: set[str] = set()
    for _, schema, _, _ in MODELS:
        spec.refs_from(spec.locate(schema), covered)
    for name, s in spec.schemas.items():
        st = spec.norm(s)
        if name in NOT_MODELED:
            if name in covered:
                problems.append(f"components.schemas.{name}: is modelled (MODELS), but "
                                f"NOT_MODELED lists it: remove it there "
                                f"[scripts/check_client_models.py]")
        elif st.kind == "object" and name not in covered and not name.startswith("Error"):
            problems.append(f"components.schemas.{name}: no client models it: add it to MODELS "
                            f"(and the clients), or to NOT_MODELED saying why "
                            f"[scripts/check_client_models.py]")
    for missing in sorted(set(NOT_MODELED) - set(spec.schemas)):
        problems.append(f"components.schemas.{missing}: not in the spec, but NOT_MODELED lists "
                        f"it: remove it there [scripts/check_client_models.py]")
    for name in clients:
        client = make_client(name)
        checker = Checker(spec, client)
        for client_name, schema, model, mode in MODELS:
            if client_name != name:
                continue
            st = spec.norm(spec.locate(schema))
            where = f"components.schemas.{schema}" if " " not in schema else schema
            if st.kind != "object":
                problems.append(f"{where}: not an object schema (MODELS maps it to {model})")
                continue
            checker.compare_model(where, st, client.model(model), mode)
        problems += checker.problems
        for a in ALLOWED:
            if a.client == name and a not in checker.used:
                problems.append(f"ALLOWED entry ({a.client}, {a.model}, {a.field}, {a.kind}) "
                                f"matches nothing: remove it [scripts/check_client_models.py]")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", type=pathlib.Path,
                        default=pathlib.Path(os.environ.get("HUTCH_OPENAPI_SPEC")
                                             or ROOT / "docs/openapi.yaml"))
    parser.add_argument("--client", action="append", choices=["python", "typescript", "dashboard"])
    args = parser.parse_args()
    clients = args.client or ["python", "typescript", "dashboard"]
    problems = check(Spec(args.spec), clients)
    if problems:
        print(f"The clients' models differ from {args.spec} ({', '.join(clients)}):",
              file=sys.stderr)
        for p in problems:
            print(f"  {p}", file=sys.stderr)
        print("Add the field to the client's model (the SDK's parser too), fix the spec, or, for "
              "a deliberate difference, add an entry saying why to ALLOWED in "
              "scripts/check_client_models.py.", file=sys.stderr)
        return 1
    print(f"check_client_models: {', '.join(clients)} match {args.spec}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
