#!/usr/bin/env python3
"""Small OCI helpers for tests/registry/images.sh (standard library only).

  ocitool.py tree-tar SRC OUT [--chown REL=UID:GID]...
      A reproducible tar of the directory SRC (names sorted, no "./" prefix, mtime fixed,
      owned by 0:0 unless --chown says otherwise for REL and everything below it).
  ocitool.py layers-tar N OUT
      Layer N (2, 3 or 4) of the `layers` image, crafted entry by entry (whiteouts, an opaque
      directory, hard links, xattrs, a file capability). README.md describes the result.
  ocitool.py import-image SRC_LAYOUT SRC_TAG DST_LAYOUT DST_TAG
      Copies an image (manifest, config, layers) from one OCI layout into another, under a tag.
  ocitool.py index LAYOUT REF TAG=OS/ARCH[/VARIANT]...
      Makes an image index of the manifests tagged TAG (with those platforms), writes it as a
      blob and points REF at it in index.json; the TAG refs themselves are removed.
  ocitool.py verify-layers ROOTFS
      Checks that an unpacked `layers` image at ROOTFS looks as README.md says (exit 1 if not).
"""

import hashlib
import io
import json
import os
import shutil
import stat
import sys
import tarfile

MTIME = 1700000000  # 2023-11-14T22:13:20Z: every entry we write has this mtime
INDEX_MT = "application/vnd.oci.image.index.v1+json"
MANIFEST_MT = "application/vnd.oci.image.manifest.v1+json"
REF_NAME = "org.opencontainers.image.ref.name"

# security.capability for cap_net_bind_service=+ep: struct vfs_cap_data revision 2
# (magic_etc = VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE), permitted bit 10, little-endian.
CAP_NET_BIND_SERVICE_EP = bytes.fromhex("0100000200040000000000000000000000000000")
LONG_DIR = "data/long/" + "d" * 60
LONG_FILE = LONG_DIR + "/" + "f" * 60 + ".txt"  # a path > 100 bytes: needs a PAX header
UNICODE_FILE = "data/\u00fcn\u00efc\u00f8d\u00e9.txt"


def die(msg):
    print(f"ocitool: {msg}", file=sys.stderr)
    sys.exit(1)


# ------------------------------------------------------------------------------------------
# tars


def _info(name, kind=tarfile.REGTYPE, mode=0o644, uid=0, gid=0):
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.mode = mode
    ti.uid, ti.gid = uid, gid
    ti.uname = ti.gname = ""
    ti.mtime = MTIME
    return ti


class Layer:
    def __init__(self, path):
        self.tar = tarfile.open(path, "w", format=tarfile.PAX_FORMAT, encoding="utf-8")

    def dir(self, name, mode=0o755, uid=0, gid=0):
        self.tar.addfile(_info(name.rstrip("/") + "/", tarfile.DIRTYPE, mode, uid, gid))

    def file(self, name, data=b"", mode=0o644, uid=0, gid=0, xattrs=None):
        if isinstance(data, str):
            data = data.encode()
        ti = _info(name, tarfile.REGTYPE, mode, uid, gid)
        ti.size = len(data)
        if xattrs:
            # PAX SCHILY.xattr records, as docker, buildah and GNU tar --xattrs write them.
            # Values are bytes; every byte we use is < 0x80 so utf-8 keeps them unchanged.
            ti.pax_headers = {
                "SCHILY.xattr." + k: v.decode("utf-8", "surrogateescape") for k, v in xattrs.items()
            }
        self.tar.addfile(ti, io.BytesIO(data))

    def symlink(self, name, target):
        ti = _info(name, tarfile.SYMTYPE, 0o777)
        ti.linkname = target
        self.tar.addfile(ti)

    def hardlink(self, name, target):
        ti = _info(name, tarfile.LNKTYPE, 0o644)
        ti.linkname = target
        self.tar.addfile(ti)

    def close(self):
        self.tar.close()


