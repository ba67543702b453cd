"""`jfs gateway` as S3 clients see it (boto3 and the AWS CLI): round trips,
ranges, SigV4 refusals, a 100 MiB multipart upload, 10,000 keys listed in
pages, CopyObject as shared slices, and objects and files seen both ways
between the gateway and a FUSE mount of the volume."""
import hashlib
import os
import subprocess
import uuid

import boto3
import botocore
import pytest
from boto3.s3.transfer import TransferConfig
from botocore.config import Config

ENDPOINT = os.environ.get("JFS_TEST_S3_ENDPOINT", "")
ACCESS, SECRET = os.environ.get("JFS_TEST_S3_KEYS", ":").split(":")


def client(access=ACCESS, secret=SECRET, **config):
    return boto3.client(
        "s3", endpoint_url=ENDPOINT, aws_access_key_id=access, aws_secret_access_key=secret,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, **config))


@pytest.fixture(scope="module")
def s3():
    return client()


@pytest.fixture
def bucket(s3):
    name = f"b-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    yield name


def code(excinfo):
    return excinfo.value.response["Error"]["Code"]


def test_round_trips_and_ranges(s3, bucket):
    data = os.urandom(3 << 20)
    put = s3.put_object(Bucket=bucket, Key="dir/sub/obj.bin", Body=data)
    assert put["ETag"] == f'"{hashlib.md5(data).hexdigest()}"'
    head = s3.head_object(Bucket=bucket, Key="dir/sub/obj.bin")
    assert head["ContentLength"] == len(data) and head["ETag"] == put["ETag"]
    assert s3.get_object(Bucket=bucket, Key="dir/sub/obj.bin")["Body"].read() == data
    got = s3.get_object(Bucket=bucket, Key="dir/sub/obj.bin", Range="bytes=1000-1999")
    assert got["ContentRange"] == f"bytes 1000-1999/{len(data)}"
    assert got["Body"].read() == data[1000:2000]
    assert s3.get_object(Bucket=bucket, Key="dir/sub/obj.bin", Range="bytes=-10")["Body"].read() == data[-10:]
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.get_object(Bucket=bucket, Key="dir/sub/obj.bin", Range=f"bytes={len(data)}-")
    assert code(e) == "InvalidRange"
    # a new object replaces the old whole
    s3.put_object(Bucket=bucket, Key="dir/sub/obj.bin", Body=b"small")
    assert s3.get_object(Bucket=bucket, Key="dir/sub/obj.bin")["Body"].read() == b"small"
    s3.put_object(Bucket=bucket, Key="empty", Body=b"")
    assert s3.get_object(Bucket=bucket, Key="empty")["Body"].read() == b""
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.get_object(Bucket=bucket, Key="missing")
    assert code(e) == "NoSuchKey"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.get_object(Bucket="no-such-bucket-here", Key="x")
    assert code(e) == "NoSuchBucket"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.put_object(Bucket=bucket, Key="a/../../escape", Body=b"x")
    assert code(e) == "InvalidArgument"
    s3.delete_object(Bucket=bucket, Key="dir/sub/obj.bin")
    s3.delete_object(Bucket=bucket, Key="dir/sub/obj.bin")  # missing: no error, as S3
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.head_object(Bucket=bucket, Key="dir/sub/obj.bin")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.get_object(Bucket=bucket, Key="empty", Range="bytes=-10")
    assert code(e) == "InvalidRange"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.delete_bucket(Bucket=bucket)
    assert code(e) == "BucketNotEmpty"
    s3.delete_object(Bucket=bucket, Key="empty")
    s3.delete_bucket(Bucket=bucket)
    assert bucket not in [b["Name"] for b in s3.list_buckets()["Buckets"]]


def test_requests_must_be_signed_with_the_keys(bucket):
    for access, secret in [(ACCESS, "wrong-secret-key"), ("someone-else", SECRET)]:
        with pytest.raises(botocore.exceptions.ClientError) as e:
            client(access, secret).put_object(Bucket=bucket, Key="x", Body=b"x")
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    anonymous = client(signature_version=botocore.UNSIGNED)
    with pytest.raises(botocore.exceptions.ClientError) as e:
        anonymous.list_objects_v2(Bucket=bucket)
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert client().list_objects_v2(Bucket=bucket)["KeyCount"] == 0


