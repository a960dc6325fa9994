-- alkstore schema, version 12: rate limits on starts, per queue and per rate key (ADR 070).
--
-- Online: nullable columns, a new table and a new function; nothing else is touched. Code of
-- version 11 runs unchanged against this schema: it never reads the new columns or the table.

-- A queue's limits: at most rate_count starts per rate_per_us of the whole queue, and
-- key_rate_count per key_rate_per_us of each of its rate keys (NULL: no limit).
ALTER TABLE queues
    ADD COLUMN rate_count integer CHECK (rate_count > 0),
    ADD COLUMN rate_per_us bigint CHECK (rate_per_us > 0),
    ADD COLUMN key_rate_count integer CHECK (key_rate_count > 0),
    ADD COLUMN key_rate_per_us bigint CHECK (key_rate_per_us > 0);

-- The key whose limit a job's starts count against.
ALTER TABLE jobs ADD COLUMN rate_key text COLLATE "C";

-- The earliest next start of each limited queue (key '') and each (queue, rate key): one instant
-- each, moved forward by every start (GCRA without a burst tolerance). Only the updates of
-- next_at, which no index holds, touch a row once it exists: they stay on its page (HOT).
CREATE TABLE rate_starts (
    queue text COLLATE "C" NOT NULL,
    key text COLLATE "C" NOT NULL,
    next_at timestamptz NOT NULL,
    PRIMARY KEY (queue, key)
) WITH (fillfactor = 50);

-- Whether a job of p_queue with rate key p_key may start at p_now, and if so the start counted:
-- the queue's next start moves p_every_us on (when the queue is limited), the key's
-- p_key_every_us (when the key is). Claims of a limited queue take its lock one after another;
-- a key's lock is only tried (a claim that finds another claim starting the key passes over
-- it). Each read runs after its lock, on a snapshot that sees every start committed before.
CREATE FUNCTION rate_start_14(p_queue text, p_key text, p_now timestamptz, p_every_us bigint, p_key_every_us bigint)
RETURNS boolean
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_keyed boolean := p_key IS NOT NULL AND p_key_every_us IS NOT NULL;
BEGIN
    IF p_every_us IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock(hashtextextended(current_schema() || chr(31) || p_queue, 12));
        IF EXISTS (SELECT FROM rate_starts WHERE queue = p_queue AND key = '' AND next_at > p_now) THEN
            RETURN false;
        END IF;
    END IF;
    IF v_keyed THEN
        IF NOT pg_try_advisory_xact_lock(
                hashtextextended(current_schema() || chr(31) || p_queue || chr(31) || p_key, 12)) THEN
            RETURN false;
        END IF;
        IF EXISTS (SELECT FROM rate_starts WHERE queue = p_queue AND key = p_key AND next_at > p_now) THEN
            RETURN false;
        END IF;
        INSERT INTO rate_starts (queue, key, next_at)
        VALUES (p_queue, p_key, p_now + p_key_every_us * interval '1 microsecond')
        ON CONFLICT (queue, key) DO UPDATE SET next_at = excluded.next_at;
    END IF;
    IF p_every_us IS NOT NULL THEN
        INSERT INTO rate_starts (queue, key, next_at)
        VALUES (p_queue, '', p_now + p_every_us * interval '1 microsecond')
        ON CONFLICT (queue, key) DO UPDATE SET next_at = excluded.next_at;
    END IF;
    RETURN true;
END
$$;