def layers_tar(n, out):
    layer = Layer(out)
    if n == 2:
        layer.dir("data")
        layer.file("data/file.txt", "hello layers\n")
        layer.hardlink("data/hardlink.txt", "data/file.txt")
        layer.symlink("data/symlink", "file.txt")
        layer.symlink("data/abs-symlink", "/data/file.txt")
        layer.symlink("data/dangling", "/nonexistent/target")
        layer.dir("data/keep")
        layer.file("data/keep/kept.txt", "kept\n")
        layer.dir("data/drop")
        layer.file("data/drop/dropped.txt", "dropped\n")
        layer.file("data/xattr.txt", "has a user xattr\n", xattrs={"user.hutch": b"hello-xattr"})
        layer.file("data/cap-bin", "#!/bin/sh\necho cap\n", mode=0o755,
                   xattrs={"security.capability": CAP_NET_BIND_SERVICE_EP})
        layer.file("data/setuid", "#!/bin/sh\necho setuid\n", mode=0o4755)
        layer.dir("data/setgid-dir", mode=0o2775, uid=0, gid=1000)
        layer.dir("data/sticky", mode=0o1777)
        layer.file("data/owned.txt", "owned by app\n", mode=0o640, uid=1000, gid=1000)
        layer.file("data/empty", "", mode=0o600)
        layer.file("data/version.txt", "v1\n")
        layer.file("data/file-to-dir", "i am a file\n")
        layer.dir("data/dir-to-file")
        layer.file("data/dir-to-file/inner.txt", "inner\n")
        layer.dir("data/long")
        layer.dir(LONG_DIR)
        layer.file(LONG_FILE, "long name\n")
        layer.file(UNICODE_FILE, "unicode name\n")
        layer.dir("opq")
        layer.file("opq/a.txt", "a\n")
        layer.file("opq/b.txt", "b\n")
        layer.dir("opq/sub")
        layer.file("opq/sub/deep.txt", "deep\n")
    elif n == 3:
        # Whiteouts come before their siblings, as the image spec recommends.
        layer.dir("data")
        layer.file("data/.wh.drop")  # removes /data/drop and everything in it
        layer.file("data/.wh.dir-to-file")  # removes the directory, then ...
        layer.file("data/dir-to-file", "now a file\n")  # ... a file takes its name
        layer.dir("data/file-to-dir")  # a directory replaces the file (no whiteout needed)
        layer.file("data/file-to-dir/inside.txt", "inside\n")
        layer.dir("opq")
        layer.file("opq/.wh..wh..opq")  # hides everything lower layers put in /opq
        layer.file("opq/c.txt", "c\n")
    elif n == 4:
        layer.dir("data")
        layer.file("data/version.txt", "v2\n", mode=0o600, uid=1000, gid=1000)
    else:
        die(f"no layer {n} (2, 3 or 4)")
    layer.close()


def tree_tar(src, out, chowns):
    owners = {}
    for c in chowns:
        rel, _, ids = c.partition("=")
        uid, _, gid = ids.partition(":")
        owners[rel.strip("/")] = (int(uid), int(gid))

    def owner_of(rel):
        best = (0, 0)
        best_len = -1
        for prefix, ids in owners.items():
            if (rel == prefix or rel.startswith(prefix + "/")) and len(prefix) > best_len:
                best, best_len = ids, len(prefix)
        return best

    seen_inodes = {}
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT, encoding="utf-8") as tar:
        for root, dirs, files in os.walk(src):
            dirs.sort()
            rel_root = os.path.relpath(root, src)
            names = [] if rel_root == "." else [rel_root]
            for name in names + sorted(os.path.join(rel_root, f) for f in files) + sorted(
                    os.path.join(rel_root, d) for d in dirs if os.path.islink(os.path.join(root, d))):
                rel = os.path.normpath(name)
                path = os.path.join(src, rel)
                st = os.lstat(path)
                ti = tar.gettarinfo(path, rel)
                ti.uid, ti.gid = owner_of(rel)
                ti.uname = ti.gname = ""
                ti.mtime = MTIME
                if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                    key = (st.st_dev, st.st_ino)
                    if key in seen_inodes:
                        ti.type, ti.linkname, ti.size = tarfile.LNKTYPE, seen_inodes[key], 0
                    else:
                        seen_inodes[key] = rel
                if ti.type == tarfile.REGTYPE:
                    with open(path, "rb") as f:
                        tar.addfile(ti, f)
                else:
                    tar.addfile(ti)


# ------------------------------------------------------------------------------------------
# layouts


