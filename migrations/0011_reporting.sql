-- The reporting interface: a `reporting` schema of read-only views whose columns
-- are a contract for Grafana and ad-hoc SQL, and a `faultline_reader` role that may read only them.
-- Internal tables may change shape; these views keep their column names and types (new columns may
-- be added at the end; nothing is renamed or removed without a new view name).
-- The views run with their owner's rights, so the reader needs no right on any table.

CREATE SCHEMA reporting;
COMMENT ON SCHEMA reporting IS
    'Faultline''s stable read-only SQL interface (Grafana, ad-hoc SQL). Columns are a contract; read with the faultline_reader role.';

-- Failures with their effective root cause (a post-mortem's when there is one, else the automatic
-- classification) and the generation and group of their root node from the inventory.
CREATE VIEW reporting.failures AS
SELECT fe.id                                              AS failure_id,
       fe.cluster                                         AS cluster,
       fe.job_id                                          AS job_id,
       fe.first_at                                        AS first_at,
       fe.last_at                                         AS last_at,
       EXTRACT(EPOCH FROM fe.last_at - fe.first_at)::double precision AS duration_seconds,
       fe.nodes                                           AS nodes,
       cardinality(fe.nodes)                              AS node_count,
       fe.signal_count                                    AS signal_count,
       fe.root_node                                       AS root_node,
       fe.root_kind                                       AS root_kind,
       fe.root_code                                       AS root_code,
       COALESCE(n.gpu_generation, fe.signal_generation)   AS generation,
       COALESCE(n.group_label, '(none)')                  AS node_group,
       fe.effective_category                              AS category,
       fe.effective_component                             AS component,
       fe.category                                        AS auto_category,
       fe.component                                       AS auto_component,
       (fe.pm_category IS NOT NULL)                       AS has_postmortem,
       fe.severity                                        AS severity,
       fe.transient                                       AS transient,
       fe.action                                          AS action,
       fe.symptom                                         AS symptom,
       fe.rule_id                                         AS rule_id,
       fe.resolved_at                                     AS resolved_at,
       fe.resolution                                      AS resolution,
       fe.detection_minutes                               AS detection_minutes,
       fe.resubmission_minutes                            AS resubmission_minutes,
       fe.setup_minutes                                   AS setup_minutes,
       fe.recomputation_minutes                           AS recomputation_minutes
FROM failures_effective fe
LEFT JOIN nodes n ON n.cluster = fe.cluster AND n.hostname = fe.root_node;

COMMENT ON VIEW reporting.failures IS
    'One row per failure (signals folded by cluster and correlation key within the correlation window), with the effective root cause.';
COMMENT ON COLUMN reporting.failures.failure_id IS 'Failure id as in the API: derived from cluster, correlation key and first signal time, so it survives a rebuild unless an earlier signal joins the failure';
COMMENT ON COLUMN reporting.failures.cluster IS 'Cluster name';
COMMENT ON COLUMN reporting.failures.job_id IS 'Job the failure hit (NULL for a node failure outside any job)';
COMMENT ON COLUMN reporting.failures.first_at IS 'Time of the first signal';
COMMENT ON COLUMN reporting.failures.last_at IS 'Time of the last signal (or last repeat of a burst)';
COMMENT ON COLUMN reporting.failures.duration_seconds IS 'last_at - first_at in seconds';
COMMENT ON COLUMN reporting.failures.nodes IS 'Hostnames with at least one signal of the failure, sorted';
COMMENT ON COLUMN reporting.failures.node_count IS 'Number of entries of nodes';
COMMENT ON COLUMN reporting.failures.signal_count IS 'Signals folded into the failure';
COMMENT ON COLUMN reporting.failures.root_node IS 'Node of the root signal (NULL when the root names none)';
COMMENT ON COLUMN reporting.failures.root_kind IS 'Kind of the root signal (xid, ecc, nccl_timeout, ...)';
COMMENT ON COLUMN reporting.failures.root_code IS 'Code of the root signal (e.g. the XID number), NULL when it has none';
COMMENT ON COLUMN reporting.failures.generation IS 'GPU generation of the root node from the inventory, else from the root signal''s gpu_model';
COMMENT ON COLUMN reporting.failures.node_group IS 'Group label of the root node in the inventory, ''(none)'' when it has none or is unknown';
COMMENT ON COLUMN reporting.failures.category IS 'Effective root-cause category: hardware, platform, user or unknown (the post-mortem''s, else automatic)';
COMMENT ON COLUMN reporting.failures.component IS 'Effective root-cause component (the post-mortem''s, else automatic)';
COMMENT ON COLUMN reporting.failures.auto_category IS 'Category from the automatic classification';
COMMENT ON COLUMN reporting.failures.auto_component IS 'Component from the automatic classification';
COMMENT ON COLUMN reporting.failures.has_postmortem IS 'True when a post-mortem set the root cause';
COMMENT ON COLUMN reporting.failures.severity IS 'Severity of the classification';
COMMENT ON COLUMN reporting.failures.transient IS 'True when the cause is transient (a restart usually clears it)';
COMMENT ON COLUMN reporting.failures.action IS 'Recommended action of the classification';
COMMENT ON COLUMN reporting.failures.symptom IS 'Observed symptom of the root signal (job_hang, job_crash, ...), NULL when unknown';
COMMENT ON COLUMN reporting.failures.rule_id IS 'Classification rule that matched, NULL when none did';
COMMENT ON COLUMN reporting.failures.resolved_at IS 'When the failure was resolved (lifecycle), NULL while open';
COMMENT ON COLUMN reporting.failures.resolution IS 'transient_restart, drained or other; NULL while open';
COMMENT ON COLUMN reporting.failures.detection_minutes IS 'Recovery phase: minutes to detect (lifecycle), NULL when not recorded';
COMMENT ON COLUMN reporting.failures.resubmission_minutes IS 'Recovery phase: minutes to resubmit the job, NULL when not recorded';
COMMENT ON COLUMN reporting.failures.setup_minutes IS 'Recovery phase: minutes of job set-up, NULL when not recorded';
COMMENT ON COLUMN reporting.failures.recomputation_minutes IS 'Recovery phase: minutes of lost work recomputed, NULL when not recorded';

