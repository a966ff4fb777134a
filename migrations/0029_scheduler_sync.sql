-- Scheduler sync: how far each cluster's syncer has read its scheduler's accounting, and what the
-- scheduler says of each job beyond its run (name, its own state, exit codes, restarts).

-- The position of a sync source (`slurm-jobs`, `slurm-events`...) per cluster: the end of the
-- last window whose records were all stored. It only moves forward, so two syncers, or one
-- restarted, neither skip nor lose a window; records sent twice are duplicates by their ids.
CREATE TABLE sync_cursors (
    cluster    text        NOT NULL,
    source     text        NOT NULL,
    position   timestamptz NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    updated_by text        NULL,
    PRIMARY KEY (cluster, source)
);

ALTER TABLE jobs
    ADD COLUMN name              text    NULL,
    -- The scheduler's own state (Slurm: COMPLETED, FAILED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY,
    -- CANCELLED, PREEMPTED...), which `state` folds into completed / failed / cancelled / running.
    ADD COLUMN scheduler_state   text    NULL,
    ADD COLUMN exit_code         integer NULL,
    ADD COLUMN exit_signal       integer NULL,
    -- Slurm's DerivedExitCode: the highest exit code of the job's steps.
    ADD COLUMN derived_exit_code integer NULL,
    -- Times the job was requeued and ran again (its node failed, it was preempted).
    ADD COLUMN restarts          integer NOT NULL DEFAULT 0 CHECK (restarts >= 0);

-- A job's failures (its detail, `GET /v1/failures?job_id=`) without a scan of the cluster's.
CREATE INDEX failures_job_idx ON failures (cluster, job_id) WHERE job_id IS NOT NULL;
