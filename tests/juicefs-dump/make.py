#!/usr/bin/env python3
"""Writes the JuiceFS-format fixture of tests/e2e/tests/dump.rs: a metadata
dump in JuiceFS 1.x's JSON layout (dump.json, its bucket written as @BUCKET@)
and the volume's blocks named as JuiceFS names them
(bucket/NAME/chunks/ID/1000000/ID/1000/ID_INDEX_SIZE), plus what every file
must read back as (expected.txt: size, sha256 and the path's bytes in hex), computed here by
overlaying the slices independently of jfs. No JuiceFS binary is needed:
the layout follows JuiceFS's documented dump format. Run it again only to
change the fixture: python3 tests/juicefs-dump/make.py

Two more volumes hold the same files with their blocks stored otherwise:
lz4/ (Compression "lz4") and sealed/ (Compression "zstd", EncryptAlgo
"chacha20-rsa", the passphrase-protected test key of
client/src/object/testdata kept as JuiceFS keeps it, KeyEncrypted), written
with tests/e2e/scripts/juicefs_object.py (liblz4, libzstd and OpenSSL
through Python: run this with the test tools' Python,
/opt/jfs-test-venv/bin/python, for them).
"""
import hashlib
import json
import pathlib
import shutil

HERE = pathlib.Path(__file__).resolve().parent
NAME = "legacyfs"
UUID = "6a1f0c2e-9b3d-4c57-8e21-5d4f3a2b1c0d"
BLOCK = 64 * 1024            # BlockSize 64 KiB
CHUNK = 64 << 20
TRASH = 0x7FFFFFFF10000000


def stream(seed, size):
    """The stored bytes of slice `seed`."""
    out = bytearray()
    n = 0
    while len(out) < size:
        out += hashlib.sha256(f"slice {seed} block {n}".encode()).digest()
        n += 1
    return bytes(out[:size])


slices = {}                  # id -> size


def slice_(sid, size, pos=0, off=0, length=None, key="id"):
    """A slice as JuiceFS writes it: pos and off left out when 0 (dumps
    before 1.1 name the id "chunkid")."""
    slices[sid] = size
    out = {key: sid}
    if pos:
        out["pos"] = pos
    out["size"] = size
    if off:
        out["off"] = off
    out["len"] = size - off if length is None else length
    return out


def hole(pos, length):
    return {"id": 0, "pos": pos, "size": length, "len": length}


def attr(inode, kind, mode, uid=0, gid=0, t=1700000000, ns=0, nlink=1, length=0, rdev=0):
    a = {"inode": inode, "type": kind, "mode": mode, "uid": uid, "gid": gid,
         "atime": t, "mtime": t + 1, "ctime": t + 2}
    if ns:
        a.update({"atimensec": ns, "mtimensec": ns + 1, "ctimensec": ns + 2})
    a.update({"nlink": nlink, "length": length})
    if rdev:
        a["rdev"] = rdev
    return a


hard = {"attr": attr(4, "regular", 0o640, 1000, 1000, 1700000400, 4, nlink=2, length=1000),
        "chunks": [{"index": 0, "slices": [slice_(14, 1000)]}]}
