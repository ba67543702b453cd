\set i random(:first_inode, :first_inode + 9999)
SELECT errno FROM jfs.getattr(:i);
