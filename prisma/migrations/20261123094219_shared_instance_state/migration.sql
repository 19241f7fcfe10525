-- CreateTable
-- Unlogged (hand-written; Prisma cannot say it): request counts need no WAL or fsync, an upsert per
-- request costs a third as much, and a crash merely resets the counts.
CREATE UNLOGGED TABLE "request_rate_limits" (
    "key" VARCHAR(255) NOT NULL,
    "points" INTEGER NOT NULL DEFAULT 0,
    "expire" BIGINT,

    CONSTRAINT "request_rate_limits_pkey" PRIMARY KEY ("key")
);

-- CreateTable
CREATE TABLE "signing_keys" (
    "name" TEXT NOT NULL,
    "private_key_pem" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "signing_keys_pkey" PRIMARY KEY ("name")
);

-- CreateTable
CREATE TABLE "maintenance_leases" (
    "job" TEXT NOT NULL,
    "holder" TEXT NOT NULL,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "maintenance_leases_pkey" PRIMARY KEY ("job")
);

