"""Hostile arguments through the S3 gateway, answered as the mount answers them, in S3's terms.

The core's random hostile-argument run (tests/e2e/tests/hostile.rs) made
where S3 has the operation: PUT, GET (whole and with hostile ranges, up
to 2**63 and past it), HEAD, DELETE, UploadPart numbers and listing,
with keys of 255- and 256-byte parts, ".", "..", control characters, and
prefixes that are files. Each call is made alike on a twin directory
through the FUSE mount of the same volume; the gateway must succeed where
the mount does and refuse where it refuses, with the S3 code for the
mount's errno (ENAMETOOLONG: KeyTooLongError; EISDIR, ENOTDIR, EEXIST:
InvalidRequest); a key with "." or ".." parts is no path and is
InvalidArgument. What the gateway stores and serves is byte for byte what
the mount reads, at every hostile range of a file the mount wrote at
hostile offsets. A failure prints the seed and the last calls;
``JFS_HOSTILE_SEED=N`` reruns one, ``JFS_HOSTILE_OPS=N`` sets the length.
"""
import errno
import os
import random
import uuid

import boto3
import botocore
from botocore.config import Config

ENDPOINT = os.environ.get("JFS_TEST_S3_ENDPOINT", "")
ACCESS, SECRET = os.environ.get("JFS_TEST_S3_KEYS", ":").split(":")

NAMES = [
    "plain",
    "n" * 255,
    "n" * 256,
    "m" * 254,
    ".",
    "..",
    "...",
    "line\nbreak\ttab",
    " ",
    "-rf",
    "caf\u00e9 \U0001F600",
    "e" * 100 + "\u00e9" * 78,  # 256 bytes in UTF-8, 178 characters
]
PREFIXES = ["", "d/", "d/e/", "plain/", "n" * 255 + "/"]

# the S3 code for the mount's answer
S3_CODE = {
    errno.ENAMETOOLONG: "KeyTooLongError",
    errno.EISDIR: "InvalidRequest",
    errno.ENOTDIR: "InvalidRequest",
    errno.EEXIST: "InvalidRequest",
    errno.ENOENT: "NoSuchKey",
}


def hostile_offset(rng):
    k = rng.randrange(64)
    base = 2**63 - 1 if k == 63 else 2**k
    return max(base + rng.choice([-3, -2, -1, 0, 1, 2]), 0)


def s3_answer(call):
    try:
        return ("ok", call())
    except botocore.exceptions.ClientError as e:
        return ("error", e.response["Error"]["Code"])


def mount_answer(call):
    try:
        return ("ok", call())
    except OSError as e:
        return ("error", S3_CODE.get(e.errno, errno.errorcode.get(e.errno, e.errno)))


def no_path(key):
    return any(part in (".", "..") for part in key.rstrip("/").split("/"))


def too_long(path):
    """Whether the mount refuses the path as too long (ENAMETOOLONG: a part
    longer than 255 bytes, reached by the walk)."""
    return mount_answer(lambda: os.lstat(path)) == ("error", "KeyTooLongError")


def put_through_mount(path, body):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(body)


def read_through_mount(path):
    with open(path, "rb") as f:
        return f.read()


