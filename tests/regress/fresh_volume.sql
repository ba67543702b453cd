\ir fresh_extension.sql
SELECT errno FROM jfs.format('regress');
