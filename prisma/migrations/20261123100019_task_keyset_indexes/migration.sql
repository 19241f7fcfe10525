-- DropIndex
DROP INDEX "tasks_due_at_id_idx";

-- CreateIndex
CREATE INDEX "tasks_owner_id_updated_at_id_idx" ON "tasks"("owner_id", "updated_at", "id");

-- CreateIndex
CREATE INDEX "tasks_owner_id_priority_id_idx" ON "tasks"("owner_id", "priority", "id");

-- CreateIndex
CREATE INDEX "tasks_owner_id_title_id_idx" ON "tasks"("owner_id", "title", "id");

-- CreateIndex
CREATE INDEX "tasks_assignee_id_updated_at_id_idx" ON "tasks"("assignee_id", "updated_at", "id");

-- CreateIndex
CREATE INDEX "tasks_assignee_id_priority_id_idx" ON "tasks"("assignee_id", "priority", "id");

-- CreateIndex
CREATE INDEX "tasks_assignee_id_title_id_idx" ON "tasks"("assignee_id", "title", "id");

-- CreateIndex
CREATE INDEX "tasks_title_id_idx" ON "tasks"("title", "id");


-- Written by hand (schema.prisma cannot state expression indexes): the due-date sort orders tasks
-- without a due date as due at infinity, so that a row comparison can bound the scan.
CREATE INDEX "tasks_due_key_id_idx" ON "tasks"((COALESCE("due_at", 'infinity'::timestamptz)), "id");
CREATE INDEX "tasks_owner_id_due_key_id_idx" ON "tasks"("owner_id", (COALESCE("due_at", 'infinity'::timestamptz)), "id");
CREATE INDEX "tasks_assignee_id_due_key_id_idx" ON "tasks"("assignee_id", (COALESCE("due_at", 'infinity'::timestamptz)), "id");
