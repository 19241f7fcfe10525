-- CreateTable
CREATE TABLE "events" (
    "id" UUID NOT NULL,
    "txid" BIGINT NOT NULL DEFAULT ((pg_current_xact_id())::text)::bigint,
    "seq" BIGSERIAL NOT NULL,
    "type" TEXT NOT NULL,
    "occurred_at" TIMESTAMPTZ(3) NOT NULL,
    "actor_id" UUID,
    "data" JSONB NOT NULL,
    "audience" UUID[],

    CONSTRAINT "events_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "event_log_state" (
    "id" INTEGER NOT NULL DEFAULT 1,
    "purged_txid" BIGINT NOT NULL DEFAULT 0,
    "purged_seq" BIGINT NOT NULL DEFAULT 0,

    CONSTRAINT "event_log_state_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "events_txid_seq_idx" ON "events"("txid", "seq");

-- CreateIndex
CREATE INDEX "events_audience_idx" ON "events" USING GIN ("audience");

-- CreateIndex
CREATE INDEX "events_occurred_at_idx" ON "events"("occurred_at");