# the same file at its second name, with a stale link count (JuiceFS's
# loader counts the names instead)
stale = json.loads(json.dumps(hard))
stale["attr"]["nlink"] = 1
report = {
    "attr": attr(3, "regular", 0o664, 1000, 1000, 1700000300, 123456789, length=150000),
    "xattrs": [{"name": "user.project", "value": "alpha"}],
    "posix_acl_access": {"owner": 6, "group": 4, "other": 4, "mask": 6,
                         "users": [{"id": 1001, "perm": 6}], "groups": None},
    # three writes: the whole file, an overwrite in the middle, then the
    # tail taken from the middle of a slice (off > 0)
    "chunks": [{"index": 0, "slices": [slice_(11, 150000), slice_(12, 20000, pos=70000),
                                      slice_(13, 30000, pos=140000, off=10000, length=5000)]}],
}
tree = {
    "attr": attr(1, "directory", 0o755, t=1700000000, nlink=3),
    "entries": {
        "docs": {
            "attr": attr(2, "directory", 0o2750, 1000, 1000, 1700000100, 5, nlink=2),
            "xattrs": [{"name": "user.team", "value": "storage"}],
            # a default ACL without a mask (JuiceFS writes 0xFFFF for none)
            "posix_acl_default": {"owner": 7, "group": 5, "other": 0, "mask": 65535,
                                  "users": [{"id": 1002, "perm": 5}], "groups": None},
            "entries": {
                "report.txt": report,
                "hard-a": hard,
                "tool": {
                    "attr": attr(10, "regular", 0o4755, 0, 0, 1700000500, 0, length=3000),
                    "xattrs": [{"name": "user.sum", "value": "%00%01bin%FF%25"}],
                    "chunks": [{"index": 0, "slices": [slice_(16, 3000, key="chunkid")]}],
                },
            },
        },
        "hard-b": stale,
        # a character device: 1, 3 as the kernel encodes it
        "null": {"attr": attr(12, "chardev", 0o666, 0, 0, 1700001100, rdev=(1 << 8) | 3)},
        "sparse.bin": {
            # 64 MiB + 100000 bytes: a hole slice in chunk 0, data in chunk 1
            "attr": attr(5, "regular", 0o644, 0, 0, 1700000600, 999999999 - 2, length=CHUNK + 100000),
            "chunks": [{"index": 0, "slices": [hole(0, 4096)]},
                       {"index": 1, "slices": [slice_(15, 100000)]}],
        },
        "link": {"attr": attr(6, "symlink", 0o777, 1000, 1000, 1700000700, 7, length=15),
                 "symlink": "docs/report.txt"},
        "odd%FFname": {"attr": attr(7, "regular", 0o644, 0, 0, 1700000800, length=10),
                       "chunks": [{"index": 0, "slices": [slice_(17, 10)]}]},
        # times before 1970
        "100%25 done": {"attr": attr(8, "regular", 0o600, 1001, 1001, -100000000, 5)},
        "pipe": {"attr": attr(9, "fifo", 0o644, 0, 0, 1700001000)},
    },
}
trash = {
    "attr": attr(TRASH, "directory", 0o555, nlink=3),
    "entries": {
        "2026-11-20-10": {
            "attr": attr(TRASH + 1, "directory", 0o555, t=1700002000, nlink=2),
            "entries": {
                "2-11-old.txt": {"attr": attr(11, "regular", 0o644, 1000, 1000, 1700001900, length=500),
                                 "chunks": [{"index": 0, "slices": [slice_(18, 500)]}]},
            },
        },
    },
}
dump = {
    "Setting": {"Name": NAME, "UUID": UUID, "Storage": "file", "Bucket": "@BUCKET@", "AccessKey": "",
                "SecretKey": "removed", "BlockSize": BLOCK // 1024, "Compression": "none",
                "TrashDays": 1, "MetaVersion": 1, "DirStats": True, "EnableACL": True},
    "Counters": {"usedSpace": 0, "usedInodes": 12, "nextInodes": 13, "nextChunk": 19,
                 "nextSession": 4, "nextTrash": 1},
    "Sustained": [{"sid": 3, "inodes": [98]}],
    "DelFiles": [{"inode": 99, "length": 100, "expire": 1700003000}],
    "Quotas": {"2": {"maxSpace": 10 << 20, "maxInodes": 100}},
    "UserQuotas": {"1000": {"maxSpace": 1 << 30, "maxInodes": 0}},
    "FSTree": tree,
    "Trash": trash,
}

ROOT = HERE.parent.parent
KEY = ROOT / "client/src/object/testdata/rsa2048-encrypted.pem"
PASSPHRASE = "jfs-test-passphrase"


