-- The lease's epoch grows each time another instance takes it over: a delivery records its attempt
-- only while the epoch it was sent under is still the holder's (a fence against an instance that
-- paused past its lease and woke up sending).
ALTER TABLE alert_lease ADD COLUMN epoch bigint NOT NULL DEFAULT 0;