def test_multipart_upload_of_100_mib(s3, bucket, tmp_path):
    source = tmp_path / "big"
    with open(source, "wb") as f:
        for _ in range(100):
            f.write(os.urandom(1 << 20))
    config = TransferConfig(multipart_threshold=8 << 20, multipart_chunksize=8 << 20, max_concurrency=4)
    s3.upload_file(str(source), bucket, "models/big.bin", Config=config)
    head = s3.head_object(Bucket=bucket, Key="models/big.bin")
    assert head["ContentLength"] == 100 << 20
    data = source.read_bytes()
    parts = [hashlib.md5(data[i:i + (8 << 20)]).digest() for i in range(0, len(data), 8 << 20)]
    assert head["ETag"] == f'"{hashlib.md5(b"".join(parts)).hexdigest()}-13"'

    back = tmp_path / "back"
    s3.download_file(bucket, "models/big.bin", str(back), Config=config)
    assert hashlib.sha256(back.read_bytes()).digest() == hashlib.sha256(source.read_bytes()).digest()
    # an aborted upload leaves nothing; a wrong part ETag is refused
    up = s3.create_multipart_upload(Bucket=bucket, Key="aborted")
    s3.upload_part(Bucket=bucket, Key="aborted", UploadId=up["UploadId"], PartNumber=1, Body=b"x")
    parts = s3.list_parts(Bucket=bucket, Key="aborted", UploadId=up["UploadId"])["Parts"]
    assert [p["PartNumber"] for p in parts] == [1]
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.complete_multipart_upload(
            Bucket=bucket, Key="aborted", UploadId=up["UploadId"],
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": '"0123456789abcdef0123456789abcdef"'}]})
    assert code(e) == "InvalidPart"
    s3.abort_multipart_upload(Bucket=bucket, Key="aborted", UploadId=up["UploadId"])
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.list_parts(Bucket=bucket, Key="aborted", UploadId=up["UploadId"])
    assert code(e) == "NoSuchUpload"
    with pytest.raises(botocore.exceptions.ClientError):
        s3.head_object(Bucket=bucket, Key="aborted")


def test_listing_10000_keys_in_pages(s3, bucket):
    from concurrent.futures import ThreadPoolExecutor

    keys = [f"d{i % 10}/k{i:05d}" for i in range(10_000)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: s3.put_object(Bucket=bucket, Key=k, Body=k.encode()), keys))
    pages = list(s3.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, PaginationConfig={"PageSize": 1000}))
    listed = [o["Key"] for p in pages for o in p.get("Contents", [])]
    assert listed == sorted(keys)
    assert len(pages) == 10 and all(p["KeyCount"] == 1000 for p in pages)
    # a delimiter gives the directories as common prefixes
    top = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    assert [c["Prefix"] for c in top["CommonPrefixes"]] == [f"d{i}/" for i in range(10)]
    assert "Contents" not in top or top["Contents"] == []
    # a prefix within a directory, in small pages
    pages = list(s3.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix="d3/k000", PaginationConfig={"PageSize": 7}))
    listed = [o["Key"] for p in pages for o in p.get("Contents", [])]
    assert listed == sorted(k for k in keys if k.startswith("d3/k000"))
    # StartAfter, and the v1 listing with a marker
    after = s3.list_objects_v2(Bucket=bucket, StartAfter="d9/k09980")
    assert [o["Key"] for o in after["Contents"]] == sorted(k for k in keys if k > "d9/k09980")
    # no key has a ".." part: such a prefix lists nothing (not outside the bucket)
    for prefix in ["../", "d1/../", "d1//", "./"]:
        assert s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", []) == []
    none = s3.list_objects_v2(Bucket=bucket, MaxKeys=0)
    assert none["KeyCount"] == 0 and not none["IsTruncated"]
    v1 = s3.list_objects(Bucket=bucket, Marker="d8/k05000", MaxKeys=5)
    assert [o["Key"] for o in v1["Contents"]] == sorted(k for k in keys if k > "d8/k05000")[:5]
    assert v1["IsTruncated"]


