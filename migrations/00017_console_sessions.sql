-- The console's server-side sessions (issue 27). A person who signs in to
-- the console (through the company's OpenID Connect provider, or with a
-- pasted token in development) gets a random secret in a cookie; the row
-- found by the secret's SHA-256 says who they are until it expires or
-- they sign out, which deletes it. The secret itself is never stored, so
-- a copy of this table signs nobody in.

-- +goose Up

CREATE TABLE agent.console_sessions (
    id              uuid        PRIMARY KEY,
    secret_hash     bytea       NOT NULL,
    -- NULL for an operator who names no organization.
    organization_id uuid,
    actor           text        NOT NULL,
    role            text        NOT NULL,
    -- How the person signed in: through the provider, or with a token.
    via             text        NOT NULL,
    created_at      timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL,

    CONSTRAINT console_sessions_secret_hash_key UNIQUE (secret_hash),
    CONSTRAINT console_sessions_secret_hash_check CHECK (octet_length(secret_hash) = 32),
    CONSTRAINT console_sessions_actor_check CHECK (octet_length(actor) <= 255),
    CONSTRAINT console_sessions_role_check CHECK (role ~ '^[a-z_]{0,32}$'),
    CONSTRAINT console_sessions_via_check CHECK (via IN ('oidc', 'token')),
    CONSTRAINT console_sessions_expiry_check CHECK (expires_at > created_at),
    CONSTRAINT console_sessions_principal_check CHECK (organization_id IS NOT NULL OR role = 'operator')
);

-- The sweeper's read of expired sessions, oldest first.
CREATE INDEX console_sessions_expires_idx ON agent.console_sessions (expires_at, id);

-- +goose Down
DROP TABLE agent.console_sessions;
