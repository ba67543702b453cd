-- jfs schema: one database holds one volume.
--
-- Row layout (the one place it is written down)
-- ---------------------------------------------
-- setting     the volume's format, exactly one row (id = true) once jfs.format() ran.
-- secret      the object store's access and secret key and the blocks' RSA key
--             (one row, readable by no role but the owner: clients get them
--             through volume_secrets()).
-- counter     name -> next free id: 'inode' and 'slice'. Clients reserve ranges
--             (jfs.alloc_ids) so creates do not queue on this row.
-- id_grant    (kind, first) -> last, role: the ranges alloc_ids handed out
--             and the login role each went to (NULL: handed out before
--             0.2.24, anyone's); a create or write names only ids its role
--             was given, so no client burns the ranges of another.
-- tree_lock   one row, locked by a rename that moves a directory to another
--             parent (such moves run one at a time, so none makes a cycle);
--             a row lock, which only procedures can take.
-- node        inode -> type, mode (07777 bits), uid, gid, atime/mtime/ctime in
--             nanoseconds since the Unix epoch, nlink, length (bytes), rdev,
--             parent (directories only: the directory holding it; 0 otherwise),
--             tier (0 = volume default, 1..3 = jfs.tier), qroot (directories
--             only: the nearest directory with a quota, itself included; 0 =
--             none). Root is inode 1.
--             type: 1 file, 2 directory, 3 symlink, 4 fifo, 5 block device,
--                   6 char device, 7 socket (JuiceFS's numbering).
-- edge        (parent, name bytea) -> inode, type (copy of node.type), cookie.
--             cookie is unique and increasing per directory (a global sequence):
--             readdir pages by (parent, cookie) keyset, never OFFSET.
-- slice       one row per committed write, insert-only:
--             (inode, chunk index, seq) -> slice id, the slice's stored size,
--             the offset read from within the slice, the length used, and the
--             position inside the 64 MiB chunk. Later seq shadows earlier.
--             slice_id 0 is a hole (reads as zeros; written by truncate).
-- slice_ref   slice id -> stored size, number of slice rows that use it.
--             At zero the slice moves to delslice.
-- inline_data slice id -> the bytes its one block would hold in object
--             storage (compressed and sealed as the volume's blocks are),
--             for slices kept here instead (setting.inline_max); goes with
--             its slice_ref row.
-- symlink     inode -> target bytes.
-- xattr       (inode, name bytea) -> value bytea.
-- shard_map   shard number -> URL (no credentials), when added: the
--             volume's other databases, kept in the root's (sql/shard.sql).
-- session     sid -> a mounted client: host, pid, info, start and last heartbeat,
--             the role that registered it (only it, or an administrator, acts
--             for it), and how long it may stay silent.
-- sustained   (sid, inode): inodes with nlink 0 still open in that session.
-- unlinked    inode -> at: files without names kept a moment for other mounts.
-- plock       (inode, sid, owner, lstart) -> fcntl and flock locks: type, last byte, pid.
-- lock_wait   (sid, owner, inode) -> the range an owner waits for (deadlock detection).
-- delslice    slice id -> size, queued_at: objects waiting for deletion.
-- delete_usage stripe -> slices, bytes: delslice counted (kept by triggers
--             on delslice), for statfs, jfs status and the queue's cap.
-- client_role a mount role's limits, set by jfs.grant_client: read-only,
--             and the squash of owner ids (none, root: ids 0 become
--             squash_uid/squash_gid, all: every id does).
-- dir_stats   (directory inode, stripe) -> space, inodes and length (the
--             sum of their lengths: apparent size) of its direct children
--             (entries); the sum over the stripes is the figure.
-- quota       (kind, key) -> limits (0 = none): ('fs', 0) the volume,
--             ('dir', inode) a directory's subtree, ('user', uid), ('group', gid).
-- quota_usage (kind, key, stripe) -> used space and inodes; the sum over the
--             16 stripes is the usage. Each transaction updates the stripe its
--             session claimed, so concurrent writers do not queue on one row.
--             share_space/share_inodes: how far this stripe may grow without
--             looking at the others (NULL: no limit); the shares of a quota
--             never add up to more than its limit (see sql/usage.sql).
-- tier        id 0..3 -> object storage class ('' = the bucket's default).
-- change      the change log (sql/changelog.sql): one row per change a
--             procedure made, written in the same transaction, insert-only,
--             pruned by age and count (setting.changelog_max_age / _rows).
--             id: order of insertion (a sequence: transactions commit in
--             another order); xid: the writing transaction (a reader takes a
--             row as final once every transaction up to it is over); at: its
--             start; op: what was done; inode: the node changed; parent, name:
--             the entry made, removed or renamed (for xattr changes name is
--             the attribute's, parent NULL); parent2, name2: where a rename,
--             a move into the trash or a clone put it; inode2: the node a
--             rename replaced or exchanged, a clone's source; uid, gid: the
--             node's owner after the change; session: the mount that did it
--             (its connections' application_name is jfs:SID, believed only
--             from the role that registered that session; NULL for SQL run
--             by people).
--
-- Space is charged in 4 KiB units of file length (directories and symlinks one
-- unit each); every node counts one inode.

CREATE TABLE setting (
    id              boolean PRIMARY KEY DEFAULT true CHECK (id),
    name            text    NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$'),
    uuid            uuid    NOT NULL,
    storage         text    NOT NULL CHECK (storage IN ('file', 's3')),
    bucket          text    NOT NULL,
    block_size      integer NOT NULL CHECK (block_size BETWEEN 65536 AND 67108864
                                            AND block_size % 65536 = 0),
    trash_days      integer NOT NULL DEFAULT 0 CHECK (trash_days >= 0),
    meta_durability text    NOT NULL DEFAULT 'fsync' CHECK (meta_durability IN ('fsync', 'always')),
    -- parent mtime/ctime updates younger than this are skipped (JuiceFS --skip-dir-mtime)
    skip_dir_mtime_ns bigint NOT NULL DEFAULT 100000000 CHECK (skip_dir_mtime_ns >= 0),
    -- kept by the quota functions, read by the hot paths to skip work:
    -- some quota has a limit / some user or group quota exists / the uids
    -- and gids that have one (NULL: too many to list, try every owner)
    quota_limits    boolean NOT NULL DEFAULT false,
    owner_quotas    boolean NOT NULL DEFAULT false,
    quota_uids      bigint[] DEFAULT '{}',
    quota_gids      bigint[] DEFAULT '{}',
    formatted_at    timestamptz NOT NULL DEFAULT now(),
    -- POSIX ACLs stored and enforced (sql/acl.sql); once on, never off
    enable_acl      boolean NOT NULL DEFAULT false,
    -- the change log keeps rows younger than this, and at most this many
    changelog_max_age  interval NOT NULL DEFAULT '1 day' CHECK (changelog_max_age >= '1 minute'),
    changelog_max_rows bigint   NOT NULL DEFAULT 10000000 CHECK (changelog_max_rows >= 1000),
    -- freed slices' objects are deleted this long after their last reference
    -- went (at the least; a mount's --gc-delay may wait longer): set beyond
    -- the database's point-in-time-recovery window, a restore to any time
    -- in it finds every block it names (jfs config --retain-deleted)
    retain_deleted interval NOT NULL DEFAULT '0' CHECK (retain_deleted >= '0'),
    -- when a mount last took the automatic metadata backup (--backup-meta)
    last_backup    timestamptz,
    -- some client role is squashed (kept by grant_client and grant_admin):
    -- creates look the caller's squash up only then
    squash_roles   boolean NOT NULL DEFAULT false,
    -- how blocks are stored, as JuiceFS's --compress and --encrypt-algo
    -- (and its Format's Compression and EncryptAlgo) say: compressed (lz4
    -- block, zstd frame), then, when encrypt_algo is not '', sealed with a
    -- key of the object's own that the RSA key in secret.encrypt_key wraps
    compression    text NOT NULL DEFAULT 'none' CHECK (lower(compression) IN ('none', 'lz4', 'zstd')),
    encrypt_algo   text NOT NULL DEFAULT '' CHECK (encrypt_algo IN ('', 'aes256gcm-rsa', 'chacha20-rsa')),
    -- when `jfs destroy` began removing the volume (jfs.destroy_begin): no
    -- session opens from then on
    destroying     timestamptz,
    -- past this many bytes waiting for deletion (0: no cap), freed slices'
    -- objects go as soon as their freeing commit is durable, whatever the
    -- mounts' --gc-delay (never before retain_deleted): deleted data must
    -- not fill the store (jfs config --delete-queue-cap)
    delete_queue_cap bigint NOT NULL DEFAULT 0 CHECK (delete_queue_cap >= 0),
    -- which shard of the volume this database is (sql/shard.sql): 0 the
    -- root (the root directory and the shard map), others hold subtrees;
    -- every inode and slice id made here carries it in bits 48 to 62
    shard            integer NOT NULL DEFAULT 0 CHECK (shard BETWEEN 0 AND 32767),
    -- a file no longer than this many bytes keeps the bytes it is written
    -- with in this database (inline_data), committed with its metadata,
    -- instead of in object storage (jfs format/config --inline-max; 0: off).
    -- At most 128 KiB: a row stays far below what TOAST stores comfortably
    inline_max       integer NOT NULL DEFAULT 0 CHECK (inline_max BETWEEN 0 AND 131072)
);

CREATE TABLE secret (
    id         boolean PRIMARY KEY DEFAULT true CHECK (id),
    access_key text    NOT NULL DEFAULT '',
    secret_key text    NOT NULL DEFAULT '',
    -- the RSA private key (PEM, as given: passphrase-protected or not) that
    -- wraps each object's key when setting.encrypt_algo is not ''
    encrypt_key text   NOT NULL DEFAULT '',
    -- the object store's keys for read-only roles (jfs.set_reader_keys):
    -- keys that can only read; '' gives them none
    reader_access_key text NOT NULL DEFAULT '',
    reader_secret_key text NOT NULL DEFAULT ''
);

CREATE TABLE counter (
    name  text PRIMARY KEY CHECK (name IN ('inode', 'slice')),
    next  bigint NOT NULL
);

CREATE TABLE id_grant (
    kind  text   NOT NULL CHECK (kind IN ('inode', 'slice')),
    first bigint NOT NULL,
    last  bigint NOT NULL CHECK (last >= first),
    role  name,
    PRIMARY KEY (kind, first)
);

CREATE TABLE tree_lock (
    id boolean PRIMARY KEY DEFAULT true CHECK (id)
);
INSERT INTO tree_lock VALUES (true);

CREATE TABLE node (
    inode   bigint   PRIMARY KEY,
    type    smallint NOT NULL CHECK (type BETWEEN 1 AND 7),
    mode    integer  NOT NULL CHECK (mode BETWEEN 0 AND 4095),
    uid     bigint   NOT NULL,
    gid     bigint   NOT NULL,
    atime   bigint   NOT NULL,
    mtime   bigint   NOT NULL,
    ctime   bigint   NOT NULL,
    nlink   integer  NOT NULL CHECK (nlink >= 0),
    length  bigint   NOT NULL DEFAULT 0 CHECK (length >= 0),
    rdev    bigint   NOT NULL DEFAULT 0,
    parent  bigint   NOT NULL DEFAULT 0,
    tier    smallint NOT NULL DEFAULT 0 CHECK (tier BETWEEN 0 AND 3),
    qroot   bigint   NOT NULL DEFAULT 0,
    -- a file's bytes that show data (its slices, holes taken away): st_blocks
    used    bigint   NOT NULL DEFAULT 0 CHECK (used >= 0)
);

CREATE SEQUENCE edge_cookie START 16;

CREATE TABLE edge (
    parent  bigint   NOT NULL,
    name    bytea    NOT NULL CHECK (length(name) BETWEEN 1 AND 255),
    inode   bigint   NOT NULL,
    type    smallint NOT NULL,
    cookie  bigint   NOT NULL DEFAULT nextval('edge_cookie'),
    -- a lookup reads the name's inode and type from the index alone: on
    -- a volume too big for memory, a cold lookup makes three reads, not four
    PRIMARY KEY (parent, name) INCLUDE (inode, type)
);
CREATE UNIQUE INDEX edge_readdir ON edge (parent, cookie);
CREATE INDEX edge_inode ON edge (inode);
-- the directories in each directory: walks of a tree's directories
-- (jfs.summary, jfs.du, rmr) skip its files
CREATE INDEX edge_dirs ON edge (parent, inode) WHERE type = 2;

CREATE SEQUENCE slice_seq;

CREATE TABLE slice (
    inode       bigint  NOT NULL,
    chunk_index integer NOT NULL CHECK (chunk_index >= 0),
    seq         bigint  NOT NULL DEFAULT nextval('slice_seq'),
    slice_id    bigint  NOT NULL,
    slice_size  integer NOT NULL CHECK (slice_size >= 0),
    slice_off   integer NOT NULL CHECK (slice_off >= 0),
    len         integer NOT NULL CHECK (len > 0),
    pos         integer NOT NULL CHECK (pos >= 0 AND pos::bigint + len <= 67108864),
    PRIMARY KEY (inode, chunk_index, seq)
);
CREATE INDEX slice_by_id ON slice (slice_id) WHERE slice_id <> 0;

CREATE TABLE slice_ref (
    slice_id bigint  PRIMARY KEY CHECK (slice_id > 0),
    size     integer NOT NULL,
    refs     integer NOT NULL CHECK (refs >= 0)
);

-- A slice kept in the database: what its block's object would hold,
-- byte for byte, so that the database never sees the plain bytes of an
-- encrypted volume and a dump can write the object as it would have been.
CREATE TABLE inline_data (
    slice_id bigint PRIMARY KEY REFERENCES slice_ref ON DELETE CASCADE,
    data     bytea  NOT NULL
);

CREATE TABLE symlink (
    inode  bigint PRIMARY KEY,
    target bytea  NOT NULL CHECK (length(target) BETWEEN 1 AND 4096)
);

CREATE TABLE xattr (
    inode bigint NOT NULL,
    name  bytea  NOT NULL CHECK (length(name) BETWEEN 1 AND 255),
    value bytea  NOT NULL CHECK (length(value) <= 65536),
    PRIMARY KEY (inode, name)
);

CREATE SEQUENCE session_sid;

CREATE TABLE session (
    sid        bigint      PRIMARY KEY DEFAULT nextval('session_sid'),
    host       text        NOT NULL DEFAULT '',
    pid        integer     NOT NULL DEFAULT 0,
    info       jsonb       NOT NULL DEFAULT '{}',
    started    timestamptz NOT NULL DEFAULT now(),
    heartbeat  timestamptz NOT NULL DEFAULT now(),
    -- the login role that registered it: only that role (or an
    -- administrator) acts for it; NULL for sessions from before 0.2.4
    role       name        DEFAULT session_user,
    -- how long it may stay silent before others end it (its mount's
    -- --session-timeout; NULL: as the cleaning mount says)
    session_timeout interval
);

-- Directory leases (sql/lease.sql): the session that alone reads and
-- changes a directory's entries for now, since when another asks for it,
-- and since when it holds it (a lease is renewed for at most a minute).
CREATE TABLE dir_lease (
    dir     bigint      PRIMARY KEY,
    sid     bigint      NOT NULL,
    taken   timestamptz NOT NULL DEFAULT now(),
    wanted  timestamptz,
    granted timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dir_lease_sid ON dir_lease (sid);

CREATE TABLE sustained (
    sid   bigint NOT NULL,
    inode bigint NOT NULL,
    PRIMARY KEY (sid, inode)
);
CREATE INDEX sustained_inode ON sustained (inode);

-- Files that lost their last name while other sessions were live and none of
-- the remover's handles had them open: kept (nlink 0, still charged) from
-- `at` for a grace period, so that a mount with the file open, reading the
-- removal from the change log, holds it (jfs.sustain) before it is freed
-- (jfs.free_unlinked).
CREATE TABLE unlinked (
    inode bigint      PRIMARY KEY,
    at    timestamptz NOT NULL DEFAULT now()
);

-- File locks, shared by every mount: POSIX record locks (fcntl) and BSD
-- locks (flock, which the kernel hands to FUSE as whole-file records of the
-- open file's own owner). One row per locked range of an owner, ranges of
-- an owner never overlapping; sql/lock.sql keeps them.
CREATE TABLE plock (
    inode  bigint   NOT NULL,
    sid    bigint   NOT NULL,
    owner  bigint   NOT NULL,   -- the kernel's lock owner, within the session
    ltype  smallint NOT NULL CHECK (ltype IN (0, 1)),  -- 0 shared (read), 1 exclusive (write)
    lstart bigint   NOT NULL CHECK (lstart >= 0),
    lend   bigint   NOT NULL CHECK (lend >= lstart),   -- the last byte locked
    pid    integer  NOT NULL,   -- the locking process, on its host (for F_GETLK)
    PRIMARY KEY (inode, sid, owner, lstart)
);

-- Owners waiting for a lock (F_SETLKW, flock without LOCK_NB), refreshed by
-- each retry: what deadlock detection follows.
CREATE TABLE lock_wait (
    sid    bigint      NOT NULL,
    owner  bigint      NOT NULL,
    inode  bigint      NOT NULL,
    ltype  smallint    NOT NULL,
    lstart bigint      NOT NULL,
    lend   bigint      NOT NULL,
    at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sid, owner, inode)
);

CREATE TABLE delslice (
    slice_id  bigint      PRIMARY KEY,
    size      integer     NOT NULL,
    queued_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE delete_usage (
    stripe smallint PRIMARY KEY,
    slices bigint   NOT NULL DEFAULT 0,
    bytes  bigint   NOT NULL DEFAULT 0
);

CREATE TABLE client_role (
    role       name    PRIMARY KEY,
    read_only  boolean NOT NULL DEFAULT false,
    squash     text    NOT NULL DEFAULT 'none' CHECK (squash IN ('none', 'root', 'all')),
    squash_uid bigint  NOT NULL DEFAULT 65534 CHECK (squash_uid BETWEEN 0 AND 4294967294),
    squash_gid bigint  NOT NULL DEFAULT 65534 CHECK (squash_gid BETWEEN 0 AND 4294967294)
);

CREATE TABLE dir_stats (
    inode  bigint   NOT NULL,
    stripe smallint NOT NULL,
    space  bigint   NOT NULL DEFAULT 0,
    inodes bigint   NOT NULL DEFAULT 0,
    length bigint   NOT NULL DEFAULT 0,
    PRIMARY KEY (inode, stripe)
);

CREATE TABLE quota (
    kind       text    NOT NULL CHECK (kind IN ('fs', 'dir', 'user', 'group')),
    key        bigint  NOT NULL,
    max_space  bigint  NOT NULL DEFAULT 0 CHECK (max_space >= 0),
    max_inodes bigint  NOT NULL DEFAULT 0 CHECK (max_inodes >= 0),
    -- 'dir' quotas: this root and the quota roots above it, nearest first
    -- (what an entry below it is charged to; see _quota_chains)
    chain      bigint[],
    PRIMARY KEY (kind, key)
);

CREATE TABLE quota_usage (
    kind     text     NOT NULL,
    key      bigint   NOT NULL,
    stripe   smallint NOT NULL,
    space    bigint   NOT NULL DEFAULT 0,
    inodes   bigint   NOT NULL DEFAULT 0,
    share_space  bigint,
    share_inodes bigint,
    PRIMARY KEY (kind, key, stripe)
);

CREATE TABLE tier (
    id            smallint PRIMARY KEY CHECK (id BETWEEN 0 AND 3),
    storage_class text     NOT NULL DEFAULT ''
);

-- POSIX ACL entries (sql/acl.sql): kind 'a' access, 'd' default; tag as in
-- the kernel's xattr format; qualifier the uid or gid of a named entry, -1
-- for the others.
CREATE TABLE acl (
    inode     bigint   NOT NULL,
    kind      "char"   NOT NULL CHECK (kind IN ('a', 'd')),
    tag       smallint NOT NULL CHECK (tag IN (1, 2, 4, 8, 16, 32)),
    qualifier bigint   NOT NULL,
    perm      smallint NOT NULL CHECK (perm BETWEEN 0 AND 7),
    PRIMARY KEY (inode, kind, tag, qualifier)
);

CREATE SEQUENCE change_id;

-- The session a change is logged under: the one the connection names in
-- its application_name (jfs:SID, as a mount's connections do), if the
-- caller's login role registered it; NULL otherwise (every mount then
-- applies the change). Another role cannot make its changes pass for a
-- mount's own, which that mount would skip.
CREATE FUNCTION _change_session() RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT s.sid FROM session s
             WHERE s.sid = substring(pg_catalog.current_setting('application_name')
                                     FROM '^jfs:([0-9]{1,18})$')::bigint
               AND (s.role IS NULL OR s.role = session_user));
END
$$;

CREATE TABLE change (
    id      bigint      PRIMARY KEY DEFAULT nextval('change_id'),
    xid     xid8        NOT NULL DEFAULT pg_current_xact_id(),
    at      timestamptz NOT NULL DEFAULT now(),
    op      text        NOT NULL,
    inode   bigint,
    parent  bigint,
    name    bytea,
    parent2 bigint,
    name2   bytea,
    inode2  bigint,
    uid     bigint,
    gid     bigint,
    session bigint      DEFAULT _change_session()
);
CREATE INDEX change_xid ON change (xid, id);

-- The whole name of a trash entry whose name there (PARENT-INODE-NAME, in
-- hour directory `hour`) was cut to 255 bytes: what jfs.restore puts back.
CREATE TABLE trash_name (
    hour     bigint NOT NULL,
    name     bytea  NOT NULL,
    original bytea  NOT NULL CHECK (length(original) BETWEEN 1 AND 255),
    PRIMARY KEY (hour, name)
);

-- The volume's other shards, kept in its root database (sql/shard.sql):
-- where each is (a connection URL without credentials: every mount adds
-- its own) and when it was added.
CREATE TABLE shard_map (
    number   integer     PRIMARY KEY CHECK (number BETWEEN 1 AND 32767),
    url      text        NOT NULL CHECK (url <> ''),
    added_at timestamptz NOT NULL DEFAULT now()
);

-- Composite results of the procedures. errno 0 = success; the other fields
-- are NULL when errno <> 0.
CREATE TYPE attr AS (
    errno   integer,
    inode   bigint,
    type    smallint,
    mode    integer,
    uid     bigint,
    gid     bigint,
    atime   bigint,
    mtime   bigint,
    ctime   bigint,
    nlink   integer,
    length  bigint,
    rdev    bigint,
    parent  bigint,
    tier    smallint,
    used    bigint
);

-- Every table (and the sequences) goes into pg_dump, but tree_lock (its
-- one row is the install script's, the only row it inserts: a restore
-- never collides with it) and delete_usage (the triggers on delslice count
-- the queue again as a restore loads it).
SELECT pg_catalog.pg_extension_config_dump('setting', '');
SELECT pg_catalog.pg_extension_config_dump('secret', '');
SELECT pg_catalog.pg_extension_config_dump('counter', '');
SELECT pg_catalog.pg_extension_config_dump('id_grant', '');
SELECT pg_catalog.pg_extension_config_dump('node', '');
SELECT pg_catalog.pg_extension_config_dump('edge', '');
SELECT pg_catalog.pg_extension_config_dump('edge_cookie', '');
SELECT pg_catalog.pg_extension_config_dump('slice', '');
SELECT pg_catalog.pg_extension_config_dump('slice_seq', '');
SELECT pg_catalog.pg_extension_config_dump('slice_ref', '');
SELECT pg_catalog.pg_extension_config_dump('inline_data', '');
SELECT pg_catalog.pg_extension_config_dump('symlink', '');
SELECT pg_catalog.pg_extension_config_dump('xattr', '');
SELECT pg_catalog.pg_extension_config_dump('session', '');
SELECT pg_catalog.pg_extension_config_dump('session_sid', '');
SELECT pg_catalog.pg_extension_config_dump('sustained', '');
SELECT pg_catalog.pg_extension_config_dump('unlinked', '');
SELECT pg_catalog.pg_extension_config_dump('plock', '');
SELECT pg_catalog.pg_extension_config_dump('lock_wait', '');
SELECT pg_catalog.pg_extension_config_dump('delslice', '');
SELECT pg_catalog.pg_extension_config_dump('client_role', '');
SELECT pg_catalog.pg_extension_config_dump('dir_stats', '');
SELECT pg_catalog.pg_extension_config_dump('quota', '');
SELECT pg_catalog.pg_extension_config_dump('quota_usage', '');
SELECT pg_catalog.pg_extension_config_dump('tier', '');
SELECT pg_catalog.pg_extension_config_dump('acl', '');
SELECT pg_catalog.pg_extension_config_dump('change', '');
SELECT pg_catalog.pg_extension_config_dump('change_id', '');
SELECT pg_catalog.pg_extension_config_dump('trash_name', '');
SELECT pg_catalog.pg_extension_config_dump('shard_map', '');
