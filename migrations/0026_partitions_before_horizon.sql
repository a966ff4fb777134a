-- Signals older than the retention horizon are folded into their failures like any other: their
-- month gets a partition again (the next retention pass drops it), so this no longer clamps the
-- months it creates to the horizon.
CREATE OR REPLACE FUNCTION faultline_ensure_partitions(p_from timestamptz, p_to timestamptz) RETURNS integer
LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
DECLARE
    m       timestamptz := date_trunc('month', p_from, 'UTC');
    created integer := 0;
    t       text;
    part    text;
BEGIN
    WHILE m < p_to LOOP
        FOREACH t IN ARRAY ARRAY['events'] LOOP
            part := t || '_' || to_char(m AT TIME ZONE 'UTC', 'YYYY_MM');
            IF to_regclass(part) IS NULL THEN
                PERFORM pg_advisory_xact_lock(1179385859, 0);
                -- The name lookup may not see a partition another session has just committed (an
                -- advisory lock does not refresh the catalog cache): that creation is a success.
                BEGIN
                    -- CREATE TABLE ... PARTITION OF would lock the parent exclusively (waiting for
                    -- every open ingest); ATTACH takes SHARE UPDATE EXCLUSIVE, which writers ignore.
                    EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part, t);
                    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                                   t, part, m, ((m AT TIME ZONE 'UTC') + interval '1 month') AT TIME ZONE 'UTC');
                    created := created + 1;
                EXCEPTION WHEN duplicate_table THEN
                    NULL;
                END;
            END IF;
        END LOOP;
        m := ((m AT TIME ZONE 'UTC') + interval '1 month') AT TIME ZONE 'UTC';
    END LOOP;
    RETURN created;
END
$$;
