-- A signal's identity as one key (`fold::burst::BurstIdentity::key`): the GPU in every form it is
-- named, what was measured and, for a signal without a code, its normalised text, beside the source.
-- A later batch extends a stored signal only when the keys are equal. Signals stored before this
-- column existed have none: they stay as they were folded, and new repeats start signals of their own.
ALTER TABLE events ADD COLUMN burst_key uuid NULL;
-- Retention moves a dropped month's transitions into the archive with `SELECT *`: same columns.
ALTER TABLE events_archive ADD COLUMN burst_key uuid NULL;
