-- Storage tiers: tier ids 1..3 name object storage classes (0 = the volume
-- default); a node's tier is inherited from its directory at create time
-- (mknod). These set the mapping and the tiers of existing nodes; moving
-- existing objects into the new class is the client's part (`jfs tier set`).

-- The object storage classes a tier may name ('' = the bucket's default).
CREATE FUNCTION _storage_classes() RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ARRAY['', 'STANDARD', 'STANDARD_IA', 'ONEZONE_IA', 'INTELLIGENT_TIERING', 'GLACIER_IR',
                 'GLACIER', 'DEEP_ARCHIVE', 'REDUCED_REDUNDANCY']
$$;

-- The storage class of every tier id, for the mounts (a client role reads
-- no table).
CREATE FUNCTION tier_classes() RETURNS TABLE (id smallint, storage_class text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT t.id, t.storage_class FROM tier t ORDER BY t.id
$$;

-- Maps tier p_id (1..3; 0 is the volume default) to storage class p_class.
CREATE FUNCTION set_tier_class(p_id integer, p_class text) RETURNS TABLE (id smallint, storage_class text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    IF p_id IS NULL OR p_id NOT BETWEEN 0 AND 3 THEN
        RAISE EXCEPTION 'jfs.set_tier_class: tier id must be 0..3, not %', coalesce(p_id::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF p_class IS NULL OR NOT upper(p_class) = ANY (_storage_classes()) THEN
        RAISE EXCEPTION 'jfs.set_tier_class: unknown storage class %', coalesce(p_class, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'One of: ' || array_to_string((_storage_classes())[2:], ', ') || ', or '''' for the default.';
    END IF;
    INSERT INTO tier AS t (id, storage_class) VALUES (p_id, upper(p_class))
        ON CONFLICT ON CONSTRAINT tier_pkey DO UPDATE SET storage_class = excluded.storage_class;
    RETURN QUERY SELECT t.id, t.storage_class FROM tier t WHERE t.id = p_id;
END
$$;

-- Sets the tier of the node at p_path (and, with p_recursive, of everything
-- below it, set-based; directories pass it on to what is created in them
-- later). Returns the nodes whose tier changed.
CREATE FUNCTION set_tier(p_path text, p_id integer, p_recursive boolean DEFAULT false) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_inode bigint := resolve(p_path);
    v_changed bigint;
BEGIN
    IF p_id IS NULL OR p_id NOT BETWEEN 0 AND 3 THEN
        RAISE EXCEPTION 'jfs.set_tier: tier id must be 0..3, not %', coalesce(p_id::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF v_inode IS NULL THEN
        RAISE EXCEPTION 'jfs.set_tier: % does not exist', coalesce(p_path, 'NULL')
            USING ERRCODE = 'undefined_object', HINT = 'Paths are absolute, from the volume''s root.';
    END IF;
    WITH RECURSIVE tree(inode) AS (
        SELECT v_inode
        UNION
        SELECT e.inode FROM tree t JOIN edge e ON e.parent = t.inode
         WHERE p_recursive AND EXISTS (SELECT 1 FROM node d WHERE d.inode = t.inode AND d.type = 2)
    ), changed AS (
        UPDATE node n SET tier = p_id, ctime = _now()
         WHERE n.inode IN (SELECT t.inode FROM tree t) AND n.tier <> p_id
        RETURNING 1
    )
    SELECT count(*) INTO v_changed FROM changed;
    IF v_changed > 0 THEN
        PERFORM _log_node_change(CASE WHEN p_recursive THEN 'tier_tree' ELSE 'tier' END, v_inode);
    END IF;
    RETURN v_changed;
END
$$;

-- The files at or below p_path (with p_recursive) with their tier and their
-- slices: what `jfs tier set|restore|status` walks. Holes have no objects,
-- nor do slices kept in the database (inline_data: they stay there,
-- whatever the tier).
CREATE FUNCTION tier_files(p_path text, p_recursive boolean DEFAULT false)
RETURNS TABLE (inode bigint, tier smallint, storage_class text, slice_id bigint, slice_size integer)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_inode bigint := resolve(p_path);
BEGIN
    IF v_inode IS NULL THEN
        RAISE EXCEPTION 'jfs.tier_files: % does not exist', coalesce(p_path, 'NULL') USING ERRCODE = 'undefined_object';
    END IF;
    RETURN QUERY
        WITH RECURSIVE tree(inode) AS (
            SELECT v_inode
            UNION
            SELECT e.inode FROM tree t JOIN edge e ON e.parent = t.inode
             WHERE p_recursive AND EXISTS (SELECT 1 FROM node d WHERE d.inode = t.inode AND d.type = 2)
        )
        SELECT n.inode, n.tier, coalesce(t.storage_class, ''), s.slice_id, s.slice_size
          FROM tree x
          JOIN node n ON n.inode = x.inode AND n.type = 1
          LEFT JOIN tier t ON t.id = n.tier
          JOIN slice s ON s.inode = n.inode AND s.slice_id <> 0
         WHERE NOT EXISTS (SELECT 1 FROM inline_data i WHERE i.slice_id = s.slice_id)
         ORDER BY n.inode, s.slice_id;
END
$$;

-- Files and bytes per tier.
CREATE VIEW tier_usage AS
SELECT t.id AS tier, t.storage_class, count(n.inode) AS files, coalesce(sum(n.length), 0)::bigint AS bytes
  FROM tier t LEFT JOIN node n ON n.tier = t.id AND n.type = 1
 GROUP BY t.id, t.storage_class
 ORDER BY t.id;
