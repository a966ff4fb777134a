-- A firing alert whose labels changed is notified to Alertmanager as a relabel: the old label set
-- resolved and the new one firing, in one request.
ALTER TABLE alert_outbox DROP CONSTRAINT alert_outbox_event_check;
ALTER TABLE alert_outbox ADD CONSTRAINT alert_outbox_event_check
    CHECK (event IN ('firing', 'repeat', 'resolved', 'relabel'));
