-- Rollups for top-errors: what the failures' signals were, pre-aggregated per UTC
-- day and per UTC month like `rollup_causes` (migration 0014), so top-errors over a year reads a few
-- thousand rows instead of every failure and every entry of its `signal_kinds`. Maintained where
-- `rollup_causes` is: in the transaction of each re-fold and of the rebuild after a catalog edit.
-- Nothing else changes what it counts: kind, code and severity are the failure row's own (the
-- root signal's classification), which only a re-fold or a rebuild rewrites; a post-mortem changes
-- the effective cause, an inventory change the node's group or model, neither of which is here.
--
-- Per (period, bucket, cluster, kind, code, severity), `severity` being the failure's:
--  * root_failures: failures whose root signal has this kind and code;
--  * holding_failures: failures holding at least one signal of this kind and code;
--  * signals: the signals of this kind and code in those failures.
-- `code` is the signal's code as text, '' when it has none (a key column cannot be NULL).
-- Counts are additive deltas; a row whose counts fell back to zero stays (reads sum it as 0).
CREATE TABLE rollup_errors (
    period           text    NOT NULL CHECK (period IN ('day', 'month')),
    bucket           date    NOT NULL,
    cluster          text    NOT NULL,
    kind             text    NOT NULL,
    code             text    NOT NULL,
    severity         text    NOT NULL,
    root_failures    bigint  NOT NULL,
    holding_failures bigint  NOT NULL,
    signals          bigint  NOT NULL,
    PRIMARY KEY (period, bucket, cluster, kind, code, severity)
);

-- What one failure contributes to rollup_errors: its root signal's (kind, code) once as a root, and
-- each distinct (kind, code) of its signals once as held, with how many signals had it. The root
-- is counted from the root columns, not found among `signal_kinds`, so the two never depend on
-- each other.
CREATE FUNCTION failure_error_entries(root_kind text, root_code bigint, signal_kinds text[])
RETURNS TABLE (kind text, code text, root_failures bigint, holding_failures bigint, signals bigint)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT root_kind, COALESCE(root_code::text, ''), 1::bigint, 0::bigint, 0::bigint
    UNION ALL
    SELECT split_part(k, E'\x1f', 1), split_part(k, E'\x1f', 2), 0, 1, count(*)
    FROM unnest(signal_kinds) AS k
    GROUP BY k
$$;

-- Backfill from the failures already stored.
INSERT INTO rollup_errors (period, bucket, cluster, kind, code, severity, root_failures, holding_failures, signals)
SELECT p.period, CASE p.period WHEN 'day' THEN f.day ELSE date_trunc('month', f.day)::date END,
       f.cluster, e.kind, e.code, f.severity, sum(e.root_failures), sum(e.holding_failures), sum(e.signals)
FROM (SELECT (first_at AT TIME ZONE 'UTC')::date AS day, cluster, severity, root_kind, root_code, signal_kinds
      FROM failures) f
CROSS JOIN LATERAL failure_error_entries(f.root_kind, f.root_code, f.signal_kinds) e
CROSS JOIN (VALUES ('day'), ('month')) AS p(period)
GROUP BY 1, 2, 3, 4, 5, 6;
