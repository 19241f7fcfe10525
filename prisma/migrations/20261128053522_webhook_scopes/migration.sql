-- A webhook receives only the events the scopes of the credential that created it may read (a
-- personal access token's scopes; a login's: every scope).
ALTER TABLE "webhooks" ADD COLUMN     "scopes" TEXT[];

-- Webhooks made before: every scope, as a login's.
UPDATE "webhooks" SET "scopes" = ARRAY['tasks:read', 'tasks:write', 'tags:read', 'tags:write', 'webhooks:read', 'webhooks:write', 'events:read', 'account:read', 'account:write', 'admin'];
