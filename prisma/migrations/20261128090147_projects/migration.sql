-- Projects: work shared by a team, with members and their roles. Tasks and tags gain a nullable
-- project (null: personal), and go with their project when it is deleted.

-- CreateEnum
CREATE TYPE "ProjectRole" AS ENUM ('viewer', 'editor', 'admin');


-- AlterTable
ALTER TABLE "tasks" ADD COLUMN     "project_id" UUID;

-- AlterTable
ALTER TABLE "tags" ADD COLUMN     "project_id" UUID;

-- Written by hand (schema.prisma cannot state a partial index): personal tags stay unique per owner
-- ignoring case; a project's tags are unique within their project instead (below), whoever made them.
DROP INDEX "tags_owner_id_name_key_key";
CREATE UNIQUE INDEX "tags_owner_id_name_key_key" ON "tags"("owner_id", "name_key") WHERE "project_id" IS NULL;

-- AlterTable
ALTER TABLE "user_holdings" ADD COLUMN     "projects" INTEGER NOT NULL DEFAULT 0;

-- CreateTable
CREATE TABLE "projects" (
    "id" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "description" TEXT NOT NULL DEFAULT '',
    "created_by" UUID,
    "version" INTEGER NOT NULL DEFAULT 1,
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "projects_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "project_members" (
    "project_id" UUID NOT NULL,
    "user_id" UUID NOT NULL,
    "role" "ProjectRole" NOT NULL,
    "added_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "project_members_pkey" PRIMARY KEY ("project_id","user_id")
);

-- CreateIndex
CREATE INDEX "projects_created_by_idx" ON "projects"("created_by");

-- CreateIndex
CREATE INDEX "projects_name_trgm_idx" ON "projects" USING GIN ("name" gin_trgm_ops);

-- CreateIndex
CREATE INDEX "project_members_user_id_project_id_idx" ON "project_members"("user_id", "project_id");

-- CreateIndex
CREATE INDEX "project_members_project_id_added_at_user_id_idx" ON "project_members"("project_id", "added_at", "user_id");

-- CreateIndex
CREATE INDEX "tasks_project_id_created_at_id_idx" ON "tasks"("project_id", "created_at", "id");

-- CreateIndex
CREATE INDEX "tasks_project_id_updated_at_id_idx" ON "tasks"("project_id", "updated_at", "id");

-- CreateIndex
CREATE INDEX "tasks_project_id_priority_id_idx" ON "tasks"("project_id", "priority", "id");

-- CreateIndex
CREATE INDEX "tasks_project_id_title_id_idx" ON "tasks"("project_id", "title", "id");

-- CreateIndex
CREATE INDEX "tags_project_id_created_at_id_idx" ON "tags"("project_id", "created_at", "id");

-- CreateIndex
CREATE UNIQUE INDEX "tags_project_id_name_key_key" ON "tags"("project_id", "name_key");

-- AddForeignKey
ALTER TABLE "tasks" ADD CONSTRAINT "tasks_project_id_fkey" FOREIGN KEY ("project_id") REFERENCES "projects"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "tags" ADD CONSTRAINT "tags_project_id_fkey" FOREIGN KEY ("project_id") REFERENCES "projects"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "projects" ADD CONSTRAINT "projects_created_by_fkey" FOREIGN KEY ("created_by") REFERENCES "users"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "project_members" ADD CONSTRAINT "project_members_project_id_fkey" FOREIGN KEY ("project_id") REFERENCES "projects"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "project_members" ADD CONSTRAINT "project_members_user_id_fkey" FOREIGN KEY ("user_id") REFERENCES "users"("id") ON DELETE CASCADE ON UPDATE CASCADE;


-- Written by hand (schema.prisma cannot state expression indexes): a project's tasks by due date,
-- as tasks_owner_id_due_key_id_idx orders an owner's (20261123100019_task_keyset_indexes).
CREATE INDEX "tasks_project_id_due_key_id_idx" ON "tasks"("project_id", (COALESCE("due_at", 'infinity'::timestamptz)), "id");

-- USER_MAX_PROJECTS counts the projects a user created, kept in user_holdings as the other quotas are
-- (20261125180000_quota_counters); the recount used by `npm run restore` counts them too.
CREATE TRIGGER projects_held_in AFTER INSERT ON projects REFERENCING NEW TABLE AS added
  FOR EACH STATEMENT EXECUTE FUNCTION count_user_holdings('projects', 'created_by', '1');
CREATE TRIGGER projects_held_out AFTER DELETE ON projects REFERENCING OLD TABLE AS removed
  FOR EACH STATEMENT EXECUTE FUNCTION count_user_holdings('projects', 'created_by', '1');

CREATE OR REPLACE FUNCTION recount_user_holdings() RETURNS void LANGUAGE sql AS $$
  DELETE FROM user_holdings;
  INSERT INTO user_holdings (user_id, slot, tasks, tags, webhooks, storage_bytes, projects)
  SELECT u.id, 0,
    (SELECT count(*) FROM tasks t WHERE t.owner_id = u.id),
    (SELECT count(*) FROM tags g WHERE g.owner_id = u.id),
    (SELECT count(*) FROM webhooks w WHERE w.owner_id = u.id),
    (SELECT coalesce(sum(a.size), 0) FROM attachments a WHERE a.uploaded_by = u.id),
    (SELECT count(*) FROM projects p WHERE p.created_by = u.id)
  FROM users u;
$$;

-- Webhooks made with a login hold every scope there was; with projects they hold the new ones too,
-- so that they go on receiving every event their owner sees (a token's narrower set stays as it is).
UPDATE "webhooks" SET "scopes" = "scopes" || ARRAY['projects:read', 'projects:write']
WHERE "scopes" @> ARRAY['tasks:read', 'tasks:write', 'tags:read', 'tags:write', 'webhooks:read', 'webhooks:write', 'events:read', 'account:read', 'account:write', 'admin'];
