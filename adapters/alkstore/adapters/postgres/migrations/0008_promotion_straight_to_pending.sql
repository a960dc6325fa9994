-- alkstore schema, version 8: the next job of an ordering key is promoted straight to pending
-- when it is due (ADR 032).
--
-- promote_6 promoted every next job 'delayed', so the claim after each ack of a keyed job found a
-- due delayed row and swept before it claimed: a round trip more per keyed job. promote_8 makes
-- it 'pending' when its run_at has come by the database's clock (the store's clock by default,
-- ADR 015), 'delayed' otherwise, where the claim's sweep makes it pending in time as before. A
-- store on another clock loses nothing: a claim takes only jobs whose run_at has come by its own.
--
-- Not online: each new partial index reads all of jobs under a SHARE lock (writes wait for the
-- build); the function and the trigger re-pointed to it cost a moment. Code of version 7 runs
-- unchanged against this schema: no statement of it calls the trigger's function.

-- The head of each ordering key (its one job not waiting), so the trigger's "has the key still a
-- head?" is an index probe: through jobs_ordering it read every waiting job of the key.
CREATE INDEX jobs_ordering_head ON jobs (queue, ordering_key) WHERE ordering_key IS NOT NULL AND state <> 'waiting';

-- The waiting jobs of each queue in id order (the waiting listing's order), so counting and listing
-- them are index probes: with no index of their own both read every job of the queue (a capped
-- count of a queue with nothing waiting never reaches its cap).
CREATE INDEX jobs_waiting ON jobs (queue, id) WHERE state = 'waiting';

CREATE FUNCTION promote_8() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_next bigint;
    v_run_at timestamptz;
BEGIN
    PERFORM lock_ordering_key_6(TG_TABLE_SCHEMA, OLD.queue, OLD.ordering_key);
    SELECT id INTO v_next FROM jobs
     WHERE queue = OLD.queue AND ordering_key = OLD.ordering_key AND state <> 'waiting'
     LIMIT 1;
    IF v_next IS NOT NULL THEN
        RETURN NULL;  -- the key still has its head
    END IF;
    SELECT id, run_at INTO v_next, v_run_at FROM jobs
     WHERE queue = OLD.queue AND ordering_key = OLD.ordering_key AND state = 'waiting'
     ORDER BY id LIMIT 1;
    IF v_next IS NOT NULL THEN
        UPDATE jobs SET state = CASE WHEN v_run_at <= clock_timestamp() THEN 'pending' ELSE 'delayed' END
         WHERE id = v_next;
        PERFORM pg_notify(channel(TG_TABLE_SCHEMA, OLD.queue), '');
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER jobs_promote ON jobs;
CREATE TRIGGER jobs_promote AFTER DELETE ON jobs
    FOR EACH ROW WHEN (OLD.ordering_key IS NOT NULL AND OLD.state <> 'waiting')
    EXECUTE FUNCTION promote_8();
