-- CreateIndex
CREATE INDEX "tasks_updated_at_id_idx" ON "tasks"("updated_at", "id");

-- CreateIndex
CREATE INDEX "tasks_due_at_id_idx" ON "tasks"("due_at", "id");

-- CreateIndex
CREATE INDEX "tasks_priority_id_idx" ON "tasks"("priority", "id");