def run(s3, mount, seed, ops):
    rng = random.Random(seed)
    bucket = f"h-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=bucket)
    twin = os.path.join(mount, f"{bucket}-twin")
    os.mkdir(twin)
    stored = os.path.join(mount, bucket)
    trail = []
    # a file the mount writes at hostile offsets, served by the gateway
    data = os.path.join(stored, "data")
    fd = os.open(data, os.O_RDWR | os.O_CREAT, 0o644)
    for op in range(ops):
        key = rng.choice(PREFIXES) + rng.choice(NAMES)
        what = rng.randrange(7)
        said = f"seed {seed}, op {op}: {what} {key!r}"
        trail = (trail + [said])[-40:]
        context = f"{said}; last ops {trail}"
        if what == 0:
            body = os.urandom(rng.randrange(4))
            got = s3_answer(lambda: s3.put_object(Bucket=bucket, Key=key, Body=body) and None)
            if no_path(key):
                want = ("error", "InvalidArgument")
            else:
                want = mount_answer(lambda: put_through_mount(os.path.join(twin, key), body))
            assert got == want, f"PUT {context}: gateway {got}, mount {want}"
            if got[0] == "ok":
                assert read_through_mount(os.path.join(stored, key)) == body, context
        elif what == 1:
            got = s3_answer(lambda: s3.get_object(Bucket=bucket, Key=key)["Body"].read())
            if no_path(key):
                want = ("error", "InvalidArgument")
            else:
                want = mount_answer(lambda: read_through_mount(os.path.join(stored, key)))
                # (a directory is no object)
                if want == ("error", "InvalidRequest") or (
                        want[0] == "error" and os.path.isdir(os.path.join(stored, key))):
                    want = ("error", "NoSuchKey")
            assert got == want, f"GET {context}: gateway {got}, mount {want}"
        elif what == 2:
            was_file = not no_path(key) and os.path.isfile(os.path.join(stored, key))
            got = s3_answer(lambda: s3.delete_object(Bucket=bucket, Key=key) and None)
            if no_path(key):
                assert got == ("error", "InvalidArgument"), f"DELETE {context}: {got}"
            elif too_long(os.path.join(stored, key)):
                assert got == ("error", "KeyTooLongError"), f"DELETE {context}: {got}"
            elif was_file:
                assert got == ("ok", None), f"DELETE {context}: {got}"
                assert not os.path.lexists(os.path.join(stored, key)), context
                os.unlink(os.path.join(twin, key))
            else:
                # a missing key is deleted without error, as in S3; a
                # directory is no object and stays
                assert got == ("ok", None), f"DELETE {context}: {got}"
        elif what == 3:
            got = s3_answer(lambda: s3.head_object(Bucket=bucket, Key=key)["ContentLength"])
            path = os.path.join(stored, key)
            if no_path(key) or too_long(path):
                # (HEAD answers no body: the status says it)
                want = ("error", "400")
            elif os.path.isfile(path):
                want = ("ok", os.stat(path).st_size)
            else:
                want = ("error", "404")
            assert got == want, f"HEAD {context}: gateway {got}, mount {want}"
        elif what == 4:
            # (a file offset is at most 2**63 - 1: os refuses more itself)
            offset = min(hostile_offset(rng), 2**63 - 1)
            body = bytes(rng.randrange(256) for _ in range(1 + rng.randrange(3)))
            try:
                os.pwrite(fd, body, offset)
            except OSError as e:
                assert e.errno in (errno.EFBIG, errno.EINVAL), context
            if rng.randrange(4) == 0:
                try:
                    os.ftruncate(fd, min(hostile_offset(rng), 2**63 - 1))
                except OSError as e:
                    assert e.errno in (errno.EFBIG, errno.EINVAL), context
            os.fsync(fd)
        elif what == 5:
            size = os.fstat(fd).st_size
            start = hostile_offset(rng)
            end = rng.choice([start, start + rng.randrange(8), max(start, hostile_offset(rng)),
                              2**64 + 5])
            header = rng.choice([f"bytes={start}-{end}", f"bytes={start}-", f"bytes=-{start}"])

            def ranged():
                # (the first 64 KiB: a range may be 2**57 bytes long)
                answer = s3.get_object(Bucket=bucket, Key="data", Range=header)
                head = answer["Body"].read(1 << 16)
                answer["Body"].close()
                return answer.get("ContentRange"), head

            got = s3_answer(ranged)
            if header.startswith("bytes=-"):
                first, last = max(size - start, 0), size - 1
                satisfiable = start > 0 and size > 0
            else:
                last = size - 1 if header.endswith("-") else min(end, size - 1)
                first, satisfiable = start, start < size
            explicit_end = not header.startswith("bytes=-") and not header.endswith("-")
            if not header.startswith("bytes=-") and (
                    start > 2**63 - 1 or (explicit_end and end > 2**63 - 1)):
                # a position no file offset can be (past 2**63 - 1) is
                # refused with its cause, not taken for the end
                want = ("error", "InvalidArgument")
            elif satisfiable:
                want = ("ok", (f"bytes {first}-{last}/{size}",
                               os.pread(fd, min(1 << 16, last - first + 1), first)))
            else:
                want = ("error", "InvalidRange")
            assert got == want, f"GET {header} of {size} bytes, {context}: gateway {got}, mount {want}"
        else:
            number = rng.choice([0, -1, 1, 10000, 10001, 2**31 - 1, 2**31, 2**63])
            upload = s3.create_multipart_upload(Bucket=bucket, Key="multi")["UploadId"]
            got = s3_answer(lambda: s3.upload_part(Bucket=bucket, Key="multi", UploadId=upload,
                                                   PartNumber=number, Body=b"p") and None)
            want = ("ok", None) if 1 <= number <= 10000 else ("error", "InvalidArgument")
            assert got == want, f"UploadPart {number}, {context}: gateway {got}"
            s3.abort_multipart_upload(Bucket=bucket, Key="multi", UploadId=upload)
    os.close(fd)
    # every object listed is a file of the mount, and every file an object
    listed = set()
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        listed |= {o["Key"] for o in page.get("Contents", [])}
    files = set()
    for root, _, names in os.walk(stored):
        files |= {os.path.relpath(os.path.join(root, n), stored) for n in names}
    assert listed == files, f"seed {seed}: listed only {listed - files}, files only {files - listed}"


def test_hostile_arguments_through_the_gateway_answer_as_the_mount_does():
    mount = os.environ["JFS_TEST_MOUNT"]
    s3 = boto3.client(
        "s3", endpoint_url=ENDPOINT, aws_access_key_id=ACCESS, aws_secret_access_key=SECRET,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
    ops = int(os.environ.get("JFS_HOSTILE_OPS", "400"))
    seeds = ([int(os.environ["JFS_HOSTILE_SEED"])] if "JFS_HOSTILE_SEED" in os.environ
             else [1, 2, random.randrange(2**32)])
    for seed in seeds:
        print(f"hostile run through the gateway: seed {seed}, {ops} ops")
        run(s3, mount, seed, ops)
