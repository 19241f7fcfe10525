-- CreateEnum
CREATE TYPE "RelationType" AS ENUM ('blocks', 'relates_to', 'duplicates');

-- AlterTable
ALTER TABLE "tasks" ADD COLUMN     "open_blockers" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "parent_id" UUID,
ADD COLUMN     "subtask_count" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "subtasks_done" INTEGER NOT NULL DEFAULT 0;

-- CreateTable
CREATE TABLE "task_relations" (
    "task_id" UUID NOT NULL,
    "type" "RelationType" NOT NULL,
    "other_task_id" UUID NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "task_relations_pkey" PRIMARY KEY ("task_id","type","other_task_id")
);

-- CreateIndex
CREATE INDEX "task_relations_other_task_id_type_task_id_idx" ON "task_relations"("other_task_id", "type", "task_id");

-- AddForeignKey
ALTER TABLE "tasks" ADD CONSTRAINT "tasks_parent_id_fkey" FOREIGN KEY ("parent_id") REFERENCES "tasks"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "task_relations" ADD CONSTRAINT "task_relations_task_id_fkey" FOREIGN KEY ("task_id") REFERENCES "tasks"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "task_relations" ADD CONSTRAINT "task_relations_other_task_id_fkey" FOREIGN KEY ("other_task_id") REFERENCES "tasks"("id") ON DELETE CASCADE ON UPDATE CASCADE;


-- Written by hand (schema.prisma cannot state partial indexes): GET /tasks?parentId= pages a
-- parent's children along one of these per sort key, as a project's tasks are paged, and the
-- parent key's SET NULL finds a deleted task's children. Partial, so a top-level task (most of
-- them) is written to none of them.
CREATE INDEX "tasks_parent_id_created_at_id_idx" ON "tasks"("parent_id", "created_at", "id") WHERE "parent_id" IS NOT NULL;
CREATE INDEX "tasks_parent_id_updated_at_id_idx" ON "tasks"("parent_id", "updated_at", "id") WHERE "parent_id" IS NOT NULL;
CREATE INDEX "tasks_parent_id_priority_id_idx" ON "tasks"("parent_id", "priority", "id") WHERE "parent_id" IS NOT NULL;
CREATE INDEX "tasks_parent_id_title_id_idx" ON "tasks"("parent_id", "title", "id") WHERE "parent_id" IS NOT NULL;
CREATE INDEX "tasks_parent_id_due_key_id_idx" ON "tasks"("parent_id", (COALESCE("due_at", 'infinity'::timestamptz)), "id") WHERE "parent_id" IS NOT NULL;