-- Exposure: each inventory node is in service from in_service_since (else its first registration)
-- until retired_at (else now); its span is cut into UTC days and summed per cluster, group and
-- generation. Drains are not subtracted (the API's exposure does the same from the inventory).
CREATE VIEW reporting.daily_exposure AS
WITH spans AS (
    SELECT cluster, gpu_generation, gpu_count, COALESCE(group_label, '(none)') AS node_group,
           COALESCE(in_service_since, first_registered_at) AS span_start,
           COALESCE(retired_at, now()) AS span_end
    FROM nodes
), node_days AS (
    SELECT s.cluster, s.node_group, s.gpu_generation, s.gpu_count,
           d.day::date AS day,
           EXTRACT(EPOCH FROM LEAST(s.span_end, (d.day + interval '1 day') AT TIME ZONE 'UTC')
                            - GREATEST(s.span_start, d.day AT TIME ZONE 'UTC'))::double precision / 3600.0 AS hours
    FROM spans s
    CROSS JOIN LATERAL generate_series(date_trunc('day', s.span_start AT TIME ZONE 'UTC'),
                                       date_trunc('day', s.span_end AT TIME ZONE 'UTC'),
                                       interval '1 day') AS d(day)
    WHERE s.span_end > s.span_start
)
SELECT day                                   AS day,
       (day::timestamp AT TIME ZONE 'UTC')   AS day_start,
       cluster                               AS cluster,
       node_group                            AS node_group,
       gpu_generation                        AS generation,
       count(*)                              AS nodes,
       sum(gpu_count)                        AS gpus,
       sum(hours)                            AS node_hours,
       sum(hours * gpu_count)                AS gpu_hours
FROM node_days
WHERE hours > 0
GROUP BY day, cluster, node_group, gpu_generation;

COMMENT ON VIEW reporting.daily_exposure IS
    'Time in service per UTC day, cluster, node group and GPU generation, from the node inventory (the denominator of failure rates and MTBF).';
COMMENT ON COLUMN reporting.daily_exposure.day IS 'UTC calendar day';
COMMENT ON COLUMN reporting.daily_exposure.day_start IS 'Start of the day (00:00 UTC) as a timestamp, for Grafana time filters';
COMMENT ON COLUMN reporting.daily_exposure.cluster IS 'Cluster name';
COMMENT ON COLUMN reporting.daily_exposure.node_group IS 'Group label of the nodes, ''(none)'' for nodes without one';
COMMENT ON COLUMN reporting.daily_exposure.generation IS 'GPU generation of the nodes';
COMMENT ON COLUMN reporting.daily_exposure.nodes IS 'Nodes in service for some part of the day';
COMMENT ON COLUMN reporting.daily_exposure.gpus IS 'GPUs of those nodes';
COMMENT ON COLUMN reporting.daily_exposure.node_hours IS 'Node-hours in service during the day (at most 24 per node)';
COMMENT ON COLUMN reporting.daily_exposure.gpu_hours IS 'GPU-hours in service during the day (node-hours times GPUs per node)';

-- Signals as received, without the free-form attributes (sender-specific, no contract).
CREATE VIEW reporting.signals AS
SELECT e.id                                        AS signal_id,
       e.occurred_at                               AS occurred_at,
       COALESCE(e.last_occurred_at, e.occurred_at) AS last_occurred_at,
       e.repeat_count                              AS repeat_count,
       e.received_at                               AS received_at,
       e.cluster                                   AS cluster,
       e.node                                      AS node,
       n.gpu_generation                            AS node_generation,
       e.gpu_index                                 AS gpu_index,
       e.gpu_uuid                                  AS gpu_uuid,
       e.gpu_model                                 AS gpu_model,
       e.job_id                                    AS job_id,
       e.kind                                      AS kind,
       e.code                                      AS code,
       e.symptom                                   AS symptom,
       e.rc_category                               AS reported_category,
       e.rc_component                              AS reported_component,
       e.message                                   AS message
FROM events e
LEFT JOIN nodes n ON n.cluster = e.cluster AND n.hostname = e.node;

COMMENT ON VIEW reporting.signals IS
    'Raw signals (one row per stored signal; a burst of repeats is one row with repeat_count), without sender attributes.';
COMMENT ON COLUMN reporting.signals.signal_id IS 'The sender''s idempotency key';
COMMENT ON COLUMN reporting.signals.occurred_at IS 'When the signal (the first of a burst) occurred';
COMMENT ON COLUMN reporting.signals.last_occurred_at IS 'Last repeat of a burst; occurred_at for a single signal';
COMMENT ON COLUMN reporting.signals.repeat_count IS 'Occurrences folded into this row (1 for a single signal)';
COMMENT ON COLUMN reporting.signals.received_at IS 'When Faultline stored it';
COMMENT ON COLUMN reporting.signals.cluster IS 'Cluster name';
COMMENT ON COLUMN reporting.signals.node IS 'Hostname, NULL for a cluster-wide signal';
COMMENT ON COLUMN reporting.signals.node_generation IS 'GPU generation of the node in the inventory, NULL when unknown';
COMMENT ON COLUMN reporting.signals.gpu_index IS 'GPU index on the node, NULL when not given';
COMMENT ON COLUMN reporting.signals.gpu_uuid IS 'GPU UUID, NULL when not given';
COMMENT ON COLUMN reporting.signals.gpu_model IS 'GPU model as the sender reported it';
COMMENT ON COLUMN reporting.signals.job_id IS 'Job named by the sender, NULL when none';
COMMENT ON COLUMN reporting.signals.kind IS 'Signal kind (xid, ecc, nccl_timeout, link_flap, node_drain, ...)';
COMMENT ON COLUMN reporting.signals.code IS 'Signal code (e.g. the XID number), NULL when none';
COMMENT ON COLUMN reporting.signals.symptom IS 'Symptom reported by the sender, NULL when none';
COMMENT ON COLUMN reporting.signals.reported_category IS 'Root-cause category the sender asserted, NULL when none';
COMMENT ON COLUMN reporting.signals.reported_component IS 'Root-cause component the sender asserted, NULL when none';
COMMENT ON COLUMN reporting.signals.message IS 'Message text';

-- The reader role. Roles are cluster-wide and many databases may run this migration at the same
-- time (tests, several deployments on one server): create it only when missing, and treat a
-- concurrent creation (duplicate_object, or unique_violation from pg_authid) as success. Without
-- the right to create roles the migration still succeeds and warns; an administrator then runs
-- CREATE ROLE faultline_reader NOLOGIN and the two GRANTs below. A later migration that adds a view
-- grants SELECT on it the same way.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'faultline_reader') THEN
        BEGIN
            CREATE ROLE faultline_reader NOLOGIN;
        EXCEPTION
            WHEN duplicate_object OR unique_violation THEN NULL;
            WHEN insufficient_privilege THEN
                RAISE WARNING 'faultline_reader not created (no CREATEROLE); create it and grant it reporting.* by hand';
        END;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'faultline_reader') THEN
        GRANT USAGE ON SCHEMA reporting TO faultline_reader;
        GRANT SELECT ON ALL TABLES IN SCHEMA reporting TO faultline_reader;
    END IF;
END
$$;
