-- AlterTable
ALTER TABLE "events" ADD COLUMN     "project_id" UUID;

-- CreateIndex
CREATE INDEX "events_project_id_txid_seq_idx" ON "events"("project_id", "txid", "seq");

