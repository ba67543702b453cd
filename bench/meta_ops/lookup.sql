\set i random(1, 10000)
SELECT errno FROM jfs.lookup(:lookup_dir, convert_to('e' || :i, 'UTF8'));