def write_volume(where, compression="none", algo=None):
    """dump.json and bucket/ in `where`, blocks compressed by `compression`
    and, with `algo`, every object sealed with KEY."""
    setting = dict(dump["Setting"], Compression=compression)
    encode = None
    if compression != "none" or algo:
        import base64
        import importlib.util
        import os
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        spec = importlib.util.spec_from_file_location(
            "juicefs_object", ROOT / "tests/e2e/scripts/juicefs_object.py")
        fmt = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(fmt)
        rsa_key = None
        if algo:
            os.environ["JFS_RSA_PASSPHRASE"] = PASSPHRASE
            rsa_key = fmt.private_key(KEY)
            # the PEM as JuiceFS keeps it in its format (KeyEncrypted):
            # AES-128-GCM under the MD5 of the uuid, base64(nonce + sealed)
            nonce = os.urandom(12)
            sealed = AESGCM(hashlib.md5(UUID.encode()).digest()).encrypt(nonce, KEY.read_bytes(), None)
            setting.update(EncryptKey=base64.b64encode(nonce + sealed).decode(), EncryptAlgo=algo,
                           KeyEncrypted=True)

        def encode(data, block):
            if block:
                data = fmt.compress(compression, data)
            return fmt.seal(rsa_key, algo, data) if rsa_key else data
    where.mkdir(exist_ok=True)
    # JuiceFS writes names and symlinks raw between quotes (already %-escaped)
    text = json.dumps(dict(dump, Setting=setting), indent=2, ensure_ascii=False)
    (where / "dump.json").write_text(text + "\n")
    bucket = where / "bucket"
    shutil.rmtree(bucket, ignore_errors=True)
    for sid, size in slices.items():
        data = stream(sid, size)
        for i in range((size + BLOCK - 1) // BLOCK):
            block = data[i * BLOCK:(i + 1) * BLOCK]
            key = bucket / NAME / "chunks" / str(sid // 1000000) / str(sid // 1000) / f"{sid}_{i}_{len(block)}"
            key.parent.mkdir(parents=True, exist_ok=True)
            key.write_bytes(encode(block, True) if encode else block)
    # (sealed too, as JuiceFS seals every object of an encrypted volume)
    uuid = encode(UUID.encode(), False) if encode else UUID.encode()
    (bucket / NAME / "juicefs_uuid").write_bytes(uuid)
    (bucket / NAME / "juicefs_uuid").chmod(0o644)
    return bucket


bucket = write_volume(HERE)
write_volume(HERE / "lz4", "lz4")
write_volume(HERE / "sealed", "zstd", "chacha20-rsa")


def read_file(entry):
    """A file's bytes: its chunks' slices laid over zeros, later ones on top."""
    length = entry["attr"]["length"]
    out = bytearray(length)
    for c in entry.get("chunks", []):
        for s in c["slices"]:
            start = c["index"] * CHUNK + s.get("pos", 0)
            sid = s.get("id") or s.get("chunkid", 0)
            data = bytes(s["len"]) if sid == 0 else stream(sid, s["size"])[s.get("off", 0):][:s["len"]]
            end = min(start + len(data), length)
            if end > start:
                out[start:end] = data[:end - start]
    return bytes(out)


expected = {}


def split_escaped(text):
    """The characters of an escaped name, each %XX as one item."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "%" and i + 2 < len(text) and all(c in "0123456789ABCDEF" for c in text[i + 1:i + 3]):
            out.append(text[i:i + 3]); i += 3
        else:
            out.append(text[i]); i += 1
    return out


def walk(prefix, entry):
    for name, e in entry.get("entries", {}).items():
        path = f"{prefix}/{name}"
        if e["attr"]["type"] == "regular":
            data = read_file(e)
            raw = bytes(int(p[1:3], 16) if p.startswith("%") else ord(p) for p in split_escaped(path))
            expected[raw.hex()] = f"{len(data)} {hashlib.sha256(data).hexdigest()}"
        walk(path, e)


walk("", tree)
walk("/.trash", trash)
# one line per file: size, sha256, the path's bytes in hex
(HERE / "expected.txt").write_text("".join(f"{v} {k}\n" for k, v in sorted(expected.items())))
print(f"wrote {HERE / 'dump.json'}, {len(slices)} slices in {bucket}, {len(expected)} expected files")
