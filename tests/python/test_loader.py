"""A PyTorch-style data loader (plain Python, no torch): a dataset opened in
the parent, worker processes forked after it attached, 10,000 small files
read by index. Each worker attaches again with a session of its own (it never
uses the parent's connections) and ends that session when it exits."""
import hashlib
import multiprocessing
import os
import queue
import subprocess
from concurrent.futures import ThreadPoolExecutor

import jfs

FILES = 10_000
WORKERS = 4


def sessions_of_python_clients(reader_url):
    out = subprocess.run(
        ["psql", "-XAtq", reader_url, "-c",
         "SELECT count(*) FROM jfs.session WHERE info->>'client' = 'python'"],
        check=True, capture_output=True, text=True)
    return int(out.stdout.strip())


class Dataset:
    """What a torch Dataset over a jfs volume looks like."""

    def __init__(self, fs, root, n):
        self.fs, self.root, self.n = fs, root, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.fs.cat_file(f"{self.root}/{i % 100:02d}/{i}.bin")


def worker_loop(dataset, indices, results):
    """The loop of a DataLoader worker: indices in, samples out."""
    session = dataset.fs.client.session()
    while True:
        batch = indices.get()
        if batch is None:
            break
        digests = [(i, hashlib.sha256(dataset[i]).hexdigest()) for i in batch]
        results.put((session, os.getpid(), digests))
    results.put(None)


def content(i):
    return hashlib.sha256(str(i).encode()).digest() * (1 + i % 7)


def test_forked_workers_read_10000_files(volume, scratch, reader_url):
    for d in range(100):
        volume.mkdir(f"{scratch}/{d:02d}")

    def write(i):
        volume.pipe_file(f"{scratch}/{i % 100:02d}/{i}.bin", content(i))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(write, range(FILES)))
    expected = {i: hashlib.sha256(content(i)).hexdigest() for i in range(FILES)}

    before = sessions_of_python_clients(reader_url)
    dataset = Dataset(volume, scratch, FILES)
    assert dataset[5] == content(5)  # the parent has attached and read
    parent_session = volume.client.session()

    ctx = multiprocessing.get_context("fork")
    indices = [ctx.Queue() for _ in range(WORKERS)]
    results = ctx.Queue()
    # (daemons: a failed test leaves no worker behind)
    workers = [ctx.Process(target=worker_loop, args=(dataset, indices[w], results), daemon=True)
               for w in range(WORKERS)]
    for w in workers:
        w.start()
    batch = 64
    for n, start in enumerate(range(0, FILES, batch)):
        indices[n % WORKERS].put(list(range(start, min(start + batch, FILES))))
    for q in indices:
        q.put(None)
    seen, sessions, done = {}, set(), 0
    while done < WORKERS:
        item = results.get(timeout=120)
        if item is None:
            done += 1
            continue
        session, pid, digests = item
        sessions.add((session, pid))
        seen.update(digests)
    for w in workers:
        w.join(60)
        assert w.exitcode == 0
    assert seen == expected
    worker_sessions = {s for s, _ in sessions}
    assert len(worker_sessions) == WORKERS, sessions
    assert parent_session not in worker_sessions
    # the workers' sessions ended with them; the parent's is still there
    assert sessions_of_python_clients(reader_url) == before
    assert volume.client.session() == parent_session
    assert dataset[7] == content(7)


def read_share(args):
    fs, root, indices = args
    return [(i, hashlib.sha256(fs.cat_file(f"{root}/{i}.bin")).hexdigest()) for i in indices]


def test_spawned_workers_get_the_file_system_by_pickle(volume, scratch):
    for i in range(200):
        volume.pipe_file(f"{scratch}/{i}.bin", content(i))
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        shares = pool.map(read_share, [(volume, scratch, range(k, 200, 2)) for k in range(2)])
        pool.close()
        pool.join()
    got = dict(p for share in shares for p in share)
    assert got == {i: hashlib.sha256(content(i)).hexdigest() for i in range(200)}


def test_threads_share_one_client(volume, scratch):
    def job(t):
        path = f"{scratch}/thread-{t}"
        data = os.urandom(300_000 + t)
        with volume.open(path, "wb") as f:
            f.write(data)
        for _ in range(5):
            assert volume.cat_file(path) == data
        return t

    with ThreadPoolExecutor(16) as pool:
        assert sorted(pool.map(job, range(32))) == list(range(32))


def child_after_fork(fs, client, handle, path, out):
    """In a forked child: threads making their first calls at once all get
    through (one attaches, none waits for ever), and the parent's handle is
    refused, even once the child has a handle of its own that a bare number
    would name."""
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda _: fs.cat_file(path), range(8)))
    if got != [b"parent's"] * 8:
        out.put(f"read {got!r}")
        return
    # the client's first handle here, as `handle` was its first in the parent
    own, _ = client.open(path + "-other", os.O_RDONLY)
    try:
        got = client.pread(handle, 0, 8)
        out.put(f"the parent's handle read {got!r} in the child")
        return
    except OSError as e:
        if e.errno != 9:  # EBADF
            out.put(f"the parent's handle gave {e!r}")
            return
    client.release(own)
    out.put("ok")


def test_a_handle_from_before_a_fork_is_refused_in_the_child(volume, scratch):
    path = f"{scratch}/p"
    volume.pipe_file(path, b"parent's")
    volume.pipe_file(path + "-other", b"child's!")
    client = jfs.Client(os.environ["JFS_META_URL"])
    handle, _ = client.open(path, os.O_RDONLY)
    assert client.pread(handle, 0, 8) == b"parent's"
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=child_after_fork, args=(volume, client, handle, path, out),
                        daemon=True)
    child.start()
    assert out.get(timeout=120) == "ok"
    child.join(60)
    assert child.exitcode == 0
    client.release(handle)
    client.close()