def test_listing_arguments_that_no_answer_can_carry_are_refused(s3, bucket):
    """A continuation token is opaque (and checked), a start point or prefix
    with a character XML cannot carry is InvalidArgument (400), not a 500."""
    s3.put_object(Bucket=bucket, Key="k", Body=b"k")
    for args in [{"ContinuationToken": "\x01abc"}, {"ContinuationToken": "not-one-of-ours"},
                 {"StartAfter": "a\x01"}, {"Prefix": "\x02"}]:
        with pytest.raises(botocore.exceptions.ClientError) as e:
            s3.list_objects_v2(Bucket=bucket, **args)
        assert code(e) == "InvalidArgument", args
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400, args
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.list_objects(Bucket=bucket, Marker="\x03")
    assert code(e) == "InvalidArgument"
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["k"]


def test_copy_object_shares_slices(s3, bucket):
    blocks = os.environ["JFS_TEST_BLOCKS"]

    def stored():
        return sum(len(files) for _, _, files in os.walk(blocks))

    data = os.urandom(10 << 20)
    s3.put_object(Bucket=bucket, Key="src", Body=data)
    before = stored()
    copied = s3.copy_object(Bucket=bucket, Key="copies/dst", CopySource={"Bucket": bucket, "Key": "src"})
    assert copied["CopyObjectResult"]["ETag"] == f'"{hashlib.md5(data).hexdigest()}"'
    assert s3.get_object(Bucket=bucket, Key="copies/dst")["Body"].read() == data
    assert stored() == before, "the copy wrote blocks: it should share the source's"


def test_gateway_and_mount_see_each_others_files(s3, bucket):
    mount = os.environ["JFS_TEST_MOUNT"]
    data = os.urandom((5 << 20) + 3)
    s3.put_object(Bucket=bucket, Key="from/gateway.bin", Body=data)
    with open(os.path.join(mount, bucket, "from/gateway.bin"), "rb") as f:
        assert f.read() == data
    os.makedirs(os.path.join(mount, bucket, "from/mount"))
    local = os.urandom((2 << 20) + 5)
    with open(os.path.join(mount, bucket, "from/mount/file.bin"), "wb") as f:
        f.write(local)
    assert s3.get_object(Bucket=bucket, Key="from/mount/file.bin")["Body"].read() == local
    top = s3.list_objects_v2(Bucket=bucket, Prefix="from/", Delimiter="/")
    assert [o["Key"] for o in top["Contents"]] == ["from/gateway.bin"]
    assert [c["Prefix"] for c in top["CommonPrefixes"]] == ["from/mount/"]
    # a bucket made in the mount is a bucket
    os.makedirs(os.path.join(mount, f"{bucket}-m"))
    assert f"{bucket}-m" in [b["Name"] for b in s3.list_buckets()["Buckets"]]


def test_the_aws_cli(bucket, tmp_path):
    env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS, AWS_SECRET_ACCESS_KEY=SECRET,
               AWS_DEFAULT_REGION="us-east-1")
    aws = [os.path.join(os.path.dirname(os.path.realpath(os.sys.executable)), "aws"),
           "--endpoint-url", ENDPOINT]
    tree = tmp_path / "tree"
    for i in range(30):
        (tree / f"d{i % 3}").mkdir(parents=True, exist_ok=True)
        (tree / f"d{i % 3}" / f"f{i}").write_bytes(os.urandom(1000 + i))
    run = lambda *args: subprocess.run(aws + list(args), env=env, check=True, capture_output=True, text=True)
    run("s3", "sync", str(tree), f"s3://{bucket}/tree")
    listed = run("s3", "ls", "--recursive", f"s3://{bucket}/tree/").stdout
    assert len(listed.strip().splitlines()) == 30
    back = tmp_path / "back"
    run("s3", "sync", f"s3://{bucket}/tree", str(back))
    for i in range(30):
        rel = f"d{i % 3}/f{i}"
        assert (back / rel).read_bytes() == (tree / rel).read_bytes()
    run("s3", "cp", str(tree / "d0/f0"), f"s3://{bucket}/one")
    run("s3", "rm", "--recursive", f"s3://{bucket}/tree")
    assert run("s3", "ls", f"s3://{bucket}/").stdout.split()[-1] == "one"


