-- How long the worker's pass took to reach each verdict (pull when the pass
-- pulls, read the facts, evaluate, store up to the insert), in
-- microseconds; NULL for verdicts from before it was measured, or stored by
-- something other than a worker's pass.
ALTER TABLE verdicts ADD COLUMN pass_us bigint;
