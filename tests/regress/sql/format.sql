-- format: a volume is initialised once; bad settings are refused with a reason
\ir tests/regress/fresh_extension.sql
SELECT errno, message FROM jfs.format('Bad_Name');
SELECT errno, message FROM jfs.format('vol1', p_storage => 'ftp');
SELECT errno, message FROM jfs.format('vol1', p_block_size => 1000);
SELECT errno, message FROM jfs.format('vol1', p_meta_durability => 'never');
SELECT errno, message FROM jfs.format('vol1', p_capacity => -1);
SELECT errno, message FROM jfs.format('vol1', p_compression => 'gzip');
SELECT errno, message FROM jfs.format('vol1', p_encrypt_algo => 'chacha20-rsa');
SELECT errno, message FROM jfs.format('vol1', p_encrypt_algo => 'rot13', p_encrypt_key => 'PEM');
SELECT count(*) AS formatted FROM jfs.setting;
SELECT errno, uuid, message
  FROM jfs.format('vol1', 'file', '/var/tmp/jfs-blocks', p_uuid => '00000000-0000-0000-0000-0000000000a1');
SELECT name, uuid, storage, bucket, block_size, trash_days, max_space AS capacity, max_inodes AS inodes, meta_durability
  FROM jfs.setting, jfs.quota WHERE kind = 'fs';
-- the root directory is inode 1, its own parent, with 2 links
SELECT errno, inode, type, mode, uid, gid, nlink, length, parent, atime = mtime AND mtime = ctime AS same_times,
       mtime > 1700000000000000000 AS ns_times
  FROM jfs.getattr(1);
SELECT * FROM jfs.statfs();
-- formatting again is refused and changes nothing
SELECT errno, uuid, message FROM jfs.format('vol2');
SELECT name FROM jfs.setting;
-- force changes the settings and keeps the uuid and the namespace
SELECT errno FROM jfs.mknod(1, 'kept', 1, 420, 0, 0);
SELECT errno, uuid, message FROM jfs.format('vol2', p_capacity => 1073741824, p_inodes => 1000, p_force => true);
SELECT name, uuid, max_space AS capacity, max_inodes AS inodes FROM jfs.setting, jfs.quota WHERE kind = 'fs';
SELECT name FROM jfs.ls('/');
SELECT errno, total_space, avail_space, used_inodes, avail_inodes FROM jfs.statfs();
-- the block size cannot change once data exists
SELECT jfs.alloc_ids('slice', 1) AS ws \gset
SELECT errno FROM jfs.write_slice(2, 0, 0, :ws, 4096, 0, 4096);
SELECT errno, message FROM jfs.format('vol2', p_block_size => 1048576, p_force => true);
-- so can how blocks are stored: compression and encryption (a NULL key
-- keeps the volume's, and keeping what is there is no change)
SELECT errno, message FROM jfs.format('vol2', p_compression => 'lz4', p_force => true);
SELECT errno, message FROM jfs.format('vol2', p_encrypt_key => 'PEM', p_force => true);
SELECT errno, message FROM jfs.format('vol2', p_capacity => 1073741824, p_inodes => 1000, p_force => true);
SELECT compression, encrypt_algo, (SELECT count(*) FROM jfs.secret) AS secrets FROM jfs.volume();
-- id ranges: consecutive reservations never overlap
SELECT jfs.alloc_ids('inode', 1000) AS first, jfs.alloc_ids('inode', 10) AS second, jfs.alloc_ids('slice', 5) AS slices;
SELECT jfs.alloc_ids('bogus', 5);
SELECT jfs.alloc_ids('inode', 0);
SELECT * FROM jfs.fsck();
-- an empty volume takes them: the key kept as given, in jfs.secret only
DROP EXTENSION jfs CASCADE;
CREATE EXTENSION jfs;
SELECT errno FROM jfs.format('vol3', p_compression => 'LZ4', p_encrypt_key => 'PEM TEXT');
SELECT compression, encrypt_algo FROM jfs.volume();
SELECT encrypt_key FROM jfs.volume_secrets();
SELECT errno FROM jfs.format('vol3', p_compression => 'zstd', p_encrypt_algo => 'chacha20-rsa',
                             p_encrypt_key => 'OTHER PEM', p_force => true);
SELECT compression, encrypt_algo FROM jfs.volume();
SELECT encrypt_key FROM jfs.volume_secrets();
-- '' ends the encryption of a volume without data (and compression not
-- given is kept)
SELECT errno FROM jfs.format('vol3', p_encrypt_key => '', p_force => true);
SELECT compression, encrypt_algo FROM jfs.volume();
-- once it holds data, other settings still change without restating how
-- blocks are stored
SELECT jfs.alloc_ids('slice', 1) AS ws3 \gset
SELECT errno FROM jfs.mknod(1, 'data', 1, 420, 0, 0);
SELECT errno FROM jfs.write_slice((SELECT inode FROM jfs.lookup(1, 'data')), 0, 0, :ws3, 4096, 0, 4096);
SELECT errno, message FROM jfs.format('vol3', p_trash_days => 2, p_force => true);
SELECT compression, encrypt_algo, trash_days FROM jfs.volume();
-- DROP EXTENSION removes every table, sequence, function and type it created
-- (PostgreSQL leaves the empty schema the control file's `schema` made)
DROP EXTENSION jfs;
SELECT (SELECT count(*) FROM pg_class WHERE relnamespace = 'jfs'::regnamespace) AS relations,
       (SELECT count(*) FROM pg_proc WHERE pronamespace = 'jfs'::regnamespace) AS functions,
       (SELECT count(*) FROM pg_type WHERE typnamespace = 'jfs'::regnamespace) AS types;
DROP SCHEMA jfs;