def test_a_quota_refuses_a_put_and_keeps_the_old_object(s3, bucket):
    s3.put_object(Bucket=bucket, Key="q/obj", Body=b"old")
    subprocess.run(["psql", "-XAtq", "-v", "ON_ERROR_STOP=1", os.environ["JFS_TEST_ADMIN_URL"],
                    "-c", f"SELECT count(*) FROM jfs.set_quota('/{bucket}', 1048576)"],
                   check=True, capture_output=True)
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.put_object(Bucket=bucket, Key="q/obj", Body=os.urandom(2 << 20))
    assert code(e) == "QuotaExceeded"
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert s3.get_object(Bucket=bucket, Key="q/obj")["Body"].read() == b"old"
    # nothing is left of the refused object in the gateway's own directory
    leftovers = os.listdir(os.path.join(os.environ["JFS_TEST_MOUNT"], ".jfs-gateway", "tmp"))
    assert leftovers == []


def test_directory_markers_and_etags_of_changed_files(s3, bucket):
    mount = os.environ["JFS_TEST_MOUNT"]
    s3.put_object(Bucket=bucket, Key="marker/", Body=b"")
    assert s3.head_object(Bucket=bucket, Key="marker/")["ContentLength"] == 0
    assert os.path.isdir(os.path.join(mount, bucket, "marker"))
    s3.put_object(Bucket=bucket, Key="marker/x", Body=b"x")
    s3.delete_object(Bucket=bucket, Key="marker/")  # keys remain under it: no error
    s3.put_object(Bucket=bucket, Key="file", Body=b"a file")
    with pytest.raises(botocore.exceptions.ClientError):
        s3.head_object(Bucket=bucket, Key="file/")
    with pytest.raises(botocore.exceptions.ClientError):
        s3.put_object(Bucket=bucket, Key="file/", Body=b"")
    # a file a mount rewrote has a new ETag, not the kept MD5
    etag = s3.head_object(Bucket=bucket, Key="file")["ETag"]
    with open(os.path.join(mount, bucket, "file"), "r+b") as f:
        f.write(b"A FILE")
    assert s3.head_object(Bucket=bucket, Key="file")["ETag"] != etag
    assert s3.get_object(Bucket=bucket, Key="file")["Body"].read() == b"A FILE"


def _response(sock):
    """One HTTP response read off `sock`: (status, body), or None if the
    gateway closed the connection instead."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            return None
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    length = next((int(line.split(":", 1)[1]) for line in lines
                   if line.lower().startswith("content-length:")), 0)
    while len(body) < length:
        chunk = sock.recv(4096)
        if not chunk:
            break
        body += chunk
    return int(lines[0].split()[1]), body[:length]


def test_a_body_the_gateway_refused_unread_is_never_read_as_the_next_request(bucket):
    """A PUT refused before its body is read (unsigned here: anyone can send
    one), sent as boto3 sends it (Expect: 100-continue, the body held back
    until an answer comes): the next request on the connection is answered
    as itself, or the connection is closed; its bytes are never taken for
    the first one's body (boto3 then saw SignatureDoesNotMatch)."""
    import socket
    from urllib.parse import urlparse
    url = urlparse(ENDPOINT)
    for attempt in range(30):
        with socket.create_connection((url.hostname, url.port), timeout=10) as s:
            s.sendall(f"PUT /{bucket}/k HTTP/1.1\r\nHost: {url.netloc}\r\n"
                      "Content-Length: 5\r\nExpect: 100-continue\r\n\r\n".encode())
            first = _response(s)
            assert first is not None and first[0] == 403, (attempt, first)
            try:
                s.sendall(f"GET /{bucket} HTTP/1.1\r\nHost: {url.netloc}\r\n\r\n".encode())
                second = _response(s)
            except (ConnectionResetError, BrokenPipeError):
                second = None
            assert second is None or (second[0] == 403 and b"AccessDenied" in second[1]), (
                attempt, second)