def _blob_path(layout, digest):
    algo, _, hexd = digest.partition(":")
    return os.path.join(layout, "blobs", algo, hexd)


def _read_index(layout):
    with open(os.path.join(layout, "index.json")) as f:
        return json.load(f)


def _write_json_atomic(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, separators=(",", ":"))
    os.replace(tmp, path)


def _put_blob(layout, data):
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    path = _blob_path(layout, digest)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if not os.path.exists(path):
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.replace(path + ".tmp", path)
    return digest, len(data)


def _find_ref(layout, tag):
    for desc in _read_index(layout).get("manifests", []):
        if desc.get("annotations", {}).get(REF_NAME) == tag:
            return desc
    die(f"{layout}: no ref '{tag}' in index.json")


def import_image(src, src_tag, dst, dst_tag):
    desc = _find_ref(src, src_tag)
    if desc["mediaType"] != MANIFEST_MT:
        die(f"{src}:{src_tag} is a {desc['mediaType']}, not an image manifest")
    with open(_blob_path(src, desc["digest"]), "rb") as f:
        manifest = json.load(f)
    for d in [desc, manifest["config"]] + manifest["layers"]:
        target = _blob_path(dst, d["digest"])
        if not os.path.exists(target):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(_blob_path(src, d["digest"]), target + ".tmp")
            os.replace(target + ".tmp", target)
    index = _read_index(dst)
    index["manifests"] = [m for m in index.get("manifests", [])
                          if m.get("annotations", {}).get(REF_NAME) != dst_tag]
    new = dict(desc)
    new["annotations"] = {REF_NAME: dst_tag}
    index["manifests"].append(new)
    _write_json_atomic(os.path.join(dst, "index.json"), index)


def make_index(layout, ref, entries):
    manifests = []
    tags = []
    for e in entries:
        tag, _, plat = e.partition("=")
        parts = plat.split("/")
        if len(parts) not in (2, 3):
            die(f"bad platform '{plat}' (want OS/ARCH[/VARIANT])")
        desc = dict(_find_ref(layout, tag))
        desc.pop("annotations", None)
        desc["platform"] = {"architecture": parts[1], "os": parts[0]}
        if len(parts) == 3:
            desc["platform"]["variant"] = parts[2]
        manifests.append(desc)
        tags.append(tag)
    blob = json.dumps({"schemaVersion": 2, "mediaType": INDEX_MT, "manifests": manifests},
                      separators=(",", ":")).encode()
    digest, size = _put_blob(layout, blob)
    index = _read_index(layout)
    index["manifests"] = [m for m in index.get("manifests", [])
                          if m.get("annotations", {}).get(REF_NAME) not in tags + [ref]]
    index["manifests"].append({"mediaType": INDEX_MT, "digest": digest, "size": size,
                               "annotations": {REF_NAME: ref}})
    _write_json_atomic(os.path.join(layout, "index.json"), index)


# ------------------------------------------------------------------------------------------
# verify-layers: the README table, as code


