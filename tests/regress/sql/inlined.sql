-- inlined: helper functions written in SQL are inlined into the statements that call
-- them: PostgreSQL before 18 plans a SQL-language function that is not
-- inlined afresh at every call (some 100-250 us for one that reads a
-- catalog view), where a PL/pgSQL function keeps its plans for the
-- session. So a helper that cannot be inlined (a FROM, a sub-select, an
-- aggregate, a SET clause) is written in PL/pgSQL. This lists the SQL
-- helpers (not the procedures clients call: those are planned with their
-- call) that a call is not inlined into, as EXPLAIN VERBOSE shows it, with
-- NULL arguments; the set-returning ones called in FROM.
\ir tests/regress/fresh_extension.sql
SET search_path = jfs, pg_catalog;
CREATE FUNCTION pg_temp.not_inlined() RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
    f record;
    v_args text;
    v_plan text;
    v_line text;
BEGIN
    FOR f IN SELECT p.proname, p.proretset, p.proargtypes
               FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
              WHERE p.pronamespace = 'jfs'::regnamespace AND l.lanname = 'sql' AND NOT p.prosecdef
              ORDER BY p.proname LOOP
        SELECT string_agg('NULL::' || format_type(t, NULL), ', ' ORDER BY o) INTO v_args
          FROM unnest(f.proargtypes::oid[]) WITH ORDINALITY u(t, o);
        v_plan := '';
        FOR v_line IN EXECUTE pg_catalog.format(
                CASE WHEN f.proretset THEN 'EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM jfs.%I(%s)'
                     ELSE 'EXPLAIN (VERBOSE, COSTS OFF) SELECT jfs.%I(%s) FROM (VALUES (1)) v(x)' END,
                f.proname, coalesce(v_args, '')) LOOP
            v_plan := v_plan || ' ' || v_line;
        END LOOP;
        IF v_plan ~ ('\m' || f.proname || '\(') THEN  -- (the whole name: not _claim_stripe for _stripe)
            RETURN NEXT f.proname;
        END IF;
    END LOOP;
END
$$;
SELECT * FROM pg_temp.not_inlined();
-- the helpers that are in SQL at all (a helper added in SQL shows here)
SELECT count(*) > 20 AS many_sql_helpers
  FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
 WHERE p.pronamespace = 'jfs'::regnamespace AND l.lanname = 'sql' AND NOT p.prosecdef;
SELECT * FROM jfs.fsck();
