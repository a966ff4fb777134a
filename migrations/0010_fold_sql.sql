-- Job attribution as one function (it was a SQL fragment pasted into three statements): the job that
-- ran on `node` at `at`, for a signal that names no job; the latest started one (then the smallest
-- id) when runs overlap; NULL when none ran. STABLE: it reads the jobs table.
CREATE FUNCTION faultline_attributed_job(p_cluster text, p_node text, p_job_id text, p_at timestamptz)
RETURNS text LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT j.job_id FROM jobs j
    WHERE p_job_id IS NULL AND p_node IS NOT NULL AND j.cluster = p_cluster AND j.nodes @> ARRAY[p_node]
      AND j.started_at <= p_at AND (j.ended_at IS NULL OR p_at <= j.ended_at)
    ORDER BY j.started_at DESC, j.job_id
    LIMIT 1
$$;

-- Looking up a key's failures near new signals: `last_at >= start` is the selective bound (a key's
-- earlier failures all end before it), so index it; the first_at index read every earlier failure.
CREATE INDEX failures_key_last_idx ON failures (cluster, correlation_key, last_at);

-- Folding reads a key's signals whose span [occurred_at, last occurrence] overlaps a range: the
-- selective bound is the span's end >= range start (a key's earlier signals all end before it).
-- These replace the indexes on occurred_at, which read every earlier signal of the job or node.
CREATE INDEX events_job_end_idx ON events (cluster, job_id, (COALESCE(last_occurred_at, occurred_at)))
    WHERE job_id IS NOT NULL;
CREATE INDEX events_node_end_idx ON events (cluster, node, (COALESCE(last_occurred_at, occurred_at)))
    WHERE job_id IS NULL;
DROP INDEX events_job_idx;
DROP INDEX events_node_idx;
