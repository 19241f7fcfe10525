-- Quotas in constant time (issue 19): what each user holds, kept by statement-level triggers in
-- the statement that changes it, so a claim sums at most 16 rows instead of counting the user's
-- tasks (a COUNT(*) over 100,000 rows at the default quota).
--
-- Each user's holdings are spread over 16 slots, one per server connection (its pid modulo 16):
-- one counter row per user would make every create of a user wait for the previous one to commit,
-- as each would update that row. Creates on different connections touch different slots.
CREATE TABLE "user_holdings" (
    "user_id" UUID NOT NULL,
    "slot" SMALLINT NOT NULL,
    "tasks" INTEGER NOT NULL DEFAULT 0,
    "tags" INTEGER NOT NULL DEFAULT 0,
    "webhooks" INTEGER NOT NULL DEFAULT 0,
    "storage_bytes" BIGINT NOT NULL DEFAULT 0,

    CONSTRAINT "user_holdings_pkey" PRIMARY KEY ("user_id","slot")
);
ALTER TABLE "user_holdings" ADD CONSTRAINT "user_holdings_user_id_fkey" FOREIGN KEY ("user_id") REFERENCES "users"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- Every user's holdings from the rows themselves, in slot 0: the backfill here, and `npm run
-- restore` after loading (the triggers have counted the loaded rows on top of the loaded counters).
CREATE FUNCTION recount_user_holdings() RETURNS void LANGUAGE sql AS $$
  DELETE FROM user_holdings;
  INSERT INTO user_holdings (user_id, slot, tasks, tags, webhooks, storage_bytes)
  SELECT u.id, 0,
    (SELECT count(*) FROM tasks t WHERE t.owner_id = u.id),
    (SELECT count(*) FROM tags g WHERE g.owner_id = u.id),
    (SELECT count(*) FROM webhooks w WHERE w.owner_id = u.id),
    (SELECT coalesce(sum(a.size), 0) FROM attachments a WHERE a.uploaded_by = u.id)
  FROM users u;
$$;
SELECT recount_user_holdings();

-- TG_ARGV: the holdings column, the row's user column, and what a row adds ('1', or a column such
-- as the attachment's size). A user deleted in this transaction (their rows going with them by
-- cascade) is no longer seen, and left alone.
CREATE FUNCTION count_user_holdings() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  amount text := CASE WHEN TG_ARGV[2] = '1' THEN '1' ELSE format('%I', TG_ARGV[2]) END;
  sign text := CASE WHEN TG_OP = 'INSERT' THEN '' ELSE '-' END;
  changed text := CASE WHEN TG_OP = 'INSERT' THEN 'added' ELSE 'removed' END;
BEGIN
  EXECUTE format(
    'INSERT INTO user_holdings (user_id, slot, %1$I)
       SELECT d.user_id, pg_backend_pid() %% 16, %4$s d.n
       FROM (SELECT %2$I AS user_id, sum(%3$s) AS n FROM %5$I GROUP BY 1) d
       WHERE EXISTS (SELECT 1 FROM users u WHERE u.id = d.user_id)
     ON CONFLICT (user_id, slot) DO UPDATE SET %1$I = user_holdings.%1$I + EXCLUDED.%1$I',
    TG_ARGV[0], TG_ARGV[1], amount, sign, changed);
  RETURN NULL;
END
$$;

CREATE TRIGGER tasks_held_in AFTER INSERT ON tasks REFERENCING NEW TABLE AS added
  FOR EACH STATEMENT EXECUTE FUNCTION count_user_holdings('tasks', 'owner_id', '1');
CREATE TRIGGER tasks_held_out AFTER DELETE ON tasks REFERENCING OLD TABLE AS removed
  FOR EACH STATEMENT EXECUTE FUNCTION count_user_holdings('tasks', 'owner_id', '1');
CREATE TRIGGER tags_held_in AFTER INSERT ON tags REFERENCING NEW TABLE AS added
  FOR EACH STATEMENT EXECUTE FUNCTION count_user_holdings('tags', 'owner_id', '1');
CREATE TRIGGER tags_held_out AFTER DELETE ON tags REFERENCING OLD TABLE AS removed
  FOR EACH STATEMENT EXECUTE FUNCTION count_user_holdings('tags', 'owner_id', '1');
CREATE TRIGGER webhooks_held_in AFTER INSERT ON webhooks REFERENCING NEW TABLE AS added
  FOR EACH STATEMENT EXECUTE FUNCTION count_user_holdings('webhooks', 'owner_id', '1');
CREATE TRIGGER webhooks_held_out AFTER DELETE ON webhooks REFERENCING OLD TABLE AS removed
  FOR EACH STATEMENT EXECUTE FUNCTION count_user_holdings('webhooks', 'owner_id', '1');
CREATE TRIGGER attachments_held_in AFTER INSERT ON attachments REFERENCING NEW TABLE AS added
  FOR EACH STATEMENT EXECUTE FUNCTION count_user_holdings('storage_bytes', 'uploaded_by', 'size');
CREATE TRIGGER attachments_held_out AFTER DELETE ON attachments REFERENCING OLD TABLE AS removed
  FOR EACH STATEMENT EXECUTE FUNCTION count_user_holdings('storage_bytes', 'uploaded_by', 'size');