def verify_layers(root):
    errors = []

    def p(rel):
        return os.path.join(root, rel)

    def check(cond, msg):
        if not cond:
            errors.append(msg)

    def meta(rel, kind, mode, uid=0, gid=0):
        try:
            st = os.lstat(p(rel))
        except FileNotFoundError:
            errors.append(f"/{rel}: missing")
            return None
        check(stat.S_IFMT(st.st_mode) == kind, f"/{rel}: wrong type {oct(stat.S_IFMT(st.st_mode))}")
        if mode is not None:
            check(stat.S_IMODE(st.st_mode) == mode,
                  f"/{rel}: mode {oct(stat.S_IMODE(st.st_mode))}, want {oct(mode)}")
        check((st.st_uid, st.st_gid) == (uid, gid),
              f"/{rel}: owner {st.st_uid}:{st.st_gid}, want {uid}:{gid}")
        return st

    def content(rel, want):
        try:
            with open(p(rel), "rb") as f:
                got = f.read()
            check(got == want.encode(), f"/{rel}: content {got!r}, want {want!r}")
        except OSError as e:
            errors.append(f"/{rel}: {e}")

    def absent(rel):
        check(not os.path.lexists(p(rel)), f"/{rel}: should not exist")

    def xattr(rel, name, want):
        try:
            got = os.getxattr(p(rel), name, follow_symlinks=False)
            check(got == want, f"/{rel}: xattr {name}={got.hex()}, want {want.hex()}")
        except OSError as e:
            errors.append(f"/{rel}: xattr {name}: {e}")

    D, F, L = stat.S_IFDIR, stat.S_IFREG, stat.S_IFLNK
    # from the busybox base layer
    meta("bin/busybox", F, 0o755)
    meta("home/app", D, 0o755, 1000, 1000)
    check(os.path.islink(p("bin/sh")) and os.readlink(p("bin/sh")) == "busybox", "/bin/sh: not -> busybox")
    # layer 2, as changed by 3 and 4
    meta("data", D, 0o755)
    a = meta("data/file.txt", F, 0o644)
    b = meta("data/hardlink.txt", F, 0o644)
    if a and b:
        check(a.st_ino == b.st_ino, "/data/hardlink.txt: not a hard link of /data/file.txt")
        check(a.st_nlink == 2, f"/data/file.txt: nlink {a.st_nlink}, want 2")
    content("data/file.txt", "hello layers\n")
    for rel, target in (("data/symlink", "file.txt"), ("data/abs-symlink", "/data/file.txt"),
                        ("data/dangling", "/nonexistent/target")):
        if meta(rel, L, None):
            check(os.readlink(p(rel)) == target, f"/{rel}: -> {os.readlink(p(rel))}, want {target}")
    meta("data/keep", D, 0o755)
    content("data/keep/kept.txt", "kept\n")
    absent("data/drop")
    meta("data/xattr.txt", F, 0o644)
    xattr("data/xattr.txt", "user.hutch", b"hello-xattr")
    meta("data/cap-bin", F, 0o755)
    xattr("data/cap-bin", "security.capability", CAP_NET_BIND_SERVICE_EP)
    meta("data/setuid", F, 0o4755)
    meta("data/setgid-dir", D, 0o2775, 0, 1000)
    meta("data/sticky", D, 0o1777)
    meta("data/owned.txt", F, 0o640, 1000, 1000)
    meta("data/empty", F, 0o600)
    content("data/empty", "")
    meta("data/version.txt", F, 0o600, 1000, 1000)
    content("data/version.txt", "v2\n")
    meta("data/file-to-dir", D, 0o755)
    content("data/file-to-dir/inside.txt", "inside\n")
    meta("data/dir-to-file", F, 0o644)
    content("data/dir-to-file", "now a file\n")
    content(LONG_FILE, "long name\n")
    content(UNICODE_FILE, "unicode name\n")
    meta("opq", D, 0o755)
    check(sorted(os.listdir(p("opq"))) == ["c.txt"] if os.path.isdir(p("opq")) else False,
          f"/opq: holds {sorted(os.listdir(p('opq'))) if os.path.isdir(p('opq')) else None}, want ['c.txt']")
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            if n.startswith(".wh."):
                errors.append(f"{os.path.join(dirpath, n)[len(root):]}: a whiteout left in the tree")
    for e in errors:
        print(f"verify-layers: {e}", file=sys.stderr)
    if errors:
        sys.exit(1)
    print("verify-layers: ok", file=sys.stderr)


def main(argv):
    if len(argv) < 2:
        die(__doc__)
    cmd, args = argv[1], argv[2:]
    if cmd == "tree-tar" and len(args) >= 2:
        chowns = []
        rest = args[2:]
        while rest:
            if rest[0] != "--chown" or len(rest) < 2:
                die("usage: tree-tar SRC OUT [--chown REL=UID:GID]...")
            chowns.append(rest[1])
            rest = rest[2:]
        tree_tar(args[0], args[1], chowns)
    elif cmd == "layers-tar" and len(args) == 2:
        layers_tar(int(args[0]), args[1])
    elif cmd == "import-image" and len(args) == 4:
        import_image(*args)
    elif cmd == "index" and len(args) >= 3:
        make_index(args[0], args[1], args[2:])
    elif cmd == "verify-layers" and len(args) == 1:
        verify_layers(args[0])
    else:
        die(__doc__)


if __name__ == "__main__":
    main(sys.argv)
