INSERT INTO bench_insert (v) VALUES (1);
