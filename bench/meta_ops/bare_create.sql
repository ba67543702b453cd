-- the floor of a create: only the two rows it must write (an entry and a node), async commit,
-- into copies of jfs.edge and jfs.node with the same indexes; no checks, no locks, no usage
\set n random(1, 1000000000000)
\set dir :dir_base + :client_id
SELECT bench_bare_create(:dir, convert_to('f' || :n, 'UTF8'), 1099511627776 + :n);
