-- CreateIndex
CREATE INDEX "idempotency_keys_user_id_created_at_key_idx" ON "idempotency_keys"("user_id", "created_at", "key");

