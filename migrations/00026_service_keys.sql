-- Service keys (issue 37.1): long-lived, scoped, revocable credentials of
-- one organization, for a service rather than a person (a runtime that
-- reports Run status, a product backend that starts Runs). A key is the
-- token sdk_<organization>_<prefix>_<secret>; the row holds the SHA-256 of
-- the secret alone, so a copy of this table authenticates nobody. The
-- prefix names the key in logs and in the actor of what it does
-- (key:<prefix>). Revoking sets revoked_at; the row stays, as the record
-- of who made and who revoked the key.
--
-- A tenant table: a key is found by the organization and the prefix its
-- token carries, one shard's lookup on a distributed engine.

-- +goose Up

CREATE TABLE agent.service_keys (
    organization_id uuid        NOT NULL,
    id              uuid        NOT NULL,
    prefix          text        NOT NULL,
    secret_hash     bytea       NOT NULL,
    name            text        NOT NULL,
    scopes          text[]      NOT NULL,
    created_at      timestamptz NOT NULL,
    created_by      text        NOT NULL,
    -- NULL: the key does not expire.
    expires_at      timestamptz,
    -- Written at most once a minute (servicekeys.LastUsedInterval).
    last_used_at    timestamptz,
    revoked_at      timestamptz,
    revoked_by      text,

    CONSTRAINT service_keys_pkey PRIMARY KEY (organization_id, id),
    CONSTRAINT service_keys_prefix_key UNIQUE (organization_id, prefix),
    CONSTRAINT service_keys_prefix_check CHECK (prefix ~ '^[a-z2-7]{8}$'),
    CONSTRAINT service_keys_secret_hash_check CHECK (octet_length(secret_hash) = 32),
    CONSTRAINT service_keys_name_check CHECK (name <> '' AND char_length(name) <= 200),
    CONSTRAINT service_keys_scopes_check CHECK (
        cardinality(scopes) BETWEEN 1 AND 16 AND array_position(scopes, NULL) IS NULL),
    CONSTRAINT service_keys_created_by_check CHECK (octet_length(created_by) <= 255),
    CONSTRAINT service_keys_revoked_by_check CHECK (revoked_by IS NULL OR octet_length(revoked_by) <= 255),
    CONSTRAINT service_keys_expiry_check CHECK (expires_at IS NULL OR expires_at > created_at),
    CONSTRAINT service_keys_revoked_check CHECK ((revoked_at IS NULL) = (revoked_by IS NULL))
);

COMMENT ON TABLE agent.service_keys IS
    'service keys of an organization: the SHA-256 of each secret, never the secret; found by (organization_id, prefix), which the token carries';

SELECT agent.distribute_tenant_table('agent.service_keys');

-- +goose Down
DROP TABLE agent.service_keys;
