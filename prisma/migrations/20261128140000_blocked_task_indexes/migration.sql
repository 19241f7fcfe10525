-- Written by hand (schema.prisma cannot state partial indexes): GET /tasks?blocked=true pages the
-- blocked tasks along these, one per list branch (all tasks, an owner's, an assignee's, a project's)
-- and sort key, as the list's own indexes page all tasks. Blocked tasks are few: filtering the
-- list's scans would step over many unblocked rows per row shown. Partial, so an unblocked task
-- (most of them) is written to none of them.
CREATE INDEX "tasks_blocked_created_at_id_idx" ON "tasks"("created_at", "id") WHERE "open_blockers" > 0;
CREATE INDEX "tasks_blocked_updated_at_id_idx" ON "tasks"("updated_at", "id") WHERE "open_blockers" > 0;
CREATE INDEX "tasks_blocked_priority_id_idx" ON "tasks"("priority", "id") WHERE "open_blockers" > 0;
CREATE INDEX "tasks_blocked_title_id_idx" ON "tasks"("title", "id") WHERE "open_blockers" > 0;
CREATE INDEX "tasks_blocked_due_key_id_idx" ON "tasks"((COALESCE("due_at", 'infinity'::timestamptz)), "id") WHERE "open_blockers" > 0;
CREATE INDEX "tasks_blocked_owner_id_created_at_id_idx" ON "tasks"("owner_id", "created_at", "id") WHERE "open_blockers" > 0;
CREATE INDEX "tasks_blocked_owner_id_updated_at_id_idx" ON "tasks"("owner_id", "updated_at", "id") WHERE "open_blockers" > 0;
CREATE INDEX "tasks_blocked_owner_id_priority_id_idx" ON "tasks"("owner_id", "priority", "id") WHERE "open_blockers" > 0;
CREATE INDEX "tasks_blocked_owner_id_title_id_idx" ON "tasks"("owner_id", "title", "id") WHERE "open_blockers" > 0;
CREATE INDEX "tasks_blocked_owner_id_due_key_id_idx" ON "tasks"("owner_id", (COALESCE("due_at", 'infinity'::timestamptz)), "id") WHERE "open_blockers" > 0;
CREATE INDEX "tasks_blocked_assignee_id_created_at_id_idx" ON "tasks"("assignee_id", "created_at", "id") WHERE "open_blockers" > 0;
CREATE INDEX "tasks_blocked_assignee_id_updated_at_id_idx" ON "tasks"("assignee_id", "updated_at", "id") WHERE "open_blockers" > 0;
CREATE INDEX "tasks_blocked_assignee_id_priority_id_idx" ON "tasks"("assignee_id", "priority", "id") WHERE "open_blockers" > 0;
CREATE INDEX "tasks_blocked_assignee_id_title_id_idx" ON "tasks"("assignee_id", "title", "id") WHERE "open_blockers" > 0;
CREATE INDEX "tasks_blocked_assignee_id_due_key_id_idx" ON "tasks"("assignee_id", (COALESCE("due_at", 'infinity'::timestamptz)), "id") WHERE "open_blockers" > 0;
CREATE INDEX "tasks_blocked_project_id_created_at_id_idx" ON "tasks"("project_id", "created_at", "id") WHERE "open_blockers" > 0;
CREATE INDEX "tasks_blocked_project_id_updated_at_id_idx" ON "tasks"("project_id", "updated_at", "id") WHERE "open_blockers" > 0;
CREATE INDEX "tasks_blocked_project_id_priority_id_idx" ON "tasks"("project_id", "priority", "id") WHERE "open_blockers" > 0;
CREATE INDEX "tasks_blocked_project_id_title_id_idx" ON "tasks"("project_id", "title", "id") WHERE "open_blockers" > 0;
CREATE INDEX "tasks_blocked_project_id_due_key_id_idx" ON "tasks"("project_id", (COALESCE("due_at", 'infinity'::timestamptz)), "id") WHERE "open_blockers" > 0;

-- Which tasks are blocked goes with who owns them, who is assigned and which project holds them
-- (a project stuck behind one task has most of its tasks blocked): without these the planner takes
-- the two for independent, judges such a party's blocked tasks few, and reads them all to sort them
-- rather than paging along the indexes above.
CREATE STATISTICS "tasks_owner_id_open_blockers_stats" (mcv) ON "owner_id", "open_blockers" FROM "tasks";
CREATE STATISTICS "tasks_assignee_id_open_blockers_stats" (mcv) ON "assignee_id", "open_blockers" FROM "tasks";
CREATE STATISTICS "tasks_project_id_open_blockers_stats" (mcv) ON "project_id", "open_blockers" FROM "tasks";
